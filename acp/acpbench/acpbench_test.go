package acpbench

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arborhq/arbor/kernel"
)

// TestRun builds the real binary and runs the suite briefly: three figures, each beside the
// reference it was measured against in the same run, and updates that really arrived.
func TestRun(t *testing.T) {
	if _, err := kernel.FindPython(); err != nil {
		t.Skip(err)
	}
	exe := filepath.Join(t.TempDir(), "arbor")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", exe, "github.com/arborhq/arbor/cmd/arbor").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	r, err := Run(t.Context(), Options{Exe: exe, Runs: 2, Stream: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	r.WriteTable(&b)
	t.Log("\n" + b.String())
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(r.Figures) != 3 {
		t.Fatalf("%d figures, want 3", len(r.Figures))
	}
	for _, f := range r.Figures {
		if f.Value <= 0 || f.RefValue <= 0 || f.Reference == "" {
			t.Errorf("%q: %v beside %v (%s)", f.Name, f.Value, f.RefValue, f.Reference)
		}
	}
	// The daemon's bound: a printing cell streams at most ten events a second per stream.
	if got := r.Figures[1].RefValue; got > 12 {
		t.Errorf("the daemon recorded %.1f tool_output events/s, above its bound", got)
	}
}
