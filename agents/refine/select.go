package refine

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/eventlog"
)

// Defaults of [Options].
const (
	DefaultMaxBytes = 12 << 10
	DefaultLongCell = 30 * time.Second
)

// Options bounds what [Select] picks. The zero value takes the defaults.
type Options struct {
	// MaxBytes bounds the Digest (default DefaultMaxBytes).
	MaxBytes int
	// LongCell is the duration from which a cell counts as long (default DefaultLongCell).
	LongCell time.Duration
}

func (o Options) withDefaults() Options {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.LongCell <= 0 {
		o.LongCell = DefaultLongCell
	}
	return o
}

// Trajectory is what a refinement looks at: the signals of a session's events since a seq.
type Trajectory struct {
	FromSeq, ToSeq uint64          // the range considered: since+1 .. the last seq (empty when ToSeq < FromSeq)
	Items          []Item          // what was selected, in seq order
	Seqs           map[uint64]bool // the seqs an edit may cite as its trigger: the selected items'
	Digest         string          // the text the refiner reads: one block per item
	// Counts says how many signals of each kind the range holds, selected or not: "failures"
	// (failed cells, failed turns, kernel deaths), "retries" (model_retry), "corrections"
	// (messages from the user or the parent after the task) and "longCells".
	Counts map[string]int
	// Omitted is how many candidate items the budget left out (the Digest says so too).
	Omitted int
	// Task is the session's task (its first message), clipped; context, not a citable event.
	Task string
}

// Item is one selected event. Kind is its event type, followed for some by what made it a
// signal: "tool_finished error" (or the cell's other failing status), "tool_finished long",
// "tool_started", "turn_failed", "model_retry", "user_message", "message_queued",
// "assistant_message", "kernel died" (or start_failed).
type Item struct {
	Seq  uint64
	Kind string
	Text string
}

// Priorities: lower is kept first when the budget is tight.
const (
	tierFailure   = iota // failures and corrections
	tierSignal           // retries, long cells, the code of failed cells
	tierCode             // the code of long cells
	tierContext          // the last reply, replies that ran a selected cell
	tierChatter          // other replies
	maxContextMsg = 6    // assistant replies taken at most
)

// Caps on one item's text before the budget is applied, so one huge output cannot crowd out
// every other signal.
const (
	maxOutputText    = 2000
	maxCodeText      = 1500
	maxMessageText   = 1500
	maxAssistantText = 600
	maxTaskText      = 1000
	minClip          = 160 // below this many bytes of room an item is left out rather than cut
	omittedReserve   = 64  // room kept for the line saying what was left out
)

type candidate struct {
	Item
	tier   int
	result *candidate // for tool_started: its cell's result; the code is kept only with it
	keep   bool
}

