// Package heartbeat is the pure part of heartbeats: schedules ("every 10m" or a cron
// expression), the per-session store of heartbeats and their run counters, and one scheduler
// that sleeps until the earliest due tick of all of them.
//
// Call [Parse] to read a schedule, [Open] to read a session's store, and [NewScheduler] with
// the function to call when a heartbeat is due. The package knows nothing of sessions: the
// agents package claims and delivers the ticks it reports.
//
// # Runs and counts
//
// Tick n of a heartbeat is run n. A delivery stands for the runs since the last one: it
// carries the newest run it covers and the count of runs it stands for, so deliveries of
// one heartbeat cover 1..Ticks without gap or overlap, and nothing is dropped by coalescing.
package heartbeat

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/robfig/cron/v3"
)

// MinEvery is the shortest interval of an "every" schedule.
const MinEvery = time.Second

// maxCount bounds the ticks counted one by one for a cron schedule (a minutely cron missed for
// about two years); beyond it the count stops growing, the delivery still comes once.
const maxCount = 1 << 20

// Schedule says when a heartbeat is due: Next returns the first due time after t, or the zero
// time when there is none.
type Schedule interface {
	Next(t time.Time) time.Time
}

// ErrBadSchedule marks an unusable every or cron.
var ErrBadSchedule = errors.New("bad heartbeat schedule")

// Parse reads a heartbeat's schedule: exactly one of every (a Go duration, at least
// [MinEvery]) and cron (five fields, minute hour day-of-month month day-of-week, or a
// descriptor such as @hourly; CRON_TZ=Zone may lead). An every schedule is anchored at anchor:
// it is due at anchor+every, anchor+2·every, …
func Parse(every, cronExpr string, anchor time.Time) (Schedule, error) {
	switch {
	case every != "" && cronExpr != "":
		return nil, fmt.Errorf("%w: give every or cron, not both (every %q, cron %q)", ErrBadSchedule, every, cronExpr)
	case every != "":
		d, err := ParseEvery(every)
		if err != nil {
			return nil, err
		}
		return Every{Anchor: anchor.Round(0), Interval: d}, nil
	case cronExpr != "":
		return ParseCron(cronExpr)
	}
	return nil, fmt.Errorf("%w: give every (like \"10m\") or cron (like \"*/15 * * * *\")", ErrBadSchedule)
}

// Every is due every Interval after Anchor.
type Every struct {
	Anchor   time.Time
	Interval time.Duration
}

// Next returns the first Anchor + k·Interval (k ≥ 1) after t.
func (e Every) Next(t time.Time) time.Time {
	if t.Before(e.Anchor) {
		return e.Anchor.Add(e.Interval)
	}
	k := t.Sub(e.Anchor)/e.Interval + 1
	return e.Anchor.Add(k * e.Interval)
}

// ParseEvery reads an every schedule's duration. A bad one is named, with the position of
// the first character that does not fit and what was expected.
func ParseEvery(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		pos, what := durationFault(s)
		return 0, fmt.Errorf("%w: every %q: %s at position %d; want a number and a unit (ns, us, ms, s, m, h), like \"90s\", \"10m\" or \"1h30m\"", ErrBadSchedule, s, what, pos)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%w: every %q: not a positive interval", ErrBadSchedule, s)
	}
	if d < MinEvery {
		return 0, fmt.Errorf("%w: every %q: %v is shorter than the minimum of %v", ErrBadSchedule, s, d, MinEvery)
	}
	return d, nil
}

// durationFault finds where s stops being a Go duration: the 1-based position and what is
// wrong there.
func durationFault(s string) (int, string) {
	if strings.TrimSpace(s) == "" {
		return 1, "empty"
	}
	i := 0
	if s[0] == '+' || s[0] == '-' {
		if s[0] == '-' {
			return 1, "a negative interval"
		}
		i++
	}
	for i < len(s) {
		start := i
		for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
			i++
		}
		if i == start {
			return i + 1, fmt.Sprintf("%q where a number was expected", rune0(s[i:]))
		}
		u := i
		for i < len(s) && !(s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
			i++
		}
		switch unit := s[u:i]; unit {
		case "ns", "us", "µs", "μs", "ms", "s", "m", "h":
		case "":
			return u + 1, "a number without a unit"
		default:
			return u + 1, fmt.Sprintf("unknown unit %q", unit)
		}
	}
	return len(s), "a value out of range"
}

func rune0(s string) string {
	for _, r := range s {
		return string(r)
	}
	return ""
}

// cronFields names the five fields of a standard cron expression.
var cronFields = []string{"minute", "hour", "day of month", "month", "day of week"}

