package heartbeat

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseEveryNamesTheFault(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"10x", []string{`"10x"`, `unknown unit "x"`, "position 3"}},
		{"abc", []string{`"abc"`, "position 1", "number was expected"}},
		{"10", []string{`"10"`, "without a unit", "position 3"}},
		{"5m3", []string{`"5m3"`, "without a unit", "position 4"}},
		{"-5m", []string{"not a positive interval"}},
		{"500ms", []string{"shorter than the minimum of 1s"}},
	} {
		_, err := ParseEvery(tc.in)
		if err == nil || !errors.Is(err, ErrBadSchedule) {
			t.Errorf("%q: err %v", tc.in, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: %q lacks %q", tc.in, err, w)
			}
		}
	}
	for in, want := range map[string]time.Duration{"1s": time.Second, "10m": 10 * time.Minute, "1h30m": 90 * time.Minute} {
		if d, err := ParseEvery(in); err != nil || d != want {
			t.Errorf("%q: %v %v", in, d, err)
		}
	}
}

func TestParseCronNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"61 * * * *", []string{"field 1 (minute)", `"61"`, "position 1"}},
		{"* * * 13 *", []string{"field 4 (month)", `"13"`, "position 7"}},
		{"*/15  25 * * *", []string{"field 2 (hour)", "position 7"}},
		{"* * * * mon-xyz", []string{"field 5 (day of week)", "position 9"}},
		{"* * *", []string{"3 fields, not 5"}},
		{"CRON_TZ=Nowhere/City * * * * *", []string{"time zone", "position 1"}},
		{"@fortnightly", []string{"descriptor", "@fortnightly", "position 1"}},
		{"0 0 30 2 *", []string{"never due"}},
		{"TZ=UTC", []string{"time zone", "not followed by a space"}}, // cron/v3 itself panics on it
		// cron/v3 would run these every second; @every takes what every= does.
		{"@every -5m", []string{"@every", "-5m"}},
		{"@every 0s", []string{"@every", "0s"}},
		{"@every 10ms", []string{"@every", "10ms"}},
	} {
		_, err := ParseCron(tc.in)
		if err == nil || !errors.Is(err, ErrBadSchedule) {
			t.Errorf("%q: err %v", tc.in, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: %q lacks %q", tc.in, err, w)
			}
		}
	}
	for _, ok := range []string{"*/15 * * * *", "0 9 * * mon-fri", "@hourly", "CRON_TZ=UTC 30 2 * * *", "@every 5m"} {
		if _, err := ParseCron(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	if _, err := Parse("1m", "* * * * *", time.Now()); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("both: %v", err)
	}
	if _, err := Parse("", "", time.Now()); err == nil {
		t.Error("neither accepted")
	}
}

func TestCountMissedTicks(t *testing.T) {
	anchor := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e := Every{Anchor: anchor, Interval: 10 * time.Minute}
	if got := e.Next(anchor.Add(25 * time.Minute)); !got.Equal(anchor.Add(30 * time.Minute)) {
		t.Errorf("next = %v", got)
	}
	first := anchor.Add(10 * time.Minute)
	n, next := Count(e, first, anchor.Add(65*time.Minute)) // due at 10, 20, …, 60
	if n != 6 || !next.Equal(anchor.Add(70*time.Minute)) {
		t.Errorf("every: %d %v", n, next)
	}
	if n, next := Count(e, first, first.Add(-time.Second)); n != 0 || !next.Equal(first) {
		t.Errorf("not due: %d %v", n, next)
	}
	c, err := ParseCron("*/15 * * * *")
	if err != nil {
		t.Fatal(err)
	}
	n, next = Count(c, anchor, anchor.Add(2*time.Hour)) // 0:00, 0:15, …, 2:00
	if n != 9 || !next.Equal(anchor.Add(2*time.Hour+15*time.Minute)) {
		t.Errorf("cron: %d %v", n, next)
	}
}

func TestStorePersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heartbeats.json")
	st, err := Open(path)
	if err != nil || len(st.List()) != 0 {
		t.Fatalf("empty store: %v %v", st.List(), err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	h := Heartbeat{ID: "hb1", Session: "s", Instruction: "check CI", Every: "10m", Created: now, Next: now.Add(10 * time.Minute)}
	if err := st.Put(h); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update("hb1", func(h *Heartbeat) bool { h.Ticks, h.Claimed, h.ClaimedCount = 3, 3, 3; return true }); err != nil {
		t.Fatal(err)
	}
	back, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := back.Get("hb1")
	if !ok || got.Ticks != 3 || got.Claimed != 3 || got.Pending() != 0 || !got.Next.Equal(h.Next) || got.Describe() != "every 10m" {
		t.Errorf("reopened: %+v", got)
	}
	if err := back.Delete("nope"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("delete unknown: %v", err)
	}
	if _, err := back.Update("nope", func(*Heartbeat) bool { return true }); !errors.Is(err, ErrNotFound) {
		t.Errorf("update unknown: %v", err)
	}
	if err := back.Delete("hb1"); err != nil {
		t.Fatal(err)
	}
	if again, _ := Open(path); len(again.List()) != 0 {
		t.Errorf("deleted heartbeat came back: %v", again.List())
	}
	os.WriteFile(path, []byte("{"), 0o600)
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("corrupt store: %v", err)
	}
}

