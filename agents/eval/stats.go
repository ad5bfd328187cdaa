package eval

import (
	"fmt"
	"math"
	"path"
	"slices"
	"sort"
	"strings"
)

// z95 is the normal quantile of a two-sided 95% interval.
const z95 = 1.959964

// Report is a run's report: success with its interval, spending, per-task figures.
type Report struct {
	Run       *Run      `json:"run"`
	Runs      int       `json:"runs"` // task runs recorded
	Pending   int       `json:"pending"`
	Passed    int       `json:"passed"`
	Failed    int       `json:"failed"`
	Errored   int       `json:"errored"`
	Claimed   int       `json:"claimed"`
	False     int       `json:"falseClaims"` // claimed, and the check failed
	Degen     int       `json:"degenerate"`  // runs with any degenerate-output flag
	Rate      Rate      `json:"success"`
	PerRepeat []float64 `json:"perRepeat,omitempty"` // success rate of each repeat over its tasks
	// Spread is the standard deviation of PerRepeat (the run-to-run noise), when there are at
	// least two repeats.
	Spread  *float64      `json:"spread,omitempty"`
	Mean    TaskUsage     `json:"meanUsage"` // per task run, errored ones excluded
	WallMs  float64       `json:"meanWallMs"`
	Tasks   []TaskSummary `json:"tasks"`
	Results []TaskResult  `json:"results"`
}

// Rate is a success rate with its 95% Wilson interval.
type Rate struct {
	K    int     `json:"passed"`
	N    int     `json:"of"`
	P    float64 `json:"rate"`
	Low  float64 `json:"low"`
	High float64 `json:"high"`
}

// Wilson returns k of n with its 95% Wilson score interval.
func Wilson(k, n int) Rate {
	if n == 0 {
		return Rate{}
	}
	p := float64(k) / float64(n)
	z2 := z95 * z95
	nf := float64(n)
	den := 1 + z2/nf
	mid := (p + z2/(2*nf)) / den
	half := z95 * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf)) / den
	return Rate{K: k, N: n, P: p, Low: math.Max(0, mid-half), High: math.Min(1, mid+half)}
}

func (r Rate) String() string {
	if r.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%d/%d = %.0f%% (95%% CI %.0f–%.0f%%)", r.K, r.N, 100*r.P, 100*r.Low, 100*r.High)
}

// TaskSummary is one task over its repeats.
type TaskSummary struct {
	Task      string         `json:"task"`
	Split     string         `json:"split"`
	Runs      int            `json:"runs"`
	Passed    int            `json:"passed"`
	Errored   int            `json:"errored"`
	Claimed   int            `json:"claimed"`
	False     int            `json:"falseClaims"`
	Rate      float64        `json:"rate"`     // over runs that did not error
	Tokens    float64        `json:"tokens"`   // mean input+output per run
	TokensSD  float64        `json:"tokensSD"` // their sample standard deviation (0 for one run)
	Cached    float64        `json:"cached"`   // mean cached input tokens per run
	CostUSD   float64        `json:"costUSD"`  // mean per run
	WallMs    float64        `json:"wallMs"`   // mean per run
	Flags     map[string]int `json:"flags,omitempty"`
	successes []float64
	tokens    []float64
}

