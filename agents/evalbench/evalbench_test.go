package evalbench

import (
	"strings"
	"testing"
)

// TestRun runs the suite small (one task, one repeat): both figures are there with their
// same-run references. (The figures themselves are printed, never asserted.)
func TestRun(t *testing.T) {
	r, err := Run(t.Context(), Options{Repeat: 1, Tags: []string{"boundaries"}})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	r.WriteTable(&b)
	t.Log("\n" + b.String())
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(r.Figures) != 2 || r.Figures[0].Reference == "" || r.Figures[1].Reference == "" {
		t.Fatalf("figures = %+v", r.Figures)
	}
}
