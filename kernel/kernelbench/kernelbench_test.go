package kernelbench

import (
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
)

// TestRun runs the cheap groups so the harness stays working; -kernelbench runs them all and
// prints the table.
func TestRun(t *testing.T) {
	if _, err := kernel.FindPython(); err != nil {
		t.Skip(err)
	}
	which := []string{"bridge", "death"}
	if *full {
		which = nil
		if *groups != "" {
			which = strings.Split(*groups, ",")
		}
	}
	r, err := Run(t.Context(), which, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	r.WriteTable(&b)
	t.Log("\n" + b.String())
	if len(r.Figures) == 0 {
		t.Fatal("no figures")
	}
	if _, err := Run(t.Context(), []string{"nope"}, slog.Default()); err == nil {
		t.Error("unknown group accepted")
	}
}
