package eventlog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/arborhq/arbor/bench"
)

const benchWriters = 8

// benchSize is how much Bench does; tests run it small.
type benchSize struct {
	appends   int // per writer and round
	recovered int // records in the recovery file
}

var fullBench = benchSize{appends: 500, recovered: 100_000}

// benchPayload is a typical tool_finished event: a bounded output and a little metadata.
var benchPayload = map[string]any{
	"cell":     7,
	"output":   strings.Repeat("ok 1.23 ms/op\n", 24),
	"artifact": "sha256:6f1ed002ab5595859014ebf0951522d9a3c1a1f7d2a5e0c5c1a4d9b3f3e2a1b0",
	"ms":       12.5,
}

// Bench measures the event log in dir for `arbor bench`: append-to-acknowledge latency under 8
// concurrent writers, against a naive write+fsync per append measured in the same run, and
// recovery read speed, against a plain line scan with json.Unmarshal and no checksums. Each
// measurement is repeated runs times (at least 1), ours interleaved with the reference so that
// a burst of load on a shared machine hits both; each figure is the median over the runs.
func Bench(ctx context.Context, dir string, runs int) (*bench.Report, error) {
	return runBench(ctx, dir, max(runs, 1), fullBench)
}

func runBench(ctx context.Context, dir string, runs int, sz benchSize) (*bench.Report, error) {
	r := &bench.Report{Suite: "eventlog"}
	if err := benchAppend(ctx, dir, runs, sz, r); err != nil {
		return nil, err
	}
	if err := benchRecovery(ctx, dir, runs, sz, r); err != nil {
		return nil, err
	}
	return r, nil
}

func benchAppend(ctx context.Context, dir string, runs int, sz benchSize, r *bench.Report) error {
	payload, err := json.Marshal(benchPayload)
	if err != nil {
		return err
	}
	ref := "write+fdatasync per append"
	note := fmt.Sprintf("%d appends a run", benchWriters*sz.appends)
	for _, shared := range []bool{true, false} {
		name := "8 writers, one log"
		if !shared {
			name = "8 writers, a log each"
		}
		var ours, naive [3][]float64 // p50, p99, appends/s per round
		for round := range runs {
			sub := filepath.Join(dir, fmt.Sprintf("append-%v-%d", shared, round))
			lat, wall, err := appendLatencies(ctx, sub, shared, sz.appends, func(path string) (appender, error) {
				return Open(path, Options{})
			}, payload)
			if err != nil {
				return fmt.Errorf("bench append: %w", err)
			}
			addRound(&ours, lat, wall)
			lat, wall, err = appendLatencies(ctx, sub+"-naive", shared, sz.appends, openNaive, payload)
			if err != nil {
				return fmt.Errorf("bench naive append: %w", err)
			}
			addRound(&naive, lat, wall)
		}
		for i, f := range []bench.Figure{
			{Name: "append→ack p50, " + name, Unit: "ms", Note: note},
			{Name: "append→ack p99, " + name, Unit: "ms", Goal: "<= 10 ms"},
			{Name: "appends/s, " + name, Unit: "events/s"},
		} {
			f.Value, f.Spread = bench.Median(ours[i])
			f.Reference, f.RefValue = ref, median(naive[i])
			r.Add(f)
		}
	}
	return nil
}

func addRound(figs *[3][]float64, lat []time.Duration, wall time.Duration) {
	figs[0] = append(figs[0], bench.Ms(bench.Percentile(lat, 50)))
	figs[1] = append(figs[1], bench.Ms(bench.Percentile(lat, 99)))
	figs[2] = append(figs[2], float64(len(lat))/wall.Seconds())
}

func median(xs []float64) float64 {
	m, _ := bench.Median(slices.Clone(xs))
	return m
}

// appender is what the latency loop needs from a log.
type appender interface {
	Append(ctx context.Context, typ string, data any) (Record, error)
	Close() error
}

