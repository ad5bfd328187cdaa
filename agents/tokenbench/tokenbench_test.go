package tokenbench

import (
	"testing"

	"github.com/arborhq/arbor/kernel"
)

// TestMeasure runs a short trajectory in a 2,000-token window and checks that the figures are
// computed from what they claim: the naive replay matches the session's own requests until the
// first compaction, the session's accounting matches what the model counted, and compaction
// happened and left the later requests smaller than the naive ones.
func TestMeasure(t *testing.T) {
	if _, err := kernel.FindPython(); err != nil {
		t.Skip(err)
	}
	const turns, window = 30, 2000
	r, err := Measure(t.Context(), window, Options{Turns: turns, KernelPython: "/usr/bin/python3"})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Requests) != turns+1 || len(r.Naive) != turns+1 {
		t.Fatalf("%d requests, %d naive; want %d each", len(r.Requests), len(r.Naive), turns+1)
	}
	if r.Compactions == 0 {
		t.Fatal("no compaction in 30 turns of a 2,000-token window")
	}
	var in, cached int64
	first := -1
	for i, q := range r.Requests {
		in += q.Input
		cached += q.Cached
		if q.AfterCompaction && first < 0 {
			first = i
		}
	}
	if first <= 0 {
		t.Fatalf("no request follows a compaction (first at %d)", first)
	}
	// Before the first compaction the session sent the whole history: the naive request.
	for i := range first {
		if r.Requests[i].Chars != r.Naive[i].Chars || r.Requests[i].Input != r.Naive[i].Input {
			t.Errorf("request %d: %+v, naive %+v; want the same before any compaction", i+1, r.Requests[i], r.Naive[i])
		}
	}
	// After it, the naive replay's requests are longer and grow with every one.
	if r.Requests[turns-1].Input >= r.Naive[turns-1].Input {
		t.Errorf("at turn %d: %d input tokens, naive %d; want fewer", turns, r.Requests[turns-1].Input, r.Naive[turns-1].Input)
	}
	for i := 1; i < len(r.Naive); i++ {
		if r.Naive[i].Input <= r.Naive[i-1].Input || r.Naive[i].Cached == 0 {
			t.Errorf("naive request %d: %+v after %+v; want it longer, its prefix cached", i+1, r.Naive[i], r.Naive[i-1])
		}
	}
	// The session's accounting is what the model reported, compaction calls included.
	if got, want := r.Usage.InputTokens, in+r.CompactionInput; got != want {
		t.Errorf("session usage: %d input tokens, the model counted %d", got, want)
	}
	if r.Usage.CachedInputTokens < cached || cached == 0 {
		t.Errorf("session usage: %d cached input tokens, the task's requests alone had %d", r.Usage.CachedInputTokens, cached)
	}
	if r.Usage.ModelCalls != int64(turns+1+r.Compactions) {
		t.Errorf("session usage: %d model calls, want %d", r.Usage.ModelCalls, turns+1+r.Compactions)
	}
	// Every compaction is followed by a request of the task with a new prefix.
	after := 0
	for _, q := range r.Requests {
		if q.AfterCompaction {
			after++
		}
	}
	if after != r.Compactions {
		t.Errorf("%d requests follow a compaction, want one for each of %d", after, r.Compactions)
	}
	if f := StableFraction(r.Requests); f <= 0 || f > 1 {
		t.Errorf("stable fraction %v", f)
	}
	if per := r.CompactionsPer20(); per <= 0 {
		t.Errorf("compactions per 20%% of the window: %v", per)
	}
	t.Logf("compactions %d, stable %.3f, per20 %.2f, turn %d: %d vs naive %d", r.Compactions, StableFraction(r.Requests), r.CompactionsPer20(), turns, r.Requests[turns-1].Input, r.Naive[turns-1].Input)
}

// TestMeasureSuite runs the example suite through the eval runner: every model call of every
// task is measured, the first of each session is set apart, and with no compaction in so short
// a task the naive replay sends the same requests.
func TestMeasureSuite(t *testing.T) {
	if _, err := kernel.FindPython(); err != nil {
		t.Skip(err)
	}
	r, err := MeasureSuite(t.Context(), Options{KernelPython: "/usr/bin/python3"})
	if err != nil {
		t.Fatal(err)
	}
	firsts := 0
	for i, q := range r.Requests {
		if q.AfterCompaction {
			firsts++
			if q.Cached != 0 {
				t.Errorf("request %d, a session's first, has %d cached tokens", i, q.Cached)
			}
		} else if q.Cached == 0 || q.Cached >= q.Input {
			t.Errorf("request %d: %d of %d input tokens cached", i, q.Cached, q.Input)
		}
	}
	if r.Tasks != 12 || firsts != 12 || len(r.Requests) < 24 || len(r.Naive) != len(r.Requests) {
		t.Fatalf("%d tasks, %d sessions, %d requests, %d naive", r.Tasks, firsts, len(r.Requests), len(r.Naive))
	}
	for i := range r.Requests {
		if r.Requests[i].Input != r.Naive[i].Input {
			t.Errorf("request %d: %d input tokens, the naive replay %d", i, r.Requests[i].Input, r.Naive[i].Input)
		}
	}
	if f := StableFraction(r.Requests); f <= 0 || f >= 1 {
		t.Errorf("stable fraction %v", f)
	}
}
