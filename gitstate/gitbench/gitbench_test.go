package gitbench

import (
	"github.com/arborhq/arbor/bench"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunSmall runs the whole suite on a small repository: every figure present, every
// concurrent fork succeeded. Figures are not asserted (no timed assertions in unit tests).
func TestRunSmall(t *testing.T) {
	t.Parallel()
	rep, err := RunOptions(t.Context(), slog.New(slog.DiscardHandler), Options{Files: 300, Rounds: 2, Concurrent: 6, DiffFiles: 10, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Figures) != 7 {
		t.Fatalf("%d figures, want 7", len(rep.Figures))
	}
	for _, f := range rep.Figures {
		if f.Value <= 0 || math.IsNaN(f.Ratio()) {
			t.Errorf("figure %+v has no value or reference", f)
		}
		// Every figure, the concurrent forks too, is the median of Rounds runs.
		if s := f.Spread; s == nil || s.Runs != 2 || s.Min > f.Value || f.Value > s.Max {
			t.Errorf("figure %q: spread %+v, want 2 runs around %v", f.Name, s, f.Value)
		}
	}
	// Every fork of ours must succeed. The reference's count is reported, not required: plain
	// `git worktree add` run 6 at once loses some to git's own lock files on a loaded machine.
	if n := rep.Figures[5].Note; !strings.HasPrefix(n, "12/12 succeeded over 2 rounds (git: ") {
		t.Errorf("concurrent note = %q, want 12/12 succeeded over 2 rounds", n)
	}
	var b strings.Builder
	rep.WriteTable(&b)
	t.Log("\n" + b.String())
}

// TestRunFull runs the standard suite when ARBOR_BENCH_GIT=1 (minutes, gigabytes of files), or
// the suite on a clone of ARBOR_BENCH_GIT_SOURCE when that is set too:
//
//	ARBOR_BENCH_GIT=1 go test -run TestRunFull -v ./gitstate/gitbench
func TestRunFull(t *testing.T) {
	if os.Getenv("ARBOR_BENCH_GIT") != "1" {
		t.Skip("set ARBOR_BENCH_GIT=1 to run the 20,000-file suite")
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var rep *bench.Report
	var err error
	if src := os.Getenv("ARBOR_BENCH_GIT_SOURCE"); src != "" {
		rep, err = RunOptions(t.Context(), logger, Options{Source: src})
	} else {
		rep, err = Run(t.Context(), logger)
	}
	if rep != nil {
		var b strings.Builder
		rep.WriteTable(&b)
		t.Log("\n" + b.String())
	}
	if err != nil {
		t.Fatal(err)
	}
}

func TestMain(m *testing.M) {
	SoakWorker() // the soak test re-executes this binary as its worker
	os.Exit(m.Run())
}

// TestSoakSmall: fork/checkpoint/discard in worker processes killed at random moments; after
// each kill the repository reconciles with nothing lost (Soak checks it with the git CLI).
func TestSoakSmall(t *testing.T) {
	t.Parallel()
	ops := 80
	if os.Getenv("ARBOR_SOAK_GIT") == "1" {
		ops = 500
	}
	rep, err := Soak(t.Context(), slog.New(slog.DiscardHandler), SoakOptions{Ops: ops, Files: 50, Dir: t.TempDir(), MaxRun: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Ops < ops {
		t.Errorf("ran %d ops, want %d", rep.Ops, ops)
	}
	t.Logf("%+v", *rep)
}

// TestRunSource measures a clone of an existing repository (here a small generated one).
func TestRunSource(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	if err := Generate(t.Context(), src, 120); err != nil {
		t.Fatal(err)
	}
	rep, err := RunOptions(t.Context(), nil, Options{Source: src, Rounds: 1, Concurrent: 2, Dir: filepath.Join(t.TempDir(), "clone")})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep.Suite, "120 files") || len(rep.Figures) != 7 {
		t.Errorf("report %s with %d figures", rep.Suite, len(rep.Figures))
	}
}