// A failed write leaves the store as it was.
func TestStoreWriteFailureChangesNothing(t *testing.T) {
	dir := t.TempDir()
	st, _ := Open(filepath.Join(dir, "sub", "heartbeats.json")) // the directory does not exist
	if err := st.Put(Heartbeat{ID: "a"}); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
	if len(st.List()) != 0 {
		t.Errorf("failed put stayed: %v", st.List())
	}
}

type firing struct {
	id string
	t  Tick
	at time.Time
}

func recorder() (func(string, Tick), func() []firing) {
	var mu sync.Mutex
	var got []firing
	return func(id string, t Tick) {
			mu.Lock()
			got = append(got, firing{id, t, time.Now()})
			mu.Unlock()
		}, func() []firing {
			mu.Lock()
			defer mu.Unlock()
			return append([]firing(nil), got...)
		}
}

// Three heartbeats on one timer: every tick is reported once, in order, never before it is
// due, and every timer wake-up has something due.
func TestSchedulerOneTimerNoEarlyWakeups(t *testing.T) {
	fire, got := recorder()
	s := NewScheduler(fire)
	defer s.Close()
	start := time.Now()
	ivs := map[string]time.Duration{"a": 30 * time.Millisecond, "b": 50 * time.Millisecond, "c": 70 * time.Millisecond}
	for id, iv := range ivs {
		e := Every{Anchor: start, Interval: iv}
		s.Add(id, e, e.Next(start))
	}
	time.Sleep(600 * time.Millisecond)
	s.Close()
	fs := got()
	next := map[string]time.Time{}
	count := map[string]int{}
	for _, f := range fs {
		if f.at.Before(f.t.Due) {
			t.Errorf("%s fired at %v before its due time %v", f.id, f.at, f.t.Due)
		}
		if want, ok := next[f.id]; ok && !want.Equal(f.t.Due) {
			t.Errorf("%s: tick due %v, want %v (a gap or a repeat)", f.id, f.t.Due, want)
		}
		next[f.id] = f.t.Next
		count[f.id] += f.t.Count
	}
	for id, iv := range ivs {
		// Every due time up to the last one waited for was counted, none twice.
		if want := int(next[id].Sub(start)/iv) - 1; count[id] != want {
			t.Errorf("%s: %d ticks counted, %d due", id, count[id], want)
		}
	}
	st := s.Stats()
	if st.Early != 0 || st.Wakeups == 0 || st.Fired != int64(len(fs)) {
		t.Errorf("stats %+v, %d firings", st, len(fs))
	}
}

func TestSchedulerMissedTicksCoalesce(t *testing.T) {
	fire, got := recorder()
	s := NewScheduler(fire)
	defer s.Close()
	now := time.Now()
	e := Every{Anchor: now.Add(-time.Hour), Interval: 10 * time.Minute}
	s.Add("late", e, now.Add(-50*time.Minute)) // due at -50, -40, …, -0: 6 missed (the last maybe not yet)
	deadline := time.Now().Add(5 * time.Second)
	for len(got()) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	fs := got()
	if len(fs) != 1 || fs[0].t.Count < 5 || fs[0].t.Count > 6 || !fs[0].t.Next.After(now) {
		t.Fatalf("firings %+v", fs)
	}
}

func TestSchedulerRemoveAndIdle(t *testing.T) {
	fire, got := recorder()
	s := NewScheduler(fire)
	defer s.Close()
	now := time.Now()
	s.Add("gone", Every{Anchor: now, Interval: 50 * time.Millisecond}, now.Add(50*time.Millisecond))
	s.Add("far", Every{Anchor: now, Interval: time.Hour}, now.Add(time.Hour))
	if !s.Remove("gone") || s.Remove("gone") {
		t.Fatal("remove")
	}
	time.Sleep(300 * time.Millisecond)
	st := s.Stats()
	if len(got()) != 0 || st.Wakeups != 0 || st.Scheduled != 1 {
		t.Errorf("after remove: %v %+v", got(), st)
	}
	if d, ok := s.NextDue("far"); !ok || !d.Equal(now.Add(time.Hour).Round(0)) {
		t.Errorf("next due %v %v", d, ok)
	}
	// An earlier entry re-arms the timer.
	s.Add("soon", Every{Anchor: now, Interval: time.Hour}, time.Now().Add(20*time.Millisecond))
	deadline := time.Now().Add(5 * time.Second)
	for len(got()) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if fs := got(); len(fs) != 1 || fs[0].id != "soon" {
		t.Errorf("firings %+v", fs)
	}
}
