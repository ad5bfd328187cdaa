package bench

import (
	"bytes"
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

func TestReportTable(t *testing.T) {
	var r Report
	r.Suite = "kernel"
	r.Add(Figure{Name: "1+1 p50", Value: 6, Unit: "ms", Reference: "jupyter_client", RefValue: 12, Goal: "ratio <= 0.7"})
	var b bytes.Buffer
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "0.50x") {
		t.Errorf("table lacks the ratio:\n%s", b.String())
	}
	b.Reset()
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"ratio": 0.5`) {
		t.Errorf("json lacks the ratio:\n%s", b.String())
	}
}