// Select picks the trajectory since seq since from a session's records (in log order; the
// whole log, or at least from its first user_message, so the task is recognised). It selects
// by event, never by a text tail: failed cells (tool_finished with a status other than ok or
// an error), turn_failed, kernel deaths, model_retry, corrections (a user_message from the user
// or the parent that is not the task — the task being the one from "task" or the session's
// first user_message — and a message_queued from the user not yet delivered in the range), long
// cells (durationMs ≥ opts.LongCell), the tool_started code of the failed and long cells
// (joined by callId), and a few assistant_message texts for context. Records it cannot decode
// (a type this version does not know) are passed over.
//
// The Digest is bounded by opts.MaxBytes: items are kept by priority (failures and
// corrections, then retries, long cells and failed code, then context; newest first within a
// priority), a long text is cut in the middle with a marker, and the kept items are shown in
// seq order. The same records and options give the same bytes.
func Select(recs []eventlog.Record, since uint64, opts Options) Trajectory {
	opts = opts.withDefaults()
	t := Trajectory{FromSeq: since + 1, ToSeq: since, Seqs: map[uint64]bool{},
		Counts: map[string]int{"failures": 0, "retries": 0, "corrections": 0, "longCells": 0}}

	var (
		cands     []*candidate
		started   = map[string]*candidate{} // callId → its latest tool_started in range
		delivered = map[uint64]bool{}       // message_queued seqs delivered by a user_message
		asks      = map[string]*candidate{} // callId → the reply that asked for it
		firstUser = true
		lastReply *candidate
	)
	for _, r := range recs {
		p, err := event.Decode(event.Type(r.Type), r.Data)
		if err != nil {
			continue
		}
		if um, ok := p.(event.UserMessage); ok {
			isTask := um.From == "task" || firstUser
			firstUser = false
			if um.QueuedSeq != 0 {
				delivered[um.QueuedSeq] = true
			}
			if isTask && t.Task == "" {
				t.Task = clip(um.Text, maxTaskText)
			}
			if r.Seq <= since || isTask {
				continue
			}
			if um.From == "user" || um.From == "parent" {
				cands = append(cands, &candidate{Item: Item{r.Seq, "user_message",
					"from " + um.From + ": " + clip(um.Text, maxMessageText)}, tier: tierFailure})
			}
			continue
		}
		if sc, ok := p.(event.SessionCreated); ok && t.Task == "" {
			t.Task = clip(sc.Task, maxTaskText)
		}
		if r.Seq <= since {
			continue
		}
		t.ToSeq = max(t.ToSeq, r.Seq)
		switch p := p.(type) {
		case event.MessageQueued:
			if p.From == "user" {
				cands = append(cands, &candidate{Item: Item{r.Seq, "message_queued",
					"from user (" + p.Mode + "): " + clip(p.Text, maxMessageText)}, tier: tierFailure})
			}
		case event.ToolStarted:
			started[p.CallID] = &candidate{Item: Item{r.Seq, "tool_started", clip(p.Code, maxCodeText)}}
		case event.ToolFinished:
			failed := p.Status != "ok" || p.Error != ""
			long := time.Duration(p.DurationMs)*time.Millisecond >= opts.LongCell
			if !failed && !long {
				continue
			}
			c := &candidate{Item: Item{Seq: r.Seq, Text: cellText(p, failed, long)}}
			if failed {
				t.Counts["failures"]++
				c.tier, c.Kind = tierFailure, "tool_finished "+failStatus(p)
			} else {
				c.tier, c.Kind = tierSignal, "tool_finished long"
			}
			if long {
				t.Counts["longCells"]++
			}
			cands = append(cands, c)
			if s := started[p.CallID]; s != nil {
				delete(started, p.CallID) // a later cell may reuse the id
				s.tier, s.result = tierCode, c
				if failed {
					s.tier = tierSignal
				}
				cands = append(cands, s)
			}
			if a := asks[p.CallID]; a != nil && a.tier > tierContext {
				a.tier = tierContext
			}
		case event.TurnFailed:
			t.Counts["failures"]++
			cands = append(cands, &candidate{Item: Item{r.Seq, "turn_failed",
				fmt.Sprintf("turn %d: %s", p.Turn, clip(p.Error, maxMessageText))}, tier: tierFailure})
		case event.Kernel:
			if p.Event == "died" || p.Event == "start_failed" {
				t.Counts["failures"]++
				cands = append(cands, &candidate{Item: Item{r.Seq, "kernel " + p.Event,
					clip(p.Error, maxMessageText)}, tier: tierFailure})
			}
		case event.ModelRetry:
			t.Counts["retries"]++
			cands = append(cands, &candidate{Item: Item{r.Seq, "model_retry",
				fmt.Sprintf("retry %d: %s", p.Retry, clip(p.Error, maxMessageText))}, tier: tierSignal})
		case event.AssistantMessage:
			c := &candidate{Item: Item{r.Seq, "assistant_message", clip(strings.TrimSpace(p.Text), maxAssistantText)}, tier: tierChatter}
			for _, tc := range p.ToolCalls {
				asks[tc.ID] = c
			}
			if c.Text != "" {
				cands = append(cands, c)
				lastReply = c
			}
		}
	}
	if lastReply != nil {
		lastReply.tier = tierContext
	}
	// A queued message delivered in the range is shown once, as its user_message.
	cands = slices.DeleteFunc(cands, func(c *candidate) bool { return c.Kind == "message_queued" && delivered[c.Seq] })
	for _, c := range cands {
		if c.Kind == "user_message" || c.Kind == "message_queued" {
			t.Counts["corrections"]++
		}
	}

	t.Items, t.Omitted = fit(cands, opts.MaxBytes)
	var b strings.Builder
	for _, it := range t.Items {
		t.Seqs[it.Seq] = true
		b.WriteString(block(it))
	}
	if note := fmt.Sprintf("[… %d more selected events left out for space …]\n", t.Omitted); t.Omitted > 0 && b.Len()+len(note) <= opts.MaxBytes {
		b.WriteString(note)
	}
	t.Digest = b.String()
	return t
}

