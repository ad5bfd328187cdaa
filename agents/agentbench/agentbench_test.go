package agentbench

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arborhq/arbor/kernel"
)

// TestRun runs the suite small, twice: every figure of the agents layer is a median of exactly
// those runs, and the reference harness's stated figures are context, not references.
func TestRun(t *testing.T) {
	if _, err := kernel.FindPython(); err != nil {
		t.Skip(err)
	}
	exe := filepath.Join(t.TempDir(), "arbor") // the disk-budget figure's daemon
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", exe, "github.com/arborhq/arbor/cmd/arbor").CombinedOutput(); err != nil {
		t.Fatalf("build arbor: %v\n%s", err, out)
	}
	const runs = 2
	r, err := Run(t.Context(), Options{Exe: exe, Runs: runs, Spawns: 3, Warm: 3, Sessions: 4, Files: 200, Forks: 4, Budget: 12})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	r.WriteTable(&b)
	t.Log("\n" + b.String())
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	stated, budget := 0, 0
	for _, f := range r.Figures {
		if strings.HasPrefix(f.Name, "disk budget") {
			budget++
			if f.Spread == nil || f.Spread.Runs != 1 {
				t.Errorf("%q: spread %+v, want one run", f.Name, f.Spread)
			}
			continue
		}
		if f.Spread == nil || f.Spread.Runs != runs {
			t.Errorf("%q: spread %+v, want %d runs", f.Name, f.Spread, runs)
		}
		if f.StatedBy != "" {
			stated++
			if f.Reference != "" {
				t.Errorf("%q: a stated figure beside reference %q", f.Name, f.Reference)
			}
		}
	}
	if stated != 2 {
		t.Errorf("%d stated figures, want 2 (spawn and warm round trip)", stated)
	}
	if budget != 2 {
		t.Errorf("%d disk budget figures, want 2", budget)
	}
}
