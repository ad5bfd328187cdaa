package startbench

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arborhq/arbor/kernel"
)

// TestRun builds the real binary and runs the suite with two runs: every figure is a median of
// exactly those runs, and a stated figure is never the reference of a ratio.
func TestRun(t *testing.T) {
	if _, err := kernel.FindPython(); err != nil {
		t.Skip(err)
	}
	exe := filepath.Join(t.TempDir(), "arbor")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", exe, "github.com/arborhq/arbor/cmd/arbor").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	const runs = 2
	r, err := Run(t.Context(), exe, runs)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	r.WriteTable(&b)
	t.Log("\n" + b.String())
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(r.Figures) != 4 {
		t.Fatalf("%d figures, want 4", len(r.Figures))
	}
	for _, f := range r.Figures {
		if f.Spread == nil || f.Spread.Runs != runs {
			t.Errorf("%q: spread %+v, want %d runs", f.Name, f.Spread, runs)
		}
		if strings.Contains(f.Reference, "stated") || f.Stated != 0 && f.RefValue == f.Stated {
			t.Errorf("%q: a stated figure is its reference", f.Name)
		}
	}
}
