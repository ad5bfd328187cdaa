package kernelbench

import (
	"cmp"
	"flag"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/arborhq/arbor/kernel"
)

var (
	full   = flag.Bool("kernelbench", false, "run every kernel benchmark group (minutes)")
	groups = flag.String("kernelbench.groups", "", "comma-separated groups to run with -kernelbench")
	runs   = flag.Int("kernelbench.runs", 0, "runs of each measurement with -kernelbench (default 5)")
)

// TestRun runs the cheap groups twice each so the harness stays working and every figure is a
// median of exactly the runs asked for; -kernelbench runs them all and prints the table.
func TestRun(t *testing.T) {
	if _, err := kernel.FindPython(); err != nil {
		t.Skip(err)
	}
	o := Options{Groups: []string{"bridge", "death", "interrupt"}, Runs: 2,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if *full {
		o.Groups, o.Runs = nil, *runs
		if *groups != "" {
			o.Groups = strings.Split(*groups, ",")
		}
	}
	r, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	r.WriteTable(&b)
	t.Log("\n" + b.String())
	if len(r.Figures) == 0 {
		t.Fatal("no figures")
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	want := cmp.Or(o.Runs, 5)
	for _, f := range r.Figures {
		if f.Spread == nil || f.Spread.Runs != want {
			t.Errorf("%q: spread %+v, want %d runs", f.Name, f.Spread, want)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{{Groups: []string{"nope"}}, {Runs: -1}} {
		if _, err := Run(t.Context(), o); err == nil {
			t.Errorf("Run(%+v) accepted", o)
		}
	}
}
