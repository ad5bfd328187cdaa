// Package bench formats benchmark figures for `arbor bench`. A figure is printed beside the
// reference it was measured against in the same run, as a ratio. A figure stated elsewhere
// (another harness, another machine) may be shown for context in a column of its own, but it
// is never a ratio's denominator: it was not measured here.
//
// Call [Report.Add] for each figure, then [Report.WriteTable] or [Report.WriteJSON]. A figure
// repeated over runs takes its value and spread from [Median] or [MedianMs].
package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"text/tabwriter"
	"time"
)

// Figure is one measured quantity, optionally beside a reference measured in the same run.
type Figure struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"` // "ms", "MB", "MB/s", "events/s", …
	// Spread, when set, says Value is the median of several runs and how far they ranged.
	Spread *Spread `json:"spread,omitempty"`
	// Reference names what RefValue measured in the same run, e.g. "jupyter_client". Without
	// it there is no ratio.
	Reference string  `json:"reference,omitempty"`
	RefValue  float64 `json:"refValue,omitempty"`
	// Stated is a figure stated elsewhere and not measured in this run (the seed harness's own
	// numbers, on its machine), and StatedBy says who stated it. It is context, never a ratio.
	Stated   float64 `json:"stated,omitempty"`
	StatedBy string  `json:"statedBy,omitempty"`
	Goal     string  `json:"goal,omitempty"` // e.g. "ratio <= 0.7" or "<= 5 ms"
	Note     string  `json:"note,omitempty"`
}

// Spread describes the runs a median was taken over.
type Spread struct {
	Runs int     `json:"runs"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
}

// Ratio is Value/RefValue, or NaN without a same-run reference. Stated never enters it.
func (f Figure) Ratio() float64 {
	if f.Reference == "" || f.RefValue == 0 {
		return math.NaN()
	}
	return f.Value / f.RefValue
}

// Validate reports a figure that would print something it does not have: a reference value
// without a name for the reference, or a stated figure without who stated it.
func (f Figure) Validate() error {
	switch {
	case f.RefValue != 0 && f.Reference == "":
		return fmt.Errorf("figure %q: reference value %v names no reference", f.Name, f.RefValue)
	case f.Stated != 0 && f.StatedBy == "":
		return fmt.Errorf("figure %q: stated value %v says not who stated it", f.Name, f.Stated)
	case f.Spread != nil && f.Spread.Runs < 1:
		return fmt.Errorf("figure %q: spread over %d runs", f.Name, f.Spread.Runs)
	}
	return nil
}

// Report collects figures of one benchmark run.
type Report struct {
	Suite   string   `json:"suite"`
	Figures []Figure `json:"figures"`
}

// Add appends a figure.
func (r *Report) Add(f Figure) { r.Figures = append(r.Figures, f) }

// Validate reports the first invalid figure.
func (r *Report) Validate() error {
	for _, f := range r.Figures {
		if err := f.Validate(); err != nil {
			return fmt.Errorf("%s: %w", r.Suite, err)
		}
	}
	return nil
}

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
	enc.SetEscapeHTML(false) // goals read "<= 50 ms", not "\u003c= 50 ms"
	return enc.Encode(out)
}

// WriteTable writes an aligned text table. The stated column appears only when some figure
// has one, and says in its heading that it was not measured here.
func (r *Report) WriteTable(w io.Writer) error {
	stated := slices.ContainsFunc(r.Figures, func(f Figure) bool { return f.StatedBy != "" })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := r.Suite + "\tvalue\truns (min–max)\treference (same run)\tratio\tgoal"
	if stated {
		head += "\tstated (not measured here)"
	}
	fmt.Fprintln(tw, head)
	for _, f := range r.Figures {
		spread, ref, ratio := "-", "-", "-"
		if s := f.Spread; s != nil {
			spread = fmt.Sprintf("%d (%s–%s)", s.Runs, num(s.Min), num(s.Max))
		}
		if f.Reference != "" {
			ref = fmt.Sprintf("%s %s (%s)", num(f.RefValue), f.Unit, f.Reference)
		}
		if q := f.Ratio(); !math.IsNaN(q) {
			ratio = fmt.Sprintf("%.2fx", q)
		}
		goal := f.Goal
		if goal == "" {
			goal = "-"
		}
		line := fmt.Sprintf("  %s\t%s %s\t%s\t%s\t%s\t%s", f.Name, num(f.Value), f.Unit, spread, ref, ratio, goal)
		if stated {
			st := "-"
			if f.StatedBy != "" {
				st = fmt.Sprintf("%s %s (%s)", num(f.Stated), f.Unit, f.StatedBy)
			}
			line += "\t" + st
		}
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

// Median returns the median of xs, one value per run, and their spread; nil for no runs.
// xs is sorted in place.
func Median(xs []float64) (float64, *Spread) {
	if len(xs) == 0 {
		return 0, nil
	}
	slices.Sort(xs)
	n := len(xs)
	m := xs[n/2]
	if n%2 == 0 {
		m = (xs[n/2-1] + xs[n/2]) / 2
	}
	return m, &Spread{Runs: n, Min: xs[0], Max: xs[n-1]}
}

// MedianMs is [Median] of durations, in milliseconds.
func MedianMs(ds []time.Duration) (float64, *Spread) {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = Ms(d)
	}
	return Median(xs)
}

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