// appendLatencies runs benchWriters goroutines appending n records each, to one shared log or a
// log each, and returns every append's latency and the wall time.
func appendLatencies(ctx context.Context, dir string, shared bool, n int, open func(string) (appender, error), payload json.RawMessage) ([]time.Duration, time.Duration, error) {
	logs := make([]appender, benchWriters)
	for i := range logs {
		if shared && i > 0 {
			logs[i] = logs[0]
			continue
		}
		l, err := open(filepath.Join(dir, fmt.Sprintf("s%d", i), "events.jsonl"))
		if err != nil {
			return nil, 0, err
		}
		defer l.Close()
		logs[i] = l
	}
	lat := make([]time.Duration, benchWriters*n)
	errs := make([]error, benchWriters)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range benchWriters {
		wg.Go(func() {
			for i := range n {
				t0 := time.Now()
				if _, err := logs[w].Append(ctx, "tool_finished", payload); err != nil {
					errs[w] = err
					return
				}
				lat[w*n+i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return nil, 0, err
		}
	}
	return lat, wall, nil
}

// naiveLog is the reference: encode, then one write and one fdatasync per append under a mutex.
type naiveLog struct {
	mu  sync.Mutex
	f   *os.File
	seq uint64
	buf []byte
}

func openNaive(path string) (appender, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return &naiveLog{f: f}, nil
}

func (n *naiveLog) Append(_ context.Context, typ string, data any) (Record, error) {
	raw, err := marshalData(data)
	if err != nil {
		return Record{}, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.seq++
	rec := Record{Seq: n.seq, TS: time.Now().UTC(), Type: typ, Data: raw}
	n.buf = appendLine(n.buf[:0], rec)
	if _, err := n.f.Write(n.buf); err != nil {
		return Record{}, err
	}
	return rec, syncData(n.f) // the same fdatasync the log uses: only the batching differs
}

func (n *naiveLog) Close() error { return n.f.Close() }

func benchRecovery(ctx context.Context, dir string, runs int, sz benchSize, r *bench.Report) error {
	path := filepath.Join(dir, "recovery", "events.jsonl")
	size, err := writeBenchLog(path, sz.recovered)
	if err != nil {
		return fmt.Errorf("bench recovery: %w", err)
	}
	// Per run, interleaved: Open, ReadFile, then the reference; events/s of each.
	steps := []func() error{
		func() error {
			l, err := Open(path, Options{})
			if err != nil {
				return err
			}
			return l.Close()
		},
		func() error { _, err := ReadFile(path); return err },
		func() error { _, err := naiveRead(path); return err },
	}
	var rates [3][]float64
	for range runs {
		for i, f := range steps {
			if err := ctx.Err(); err != nil {
				return err
			}
			t0 := time.Now()
			if err := f(); err != nil {
				return fmt.Errorf("bench recovery: %w", err)
			}
			rates[i] = append(rates[i], float64(sz.recovered)/time.Since(t0).Seconds())
		}
	}
	refName := "bufio line scan + json.Unmarshal, no CRC"
	ref := median(rates[2])
	note := fmt.Sprintf("%d events, %.1f MB, warm page cache", sz.recovered, float64(size)/1e6)
	for i, f := range []bench.Figure{
		{Name: "recovery: Open (validate all)", Note: note},
		{Name: "recovery: ReadFile (validate, keep all)"},
	} {
		f.Unit, f.Goal, f.Reference, f.RefValue = "events/s", ">= 100000 events/s", refName, ref
		f.Value, f.Spread = bench.Median(rates[i])
		r.Add(f)
	}
	return nil
}

// writeBenchLog writes a valid log of n typical records directly, without an fsync per record.
func writeBenchLog(path string, n int) (int64, error) {
	payload, err := json.Marshal(benchPayload)
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return 0, err
	}
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	ts := time.Now().UTC()
	var line []byte
	var size int64
	for i := 1; i <= n; i++ {
		line = appendLine(line[:0], Record{Seq: uint64(i), TS: ts.Add(time.Duration(i) * time.Millisecond), Type: "tool_finished", Data: payload})
		size += int64(len(line))
		w.Write(line)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return 0, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return 0, err
	}
	return size, f.Close()
}

// naiveRead is the recovery reference: split lines, strip the checksum, json.Unmarshal each.
func naiveRead(path string) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var recs []Record
	for sc.Scan() {
		line := sc.Bytes()
		if i := bytes.LastIndexByte(line, '\t'); i >= 0 {
			line = line[:i]
		}
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
	return recs, sc.Err()
}