// Summarize reports a run from its results.
func Summarize(run *Run, results []TaskResult) *Report {
	s := &Report{Run: run, Runs: len(results), Results: results}
	byTask := map[string]*TaskSummary{}
	repeatOK, repeatN := map[int]int{}, map[int]int{}
	var usage TaskUsage
	var wall float64
	valid := 0
	for _, r := range results {
		t := byTask[r.Task]
		if t == nil {
			t = &TaskSummary{Task: r.Task, Split: r.Split, Flags: map[string]int{}}
			byTask[r.Task] = t
		}
		t.Runs++
		if r.Claimed {
			s.Claimed++
			t.Claimed++
		}
		if r.FalseClaim() {
			s.False++
			t.False++
		}
		if len(r.Flags) > 0 {
			s.Degen++
		}
		for _, f := range r.Flags {
			t.Flags[f]++
		}
		switch r.Status {
		case Errored:
			s.Errored++
			t.Errored++
			continue
		case Passed:
			s.Passed++
			t.Passed++
			repeatOK[r.Repeat]++
			t.successes = append(t.successes, 1)
		default:
			s.Failed++
			t.successes = append(t.successes, 0)
		}
		repeatN[r.Repeat]++
		valid++
		tok := float64(r.Usage.Tokens())
		t.tokens = append(t.tokens, tok)
		t.Tokens += tok
		t.Cached += float64(r.Usage.CachedInputTokens)
		t.CostUSD += r.Usage.CostUSD + r.Usage.RefineCostUSD
		t.WallMs += float64(r.WallMs)
		usage.InputTokens += r.Usage.InputTokens
		usage.OutputTokens += r.Usage.OutputTokens
		usage.CachedInputTokens += r.Usage.CachedInputTokens
		usage.CostUSD += r.Usage.CostUSD
		usage.ModelCalls += r.Usage.ModelCalls
		usage.RefineCalls += r.Usage.RefineCalls
		usage.RefineTokens += r.Usage.RefineTokens
		usage.RefineCostUSD += r.Usage.RefineCostUSD
		wall += float64(r.WallMs)
	}
	if run != nil {
		s.Pending = len(run.Tasks)*run.Repeat - len(results)
		if s.Pending < 0 {
			s.Pending = 0
		}
	}
	s.Rate = Wilson(s.Passed, s.Passed+s.Failed)
	if valid > 0 {
		n := int64(valid)
		s.Mean = TaskUsage{InputTokens: usage.InputTokens / n, OutputTokens: usage.OutputTokens / n,
			CachedInputTokens: usage.CachedInputTokens / n, CostUSD: usage.CostUSD / float64(valid), ModelCalls: usage.ModelCalls / n,
			RefineCalls: usage.RefineCalls / n, RefineTokens: usage.RefineTokens / n, RefineCostUSD: usage.RefineCostUSD / float64(valid)}
		s.WallMs = wall / float64(valid)
	}
	var reps []int
	for k := range repeatN {
		reps = append(reps, k)
	}
	sort.Ints(reps)
	for _, k := range reps {
		s.PerRepeat = append(s.PerRepeat, float64(repeatOK[k])/float64(repeatN[k]))
	}
	if len(s.PerRepeat) >= 2 {
		sd := stddev(s.PerRepeat)
		s.Spread = &sd
	}
	for _, t := range byTask {
		if n := len(t.successes); n > 0 {
			t.Rate = mean(t.successes)
			t.Tokens /= float64(n)
			t.Cached /= float64(n)
			t.CostUSD /= float64(n)
			t.WallMs /= float64(n)
			t.TokensSD = stddev(t.tokens)
		}
		s.Tasks = append(s.Tasks, *t)
	}
	sort.Slice(s.Tasks, func(i, j int) bool { return s.Tasks[i].Task < s.Tasks[j].Task })
	return s
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var t float64
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

// stddev is the sample standard deviation (0 for fewer than two values).
func stddev(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	m := mean(xs)
	var ss float64
	for _, x := range xs {
		ss += (x - m) * (x - m)
	}
	return math.Sqrt(ss / float64(len(xs)-1))
}

// Comparison pairs two runs task by task.
type Comparison struct {
	A     *Run       `json:"a"`
	B     *Run       `json:"b"`
	Tasks []TaskPair `json:"tasks"`
	// Success is B's mean per-task success minus A's, over the tasks both ran.
	Success float64 `json:"successDelta"`
	// SuccessNoise is the half-width of the 95% interval of that difference (Agresti–Caffo:
	// each task's rate shrunk toward ½ by one success and one failure), centred on
	// SuccessAdjusted; nil when neither run repeated a task (no noise estimate).
	SuccessNoise    *float64 `json:"successNoise,omitempty"`
	SuccessAdjusted float64  `json:"successAdjusted,omitempty"`
	// Tokens is B's mean tokens per task run over A's, minus 1 (+0.10 = 10% more).
	Tokens      float64  `json:"tokensDelta"`
	TokensNoise *float64 `json:"tokensNoise,omitempty"`
	Verdict     string   `json:"verdict"` // one sentence: which is better, or that the runs cannot tell
	// SuccessSignificant and TokensSignificant say whether a difference exceeds its noise.
	SuccessSignificant bool     `json:"successSignificant"`
	TokensSignificant  bool     `json:"tokensSignificant"`
	OnlyA              []string `json:"onlyA,omitempty"` // tasks one run has and the other does not
	OnlyB              []string `json:"onlyB,omitempty"`
	Warnings           []string `json:"warnings,omitempty"`
}

// TaskPair is one task in both runs.
type TaskPair struct {
	Task    string  `json:"task"`
	A       float64 `json:"a"` // success rate
	B       float64 `json:"b"`
	RunsA   int     `json:"runsA"`
	RunsB   int     `json:"runsB"`
	TokensA float64 `json:"tokensA"`
	TokensB float64 `json:"tokensB"`
}

// Compare pairs runs a and b by task.
func Compare(a, b *Report) *Comparison {
	c := &Comparison{A: a.Run, B: b.Run}
	at, bt := map[string]TaskSummary{}, map[string]TaskSummary{}
	for _, t := range a.Tasks {
		if len(t.successes) > 0 {
			at[t.Task] = t
		}
	}
	for _, t := range b.Tasks {
		if len(t.successes) > 0 {
			bt[t.Task] = t
		}
	}
	var varS, varT, sumA, sumB, adj float64
	repeated := false
	for id, ta := range at {
		tb, ok := bt[id]
		if !ok {
			c.OnlyA = append(c.OnlyA, id)
			continue
		}
		c.Tasks = append(c.Tasks, TaskPair{Task: id, A: ta.Rate, B: tb.Rate, RunsA: len(ta.successes), RunsB: len(tb.successes), TokensA: ta.Tokens, TokensB: tb.Tokens})
		c.Success += tb.Rate - ta.Rate
		sumA += ta.Tokens
		sumB += tb.Tokens
		// Each task's success is binomial; the interval of the difference is Agresti and
		// Caffo's: one success and one failure added to each side, so a few repeats that all
		// agree do not claim there is no noise at all.
		var shrunk [2]float64
		for i, t := range []TaskSummary{ta, tb} {
			n := float64(len(t.successes))
			p := (t.Rate*n + 1) / (n + 2)
			shrunk[i] = p
			varS += p * (1 - p) / (n + 2)
			if n >= 2 {
				repeated = true
				w := t.TokensSD
				varT += w * w / n
			}
		}
		adj += shrunk[1] - shrunk[0]
	}
	for id := range bt {
		if _, ok := at[id]; !ok {
			c.OnlyB = append(c.OnlyB, id)
		}
	}
	sort.Strings(c.OnlyA)
	sort.Strings(c.OnlyB)
	sort.Slice(c.Tasks, func(i, j int) bool { return c.Tasks[i].Task < c.Tasks[j].Task })
	n := float64(len(c.Tasks))
	if n == 0 {
		c.Verdict = "the runs share no task that finished without an error: nothing to compare"
		return c
	}
	c.Success /= n
	adj /= n
	if sumA > 0 {
		c.Tokens = sumB/sumA - 1
	}
	if repeated {
		sn := z95 * math.Sqrt(varS) / n
		c.SuccessNoise = &sn
		c.SuccessAdjusted = adj
		c.SuccessSignificant = math.Abs(adj) > sn+1e-9
		if sumA > 0 {
			tn := z95 * math.Sqrt(varT) / (sumA)
			c.TokensNoise = &tn
			c.TokensSignificant = math.Abs(c.Tokens) > tn+1e-9
		}
	}
	if a.Run != nil && b.Run != nil {
		if a.Run.SuiteHash != b.Run.SuiteHash {
			c.Warnings = append(c.Warnings, "the two runs used different versions of the suite")
		}
		if a.Run.Split != b.Run.Split {
			c.Warnings = append(c.Warnings, fmt.Sprintf("the runs are of different splits (%s, %s)", orAll(a.Run.Split), orAll(b.Run.Split)))
		}
	}
	if len(c.OnlyA)+len(c.OnlyB) > 0 {
		c.Warnings = append(c.Warnings, fmt.Sprintf("%d task(s) are in only one run and are left out", len(c.OnlyA)+len(c.OnlyB)))
	}
	c.Verdict = c.verdict()
	return c
}

func (c *Comparison) verdict() string {
	pts := 100 * c.Success
	var parts []string
	switch {
	case c.SuccessNoise == nil:
		parts = append(parts, fmt.Sprintf("success %+.1f points; no task was repeated, so the noise is unknown (run with --repeat 2 or more to tell a difference from noise)", pts))
	case c.SuccessSignificant && c.Success > 0:
		parts = append(parts, fmt.Sprintf("B succeeds more: %+.1f points (95%% interval %+.1f ± %.1f, clear of zero)", pts, 100*c.SuccessAdjusted, 100**c.SuccessNoise))
	case c.SuccessSignificant:
		parts = append(parts, fmt.Sprintf("B succeeds less: %+.1f points (95%% interval %+.1f ± %.1f, clear of zero)", pts, 100*c.SuccessAdjusted, 100**c.SuccessNoise))
	default:
		parts = append(parts, fmt.Sprintf("success %+.1f points, within the noise (95%% interval %+.1f ± %.1f takes in zero): no measurable difference; more repeats or tasks narrow it", pts, 100*c.SuccessAdjusted, 100**c.SuccessNoise))
	}
	switch {
	case c.TokensNoise == nil:
		parts = append(parts, fmt.Sprintf("tokens per task %+.1f%%", 100*c.Tokens))
	case c.TokensSignificant:
		parts = append(parts, fmt.Sprintf("tokens per task %+.1f%%, beyond the noise of ±%.1f%%", 100*c.Tokens, 100**c.TokensNoise))
	default:
		parts = append(parts, fmt.Sprintf("tokens per task %+.1f%%, within the noise of ±%.1f%%", 100*c.Tokens, 100**c.TokensNoise))
	}
	return strings.Join(parts, "; ")
}

// testGlobs are the paths counted as tests for the tests-only flag.
var testGlobs = []string{"test_*.py", "*_test.py", "conftest.py", "*_test.go", "*.test.*", "*.spec.*"}
var testDirs = []string{"tests", "test", "testdata", "__tests__", "spec"}

// IsTestPath reports whether a slash-separated path is a test file in the usual layouts.
func IsTestPath(p string) bool {
	for _, g := range testGlobs {
		if ok, _ := path.Match(g, path.Base(p)); ok {
			return true
		}
	}
	for _, seg := range strings.Split(path.Dir(p), "/") {
		for _, d := range testDirs {
			if seg == d {
				return true
			}
		}
	}
	return false
}

// generatedDirs and generatedGlobs are generated files: caches a tool would read instead of
// the source.
var (
	generatedDirs  = []string{"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
	generatedGlobs = []string{"*.pyc", "*.pyo"}
)

// IsGeneratedPath reports whether a slash-separated path is a generated file: bytecode or a
// tool's cache. Such paths are never the agent's work, in a verdict's flags or its checkout.
func IsGeneratedPath(p string) bool {
	for _, seg := range strings.Split(path.Dir(p), "/") {
		if slices.Contains(generatedDirs, seg) {
			return true
		}
	}
	for _, g := range generatedGlobs {
		if ok, _ := path.Match(g, path.Base(p)); ok {
			return true
		}
	}
	return slices.Contains(generatedDirs, path.Base(p))
}

// Flags returns the degenerate-output flags of a task run from the paths its branch changed
// and the files its hidden check brings. Generated files (bytecode, caches) are not changes.
func Flags(changed, checkFiles []string) []string {
	changed = slices.DeleteFunc(slices.Clone(changed), IsGeneratedPath)
	if len(changed) == 0 {
		return []string{FlagEmptyDiff}
	}
	check := map[string]bool{}
	for _, f := range checkFiles {
		check[f] = true
	}
	var flags []string
	touched, onlyTests := false, true
	for _, p := range changed {
		if check[p] {
			touched = true
		}
		if !check[p] && !IsTestPath(p) {
			onlyTests = false
		}
	}
	if onlyTests {
		flags = append(flags, FlagTestsOnly)
	}
	if touched {
		flags = append(flags, FlagCheckTouched)
	}
	return flags
}
