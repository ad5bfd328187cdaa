package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	if got := Percentile(ds, 50); got != 5 {
		t.Errorf("p50 = %v, want 5", got)
	}
	if got := Percentile(ds, 99); got != 10 {
		t.Errorf("p99 = %v, want 10", got)
	}
	if got := Percentile(nil, 50); got != 0 {
		t.Errorf("empty p50 = %v", got)
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		xs     []float64
		median float64
		spread *Spread
	}{
		{nil, 0, nil},
		{[]float64{7}, 7, &Spread{1, 7, 7}},
		{[]float64{3, 1, 2}, 2, &Spread{3, 1, 3}},
		{[]float64{4, 1, 3, 2}, 2.5, &Spread{4, 1, 4}},
	}
	for _, tt := range tests {
		m, s := Median(tt.xs)
		if m != tt.median || (s == nil) != (tt.spread == nil) || s != nil && *s != *tt.spread {
			t.Errorf("Median(%v) = %v, %+v; want %v, %+v", tt.xs, m, s, tt.median, tt.spread)
		}
	}
	m, s := MedianMs([]time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond})
	if m != 2 || *s != (Spread{3, 1, 3}) {
		t.Errorf("MedianMs = %v, %+v", m, s)
	}
}

func TestReportTable(t *testing.T) {
	var r Report
	r.Suite = "kernel"
	r.Add(Figure{Name: "1+1 p50", Value: 6, Unit: "ms", Spread: &Spread{5, 5.5, 7}, Reference: "jupyter_client", RefValue: 12, Goal: "ratio <= 0.7"})
	var b bytes.Buffer
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"0.50x", "5 (5.5–7)", "12 ms (jupyter_client)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "stated") {
		t.Errorf("table has a stated column without a stated figure:\n%s", b.String())
	}
	b.Reset()
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"ratio": 0.5`, `"runs": 5`, `"goal": "ratio <= 0.7"`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("json lacks %s:\n%s", want, b.String())
		}
	}
}

// TestStatedIsNoRatio: a figure stated elsewhere is shown, labelled as not measured here, and
// never divides the value — neither alone nor beside a same-run reference.
func TestStatedIsNoRatio(t *testing.T) {
	alone := Figure{Name: "ready", Value: 20, Unit: "ms", Stated: 693, StatedBy: "seed harness"}
	beside := Figure{Name: "first result", Value: 300, Unit: "ms", Reference: "plain launch", RefValue: 600,
		Stated: 6200, StatedBy: "seed harness"}
	orphan := Figure{Name: "orphan", Value: 5, Unit: "ms", RefValue: 10} // a value with no reference named
	if q := alone.Ratio(); !math.IsNaN(q) {
		t.Errorf("stated figure alone gives ratio %v", q)
	}
	if q := beside.Ratio(); q != 0.5 {
		t.Errorf("ratio beside a stated figure = %v, want 0.5 (value / same-run reference)", q)
	}
	if q := orphan.Ratio(); !math.IsNaN(q) {
		t.Errorf("reference value without a reference gives ratio %v", q)
	}
	r := Report{Suite: "startup", Figures: []Figure{alone, beside}}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}

	var b bytes.Buffer
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if !strings.Contains(lines[0], "stated (not measured here)") {
		t.Errorf("heading does not label the stated column:\n%s", b.String())
	}
	for _, want := range []string{"693 ms (seed harness)", "6200 ms (seed harness)", "0.50x"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	for _, bad := range []string{"0.03x", "0.05x", "28.9x", "20.7x"} { // 20/693, 300/6200 and their inverses
		if strings.Contains(b.String(), bad) {
			t.Errorf("table divides by a stated figure (%s):\n%s", bad, b.String())
		}
	}
	if f := fields(lines[1]); f[len(f)-3] != "-" { // ready: ratio column is "-"
		t.Errorf("stated-only figure has a ratio: %q", lines[1])
	}

	b.Reset()
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Figures []map[string]any `json:"figures"`
	}
	if err := json.Unmarshal(b.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if _, ok := out.Figures[0]["ratio"]; ok {
		t.Errorf("json gives a stated-only figure a ratio: %v", out.Figures[0])
	}
	if out.Figures[0]["stated"] != 693.0 || out.Figures[0]["statedBy"] != "seed harness" {
		t.Errorf("json lacks the stated figure: %v", out.Figures[0])
	}
	if out.Figures[1]["ratio"] != 0.5 {
		t.Errorf("json ratio beside a stated figure = %v, want 0.5", out.Figures[1]["ratio"])
	}
}

// fields splits a table line on runs of two or more spaces, the tabwriter's padding.
func fields(line string) []string {
	var out []string
	for _, f := range strings.Split(strings.TrimSpace(line), "  ") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func TestFigureValidate(t *testing.T) {
	tests := []struct {
		f  Figure
		ok bool
	}{
		{Figure{Name: "a", Value: 1}, true},
		{Figure{Name: "a", Value: 1, Reference: "git", RefValue: 2}, true},
		{Figure{Name: "a", Value: 1, RefValue: 2}, false},
		{Figure{Name: "a", Value: 1, Stated: 2}, false},
		{Figure{Name: "a", Value: 1, Stated: 2, StatedBy: "seed harness"}, true},
		{Figure{Name: "a", Value: 1, Spread: &Spread{}}, false},
	}
	for _, tt := range tests {
		if err := tt.f.Validate(); (err == nil) != tt.ok {
			t.Errorf("Validate(%+v) = %v, want ok %v", tt.f, err, tt.ok)
		}
	}
}
