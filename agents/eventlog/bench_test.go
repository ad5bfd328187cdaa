package eventlog

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkAppend measures one append to acknowledgement with b.N appends spread over 8
// goroutines (-cpu decides GOMAXPROCS, SetParallelism makes it 8 writers per P at -cpu 1).
func BenchmarkAppend(b *testing.B) {
	l, err := Open(filepath.Join(b.TempDir(), "events.jsonl"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	payload := []byte(`{"cell":7,"output":"ok 1.23 ms/op\n","ms":12.5}`)
	b.SetParallelism(8)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := l.Append(b.Context(), "tool_finished", payload); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkRecovery measures Open of a 10,000-record log: read, validate and position.
func BenchmarkRecovery(b *testing.B) {
	path := filepath.Join(b.TempDir(), "events.jsonl")
	size, err := writeBenchLog(path, 10_000)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	for b.Loop() {
		l, err := Open(path, Options{})
		if err != nil {
			b.Fatal(err)
		}
		l.Close()
	}
	b.ReportMetric(float64(10_000*b.N)/b.Elapsed().Seconds(), "events/s")
}

// TestBench runs the bench small, twice, so that it keeps working and honours its runs, and in
// full under ARBOR_BENCH=1. It asserts nothing about the figures' values.
func TestBench(t *testing.T) {
	t.Parallel()
	sz := benchSize{appends: 5, recovered: 100}
	if os.Getenv("ARBOR_BENCH") == "1" {
		sz = fullBench
	}
	const runs = 2
	r, err := runBench(t.Context(), t.TempDir(), runs, sz)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Figures) != 8 {
		t.Fatalf("%d figures, want 8", len(r.Figures))
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, f := range r.Figures {
		if !(f.Value > 0) || !(f.RefValue > 0) || f.Reference == "" {
			t.Errorf("figure %q: value %v, reference %q %v", f.Name, f.Value, f.Reference, f.RefValue)
		}
		if f.Spread == nil || f.Spread.Runs != runs {
			t.Errorf("figure %q: spread %+v, want %d runs", f.Name, f.Spread, runs)
		}
	}
	r.WriteTable(t.Output())
}