// fit keeps candidates by priority within maxBytes (less the room for the omission line) and
// returns the kept ones in seq order and how many were left out.
func fit(cands []*candidate, maxBytes int) ([]Item, int) {
	order := slices.Clone(cands)
	slices.SortStableFunc(order, func(a, b *candidate) int {
		return cmp.Or(cmp.Compare(a.tier, b.tier), cmp.Compare(b.Seq, a.Seq))
	})
	room := max(maxBytes-omittedReserve, 0)
	omitted, replies := 0, 0
	for _, c := range order {
		if c.Kind == "assistant_message" && replies == maxContextMsg {
			continue // context, not a signal: not counted as left out
		}
		if c.result != nil && !c.result.keep { // decided before: its tier is lower
			omitted++
			continue
		}
		n := len(block(c.Item))
		if n > room {
			cut := room - (n - len(c.Text))
			if cut < minClip || c.tier > tierSignal {
				omitted++
				continue
			}
			c.Text = clip(c.Text, cut)
			n = len(block(c.Item))
		}
		room -= n
		c.keep = true
		if c.Kind == "assistant_message" {
			replies++
		}
	}
	var out []Item
	for _, c := range cands {
		if c.keep {
			out = append(out, c.Item)
		}
	}
	slices.SortStableFunc(out, func(a, b Item) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, omitted
}

// block is how an item appears in the Digest.
func block(it Item) string {
	return "[seq " + fmt.Sprint(it.Seq) + " " + it.Kind + "]\n" + it.Text + "\n\n"
}

func failStatus(p event.ToolFinished) string {
	if p.Status == "ok" || p.Status == "" {
		return "error"
	}
	return p.Status
}

// cellText is a failed or long cell's result: its error, its duration when long, its output.
func cellText(p event.ToolFinished, failed, long bool) string {
	var b strings.Builder
	if p.Error != "" && !strings.Contains(p.Output, p.Error) {
		b.WriteString(clip(p.Error, maxMessageText) + "\n")
	}
	if long {
		fmt.Fprintf(&b, "(ran %.1fs)\n", float64(p.DurationMs)/1000)
	}
	out := strings.TrimSpace(p.Output)
	if !failed {
		out = clip(out, maxOutputText/4) // a long cell that worked: its time is the signal
	}
	b.WriteString(clip(out, maxOutputText))
	return strings.TrimRight(b.String(), "\n")
}

func clipMarker(n int) string { return fmt.Sprintf("\n[… %d bytes cut …]\n", n) }

// clip keeps s within limit bytes: a third of the head and two thirds of the tail (where a
// traceback's cause is), cut at rune boundaries, with a marker naming what was cut.
func clip(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	room := limit - len(clipMarker(len(s)))
	if room <= 0 {
		return validPrefix(s[:max(limit, 0)])
	}
	head := validPrefix(s[:room/3])
	tail := validSuffix(s[len(s)-(room-len(head)):])
	return head + clipMarker(len(s)-len(head)-len(tail)) + tail
}

// validPrefix and validSuffix drop a rune cut in two at the edge of a slice.
func validPrefix(s string) string {
	for i := 0; i < utf8.UTFMax && len(s) > 0; i++ {
		if r, n := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || n > 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}

func validSuffix(s string) string {
	for i := 0; i < utf8.UTFMax && len(s) > 0 && !utf8.RuneStart(s[0]); i++ {
		s = s[1:]
	}
	return s
}
