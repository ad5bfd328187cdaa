package longrunbench

import (
	"strings"
	"testing"
	"time"
)

// TestRun runs the suite small: every figure is there and valid, and the wake-up figures
// carry their same-run references. (The figures themselves are printed, never asserted.)
func TestRun(t *testing.T) {
	r, err := Run(t.Context(), Options{Heartbeats: 300, Window: 300 * time.Millisecond, Ticks: 10, Park: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	r.WriteTable(&b)
	t.Log("\n" + b.String())
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range r.Figures {
		names[f.Name] = true
	}
	for _, want := range []string{"idle daemon, 300 heartbeats scheduled: CPU", "idle: scheduler timer wake-ups",
		"heartbeat tick: due time → turn_started p50", "ticking: scheduler timer wake-ups", "ticking: model requests",
		"goal parked on a working child: its model calls"} {
		if !names[want] {
			t.Errorf("no figure %q in %v", want, names)
		}
	}
}