// cronParser reads standard five-field expressions and descriptors (@hourly, @every 5m).
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseCron reads a cron expression with github.com/robfig/cron/v3. A bad one is named with
// the field (by number and name) and its position in the expression; one that is never due
// (February 30th) is refused too.
func ParseCron(expr string) (Schedule, error) {
	if rest, ok := strings.CutPrefix(strings.TrimSpace(expr), "@every"); ok {
		// The library would raise anything under a second to one second, and accept a
		// negative or zero interval: @every takes what every= does, or is refused naming it.
		if _, err := ParseEvery(strings.TrimSpace(rest)); err != nil {
			return nil, fmt.Errorf("cron %q: @every: %w", expr, err)
		}
	}
	sch, err := parseCron(expr)
	if err != nil {
		return nil, fmt.Errorf("%w: cron %q: %s; want five fields (minute hour day-of-month month day-of-week), like \"*/15 * * * *\", or a descriptor like \"@hourly\"", ErrBadSchedule, expr, cronFault(expr, err))
	}
	if sch.Next(time.Now()).IsZero() {
		return nil, fmt.Errorf("%w: cron %q is never due (no matching time in the next five years)", ErrBadSchedule, expr)
	}
	return sch, nil
}

// parseCron is the library's parser made safe for any input: cron/v3 indexes out of range on
// a time zone prefix with no space after it ("TZ=UTC"), and the input comes from users and
// from model code, so such a prefix is refused first and a panic of the parser is an error.
func parseCron(expr string) (sch cron.Schedule, err error) {
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		if !strings.Contains(expr, " ") {
			return nil, fmt.Errorf("the time zone %q at position 1 is not followed by a space and the schedule", expr)
		}
	}
	defer func() {
		if p := recover(); p != nil {
			sch, err = nil, fmt.Errorf("the cron parser failed on it (%v)", p)
		}
	}()
	return cronParser.Parse(expr)
}

// cronFault says which field of expr the parser refused: each field alone (the others "*")
// is parsed again, and the first that fails is named with its 1-based character position.
func cronFault(expr string, err error) string {
	body := expr
	if strings.HasPrefix(body, "CRON_TZ=") || strings.HasPrefix(body, "TZ=") {
		i := strings.IndexFunc(body, unicode.IsSpace)
		if i < 0 {
			return err.Error()
		}
		if _, zerr := parseCron(body[:i] + " * * * * *"); zerr != nil {
			return fmt.Sprintf("the time zone %q at position 1: %v", body[:i], zerr)
		}
	}
	off := len(expr) - len(body)
	type field struct {
		text string
		pos  int
	}
	var fields []field
	for i := 0; i < len(body); {
		for i < len(body) && unicode.IsSpace(rune(body[i])) {
			i++
		}
		start := i
		for i < len(body) && !unicode.IsSpace(rune(body[i])) {
			i++
		}
		if i > start {
			fields = append(fields, field{body[start:i], off + start + 1})
		}
	}
	if len(fields) > 0 && strings.HasPrefix(fields[0].text, "@") {
		return fmt.Sprintf("descriptor %q at position %d: %v", fields[0].text, fields[0].pos, err)
	}
	if len(fields) > 0 && (strings.HasPrefix(fields[0].text, "CRON_TZ=") || strings.HasPrefix(fields[0].text, "TZ=")) {
		fields = fields[1:]
	}
	if len(fields) != len(cronFields) {
		return fmt.Sprintf("%d fields, not %d", len(fields), len(cronFields))
	}
	for i, f := range fields {
		probe := make([]string, len(cronFields))
		for j := range probe {
			probe[j] = "*"
		}
		probe[i] = f.text
		if _, ferr := parseCron(strings.Join(probe, " ")); ferr != nil {
			return fmt.Sprintf("field %d (%s) %q at position %d: %v", i+1, cronFields[i], f.text, f.pos, ferr)
		}
	}
	return err.Error()
}

// Count returns how many due times of sch fall in [first, now] (first being one) and the
// first due time after now. A late wake-up or a daemon that was down counts every tick it
// missed, so the one delivery that stands for them says how many.
func Count(sch Schedule, first, now time.Time) (int, time.Time) {
	if now.Before(first) {
		return 0, first
	}
	if e, ok := sch.(Every); ok {
		n := int(now.Sub(first)/e.Interval) + 1
		return n, first.Add(time.Duration(n) * e.Interval)
	}
	n, t := 0, first
	for !t.IsZero() && !t.After(now) {
		if n < maxCount {
			n++
			t = sch.Next(t)
		} else {
			t = sch.Next(now)
		}
	}
	return n, t
}
