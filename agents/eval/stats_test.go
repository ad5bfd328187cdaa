package eval

import (
	"math"
	"strings"
	"testing"
)

func TestWilson(t *testing.T) {
	// Reference values of the 95% Wilson score interval.
	for _, c := range []struct {
		k, n      int
		low, high float64
	}{
		{48, 100, 0.3846, 0.5768},
		{0, 10, 0, 0.2775},
		{10, 10, 0.7225, 1},
	} {
		r := Wilson(c.k, c.n)
		if math.Abs(r.Low-c.low) > 5e-4 || math.Abs(r.High-c.high) > 5e-4 {
			t.Errorf("Wilson(%d, %d) = [%.4f, %.4f], want [%.4f, %.4f]", c.k, c.n, r.Low, r.High, c.low, c.high)
		}
	}
	if r := Wilson(0, 0); r.N != 0 || r.String() != "–" {
		t.Errorf("no runs: %+v", r)
	}
}

func TestFlags(t *testing.T) {
	check := []string{"check_calc.py"}
	for _, c := range []struct {
		changed []string
		want    string
	}{
		{nil, FlagEmptyDiff},
		{[]string{"calc.py"}, ""},
		{[]string{"test_calc.py"}, FlagTestsOnly},
		{[]string{"tests/helpers.py", "test_calc.py"}, FlagTestsOnly},
		{[]string{"calc.py", "check_calc.py"}, FlagCheckTouched},
		{[]string{"check_calc.py"}, FlagTestsOnly + "," + FlagCheckTouched},
	} {
		if got := strings.Join(Flags(c.changed, check), ","); got != c.want {
			t.Errorf("Flags(%v) = %q, want %q", c.changed, got, c.want)
		}
	}
}

func results(task string, outcomes string, tokens int64) []TaskResult {
	var rs []TaskResult
	for i, o := range outcomes {
		st := Failed
		switch o {
		case 'P':
			st = Passed
		case 'E':
			st = Errored
		}
		rs = append(rs, TaskResult{Task: task, Repeat: i + 1, Status: st, Usage: TaskUsage{InputTokens: tokens}})
	}
	return rs
}

// The report counts errored runs apart, and compare tells a difference beyond the noise the
// repeats measured from one within it.
func TestSummarizeAndCompare(t *testing.T) {
	a := Summarize(&Run{ID: "a", Tasks: []string{"x", "y"}, Repeat: 4},
		append(results("x", "PPPF", 100), results("y", "FFFE", 200)...))
	if a.Passed != 3 || a.Failed != 4 || a.Errored != 1 || a.Rate.N != 7 || a.Pending != 0 {
		t.Fatalf("summary = %+v", a)
	}
	if a.Spread == nil || len(a.PerRepeat) != 4 {
		t.Fatalf("per repeat %v spread %v", a.PerRepeat, a.Spread)
	}
	same := Summarize(&Run{ID: "b"}, append(results("x", "PPFP", 100), results("y", "FFFF", 200)...))
	c := Compare(a, same)
	if c.SuccessNoise == nil || c.SuccessSignificant || !strings.Contains(c.Verdict, "within the noise") {
		t.Errorf("a like run: %+v", c)
	}
	better := Summarize(&Run{ID: "c"}, append(results("x", "PPPP", 100), results("y", "PPPP", 100)...))
	c = Compare(a, better)
	if !c.SuccessSignificant || c.Success <= 0 || !strings.Contains(c.Verdict, "B succeeds more") || c.Tokens >= 0 {
		t.Errorf("a better run: %+v", c)
	}
	once := Compare(Summarize(&Run{ID: "d"}, results("x", "P", 1)), Summarize(&Run{ID: "e"}, results("x", "F", 1)))
	if once.SuccessNoise != nil || !strings.Contains(once.Verdict, "noise is unknown") {
		t.Errorf("without repeats: %+v", once)
	}
}

// A task's refines count in its tokens and cost, and have a column of their own.
func TestRefineTokensCount(t *testing.T) {
	rs := []TaskResult{
		{Task: "a", Status: Passed, Usage: TaskUsage{InputTokens: 100, OutputTokens: 20, RefineCalls: 1, RefineTokens: 50, CostUSD: 1, RefineCostUSD: 0.5}},
		{Task: "a", Repeat: 1, Status: Failed, Usage: TaskUsage{InputTokens: 100, OutputTokens: 20}},
	}
	rep := Summarize(nil, rs)
	if rep.Mean.Tokens() != 145 || rep.Mean.RefineTokens != 25 || rep.Mean.RefineCostUSD != 0.25 {
		t.Errorf("mean usage %+v (tokens %d), want 145 tokens of which 25 refine", rep.Mean, rep.Mean.Tokens())
	}
}
