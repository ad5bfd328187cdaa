package harnessbench

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/arborhq/arbor/agents/harness"
)

// TestGenerate: the entries are valid, distinct, of every kind, and the same for the same n;
// Spread keeps them all and shadows some.
func TestGenerate(t *testing.T) {
	t.Parallel()
	es := Generate(400)
	seen := map[string]bool{}
	kinds := map[harness.Kind]int{}
	for _, e := range es {
		if err := e.Validate(); err != nil {
			t.Fatal(err)
		}
		k := string(e.Kind) + "/" + e.ID
		if seen[k] {
			t.Fatalf("%s twice", k)
		}
		seen[k] = true
		kinds[e.Kind]++
	}
	if len(es) != 400 || len(kinds) != len(harness.Kinds) {
		t.Fatalf("%d entries of kinds %v", len(es), kinds)
	}
	if again := Generate(400); again[399].Title != es[399].Title || again[399].Body != es[399].Body {
		t.Error("Generate is not deterministic")
	}
	n, shadowed := 0, 0
	global := map[string]bool{}
	scopes := Spread(es)
	for _, e := range scopes[2].Entries {
		global[string(e.Kind)+"/"+e.ID] = true
	}
	for _, s := range scopes {
		n += len(s.Entries)
		if s.Scope == "global" {
			continue
		}
		for _, e := range s.Entries {
			if global[string(e.Kind)+"/"+e.ID] {
				shadowed++
			}
		}
	}
	if n != len(es) || shadowed == 0 {
		t.Errorf("spread over scopes: %d entries, %d shadowed; want %d and some", n, shadowed, len(es))
	}
}

// TestBuildStore: the one-commit import is read by the store as the entries themselves, and a
// store that does not hold them is caught by the check.
func TestBuildStore(t *testing.T) {
	t.Parallel()
	es := Generate(120)
	dir := filepath.Join(t.TempDir(), "harness")
	st, err := BuildStore(t.Context(), dir, globalRef, es)
	if err != nil {
		t.Fatal(err)
	}
	h, err := st.History(t.Context(), "", "")
	if err != nil || len(h) != 1 || h[0].Change.Author != "user" {
		t.Fatalf("history %+v (%v), want one commit by user", h, err)
	}
	if err := verify(t.Context(), st, es[:119]); err == nil {
		t.Error("verify accepts a store with an entry more than wanted")
	}
	changed := append([]harness.Entry(nil), es...)
	changed[5].Title += " changed"
	if err := verify(t.Context(), st, changed); err == nil {
		t.Error("verify accepts an entry that reads back otherwise")
	}
}

// TestRunSmall runs the suite end to end with the real binary, small: every figure is a median
// of exactly the runs asked for, each ratio's reference was measured here, and the two goals of
// the issue are on their figures.
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the arbor binary")
	}
	exe := filepath.Join(t.TempDir(), "arbor")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", exe, "github.com/arborhq/arbor/cmd/arbor").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	const runs = 2
	r, err := Run(t.Context(), Options{Exe: exe, Runs: runs, Entries: 200, Iters: 3, Starts: 2})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	r.WriteTable(&b)
	t.Log("\n" + b.String())
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(r.Figures) != 7 {
		t.Fatalf("%d figures, want 7", len(r.Figures))
	}
	goals := map[string]string{}
	for _, f := range r.Figures {
		if f.Spread == nil || f.Spread.Runs != runs {
			t.Errorf("%q: spread %+v, want %d runs", f.Name, f.Spread, runs)
		}
		if f.StatedBy != "" {
			t.Errorf("%q: a stated figure; every figure here is measured", f.Name)
		}
		if f.Goal != "" {
			goals[f.Name] = f.Goal
		}
		if f.Reference == "" && !strings.Contains(f.Name, "minus") {
			t.Errorf("%q has no same-run reference", f.Name)
		}
		if f.Reference != "" && f.RefValue <= 0 {
			t.Errorf("%q: reference %q measured %v", f.Name, f.Reference, f.RefValue)
		}
	}
	if goals["prompt assembly: Render of 200 entries p50"] != "<= 2 ms" || goals["daemon start: with the global store minus without"] != "<= 20 ms" {
		t.Errorf("goals %v: want Render <= 2 ms and the daemon's start <= 20 ms more", goals)
	}
}

// BenchmarkRender is the prompt assembly figure under go test -bench, for profiling.
func BenchmarkRender(b *testing.B) {
	scopes := Spread(Generate(10000))
	for b.Loop() {
		harness.Render(scopes, harness.DefaultBudgetTokens)
	}
}

// BenchmarkRenderColdHeap is Render as the suite times it: each on a freshly collected heap.
func BenchmarkRenderColdHeap(b *testing.B) {
	scopes := Spread(Generate(10000))
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		b.StartTimer()
		harness.Render(scopes, harness.DefaultBudgetTokens)
	}
}
