package eventlog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// AppendMany's records share one write and one fsync, take consecutive seqs and are all
// there after a reopen.
func TestAppendManyOneBatch(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "events.jsonl")
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var batches []int
	l.testHookFlush = func(n int) { batches = append(batches, n) }
	recs, err := l.AppendMany(t.Context(), Entry{"assistant", 1}, Entry{"started", 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Seq != 1 || recs[1].Seq != 2 {
		t.Fatalf("records %+v, want seqs 1 and 2", recs)
	}
	l.Close()
	if len(batches) != 1 || batches[0] != 2 {
		t.Fatalf("batches %v, want one of 2 records", batches)
	}
	got, err := ReadFile(path)
	if err != nil || len(got) != 2 || got[1].Type != "started" {
		t.Fatalf("after reopen: %+v %v", got, err)
	}
}

// A record too large for the log fails AppendMany whole: none of its records is queued, and
// the seqs go on from where they were.
func TestAppendManyTooLargeQueuesNone(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "events.jsonl")
	l, err := Open(path, Options{MaxRecordBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = l.AppendMany(t.Context(), Entry{"small", 1}, Entry{"big", strings.Repeat("x", 2000)})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err %v, want ErrTooLarge", err)
	}
	rec, err := l.Append(t.Context(), "next", 3)
	if err != nil || rec.Seq != 1 {
		t.Fatalf("next append: %+v %v; want seq 1", rec, err)
	}
	if got, _ := l.Records(1); len(got) != 1 || got[0].Type != "next" {
		t.Fatalf("log holds %+v, want only the next record", got)
	}
}

// Write returns once its records are in the file, before their fsync; Wait returns once they
// are durable, and listeners hear of them only then.
func TestWriteBeforeSync(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "events.jsonl")
	var heard atomic.Int64
	l, err := Open(path, Options{OnDurable: func(recs []Record) { heard.Add(int64(len(recs))) }})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	l.testHookSync = func() { <-release }
	p, err := l.Write(t.Context(), Entry{"assistant", 1}, Entry{"started", 2})
	if err != nil {
		t.Fatal(err)
	}
	if p.Record().Seq != 2 || p.Record().Type != "started" {
		t.Fatalf("pending %+v, want the last record, seq 2", p.Record())
	}
	if raw, _ := os.ReadFile(path); strings.Count(string(raw), "\n") != 2 {
		t.Fatalf("Write returned with the file holding %q, want both lines", raw)
	}
	select {
	case <-p.b.done:
		t.Fatal("durable before its fsync")
	default:
	}
	if heard.Load() != 0 {
		t.Fatal("a listener heard of records before they were durable")
	}
	close(release)
	if rec, err := p.Wait(t.Context()); err != nil || rec.Seq != 2 {
		t.Fatalf("wait: %+v %v", rec, err)
	}
	if heard.Load() != 2 {
		t.Fatalf("listeners heard %d records, want 2", heard.Load())
	}
	l.testHookSync = nil
	l.Close()
	if _, err := l.Write(t.Context(), Entry{"late", 3}); !errors.Is(err, ErrClosed) {
		t.Fatalf("write to a closed log: %v", err)
	}
	if got, err := ReadFile(path); err != nil || len(got) != 2 {
		t.Fatalf("after reopen: %d records, %v", len(got), err)
	}
}
