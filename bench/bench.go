// Package bench formats benchmark figures for `arbor bench`. Every figure is printed beside the
// reference it was measured against in the same run, as a ratio, never as a bare duration.
//
// Call [Report.Add] for each figure, then [Report.WriteTable] or [Report.WriteJSON].
package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"text/tabwriter"
	"time"
)

// Figure is one measured quantity, optionally beside a reference measured in the same run.
type Figure struct {
	Name      string  `json:"name"`
	Value     float64 `json:"value"`
	Unit      string  `json:"unit"`                // "ms", "MB", "MB/s", "events/s", …
	Reference string  `json:"reference,omitempty"` // what the reference was, e.g. "jupyter_client"
	RefValue  float64 `json:"refValue,omitempty"`
	Goal      string  `json:"goal,omitempty"` // e.g. "ratio <= 0.7" or "<= 5 ms"
	Note      string  `json:"note,omitempty"`
}

// Ratio is Value/RefValue, or NaN without a reference.
func (f Figure) Ratio() float64 {
	if f.RefValue == 0 {
		return math.NaN()
	}
	return f.Value / f.RefValue
}

// Report collects figures of one benchmark run.
type Report struct {
	Suite   string   `json:"suite"`
	Figures []Figure `json:"figures"`
}

// Add appends a figure.
func (r *Report) Add(f Figure) { r.Figures = append(r.Figures, f) }

// WriteJSON writes the report as indented JSON, with ratios included.
func (r *Report) WriteJSON(w io.Writer) error {
	type fig struct {
		Figure
		Ratio *float64 `json:"ratio,omitempty"`
	}
	out := struct {
		Suite   string `json:"suite"`
		Figures []fig  `json:"figures"`
	}{Suite: r.Suite}
	for _, f := range r.Figures {
		x := fig{Figure: f}
		if q := f.Ratio(); !math.IsNaN(q) {
			x.Ratio = &q
		}
		out.Figures = append(out.Figures, x)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// WriteTable writes an aligned text table.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s\tvalue\treference\tratio\tgoal\n", r.Suite)
	for _, f := range r.Figures {
		ref, ratio := "-", "-"
		if f.Reference != "" {
			ref = fmt.Sprintf("%s %s (%s)", num(f.RefValue), f.Unit, f.Reference)
		}
		if q := f.Ratio(); !math.IsNaN(q) {
			ratio = fmt.Sprintf("%.2fx", q)
		}
		line := fmt.Sprintf("  %s\t%s %s\t%s\t%s\t%s", f.Name, num(f.Value), f.Unit, ref, ratio, f.Goal)
		if f.Note != "" {
			line += "  # " + f.Note
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

func num(v float64) string {
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1e9:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

// Ms converts a duration to fractional milliseconds.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Percentile returns the p-th percentile (0..100) of ds by nearest rank; ds is sorted in place.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	i := int(math.Ceil(p/100*float64(len(ds)))) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(ds) {
		i = len(ds) - 1
	}
	return ds[i]
}
