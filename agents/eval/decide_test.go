package eval

import (
	"fmt"
	"strings"
	"testing"
)

// slice is a run of n tasks, each repeated len(outcomes) times with those outcomes; tokens gives
// each repeat's tokens in turn.
func slice(id string, n int, outcomes string, tokens ...int64) *Report {
	per := make([]string, n)
	for k := range per {
		per[k] = outcomes
	}
	return sliceOf(id, per, tokens...)
}

// sliceOf is a run whose k-th task has the outcomes per[k].
func sliceOf(id string, per []string, tokens ...int64) *Report {
	var rs []TaskResult
	for k, outcomes := range per {
		task := fmt.Sprintf("t%02d", k)
		for i, o := range outcomes {
			r := results(task, string(o), tokens[i%len(tokens)])[0]
			r.Repeat = i + 1
			rs = append(rs, r)
		}
	}
	return Summarize(&Run{ID: id}, rs)
}

// The gate decides on the noise of the comparison, never on a raw delta: an edit that changes
// nothing on a small slice waits for a person (its interval cannot rule out a drop); on a large
// slice it applies; a clear drop is refused and a clear gain applies; tokens are judged against
// the bound at both ends of their interval; one run per task decides nothing.
func TestDecideOnTheNoise(t *testing.T) {
	b := DefaultGateBounds
	for _, tc := range []struct {
		name string
		a, b *Report
		want GateOutcome
		why  string
	}{
		{"unchanged, 6 tasks × 3", slice("a", 6, "PPP", 100), slice("b", 6, "PPP", 100), GateReview, "cannot rule out a drop of more than 10 points"},
		{"unchanged, 30 tasks × 5", slice("a", 30, "PPPPP", 100), slice("b", 30, "PPPPP", 100), GateApply, "a drop of more than 10 points is ruled out"},
		{"a clear gain", slice("a", 6, "FFF", 100), slice("b", 6, "PPP", 100), GateApply, "ruled out"},
		{"a clear drop", slice("a", 6, "PPP", 100), slice("b", 6, "FFF", 100), GateRefuse, "success drops"},
		{"one fewer pass in 18", slice("a", 6, "PPP", 100), sliceOf("b", []string{"PPF", "PPP", "PPP", "PPP", "PPP", "PPP"}, 100), GateReview, "cannot rule out"},
		{"a gain at twice the tokens", slice("a", 6, "FFF", 100), slice("b", 6, "PPP", 200), GateRefuse, "tokens per task rise by more than 10%"},
		{"tokens within the noise of the bound", slice("a", 30, "PPPP", 100), slice("b", 30, "PPPP", 100, 122), GateReview, "tokens per task may rise by more than 10%"},
		{"one run per task", slice("a", 6, "F", 100), slice("b", 6, "P", 100), GateReview, "noise is unknown"},
		{"nothing in common", slice("a", 0, "P", 100), slice("b", 0, "P", 100), GateReview, "nothing was measured"},
	} {
		got, why := Decide(Compare(tc.a, tc.b), b)
		if got != tc.want || !strings.Contains(why, tc.why) {
			t.Errorf("%s: %s (%s), want %s (%q)", tc.name, got, why, tc.want, tc.why)
		}
	}
	// A wider allowance lets the small unchanged slice apply: the bound is the user's to set.
	if got, why := Decide(Compare(slice("a", 6, "PPP", 100), slice("b", 6, "PPP", 100)), GateBounds{MaxSuccessDrop: 0.25, MaxTokenIncrease: 0.1}); got != GateApply {
		t.Errorf("unchanged under a 25-point allowance: %s (%s)", got, why)
	}
}
