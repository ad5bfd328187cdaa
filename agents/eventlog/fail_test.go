package eventlog

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestWriteFailureIsSticky: after a failed write nothing more is acknowledged, because what
// reached the disk is unknown (the fsync-failure lesson of PostgreSQL and etcd). Reopening tells.
func TestWriteFailureIsSticky(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "events.jsonl")
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(t.Context(), "ok", 1); err != nil {
		t.Fatal(err)
	}
	// Swap in a read-only handle so that the next write fails.
	ro, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	l.fileMu.Lock()
	rw := l.f
	l.f = ro
	l.fileMu.Unlock()
	if _, err := l.Append(t.Context(), "lost", 2); err == nil {
		t.Fatal("Append succeeded on a read-only file")
	}
	if _, err := l.Append(t.Context(), "after", 3); err == nil {
		t.Fatal("Append succeeded after a failed write")
	}
	if got := l.LastSeq(); got != 1 {
		t.Fatalf("LastSeq = %d after a failed write, want 1", got)
	}
	if recs, err := l.Records(1); err != nil || len(recs) != 1 {
		t.Fatalf("Records = %v, %v", recs, err)
	}
	l.Close()
	rw.Close()
	l, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if r, err := l.Append(t.Context(), "again", 4); err != nil || r.Seq != 2 {
		t.Fatalf("Append after reopen = %+v, %v", r, err)
	}
}

// TestCanceledAppend: a context that is already done stops Append before it takes a seq.
func TestCanceledAppend(t *testing.T) {
	t.Parallel()
	l, _ := openTemp(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := l.Append(ctx, "x", 1); !errors.Is(err, ctx.Err()) {
		t.Fatalf("Append = %v, want %v", err, ctx.Err())
	}
	if r, err := l.Append(t.Context(), "x", 1); err != nil || r.Seq != 1 {
		t.Fatalf("Append = %+v, %v", r, err)
	}
}

// TestNoGoroutineLeak is not parallel so that the goroutine count means something.
func TestNoGoroutineLeak(t *testing.T) {
	base := runtime.NumGoroutine()
	for i := range 3 {
		l, err := Open(filepath.Join(t.TempDir(), "events.jsonl"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, cancel := l.Subscribe(1)
		for range 5 {
			if _, err := l.Append(t.Context(), "x", i); err != nil {
				t.Fatal(err)
			}
		}
		cancel()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Close waits for the writer to finish; give the exiting goroutines a moment to be reaped.
	for range 200 {
		if runtime.NumGoroutine() <= base {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%d goroutines after Close, %d before", runtime.NumGoroutine(), base)
}

func TestOpenRemovesStaleTemps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "events.jsonl")
	keep := path + ".torn-20261129T170000.000000000Z"
	stale := []string{
		filepath.Join(dir, ".events.jsonl.torn-20261129T170000.000000000Z.tmp-123"), // atomicfile's
		filepath.Join(dir, ".events.jsonl.orig-x.tmp-456"),
		path + ".torn-20261129T170000.000000000Z.tmp", // earlier versions'
		path + ".orig-x.tmp",
	}
	for _, name := range append(stale, keep) {
		if err := os.WriteFile(name, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(left) != 2 || left[0] != path || left[1] != keep {
		t.Fatalf("files after Open: %v", left)
	}
}

// TestCloseDuringAppends: appends racing with Close either fail with ErrClosed or are in the
// file, and every acknowledged record is there exactly as acknowledged.
func TestCloseDuringAppends(t *testing.T) {
	t.Parallel()
	l, path := openTemp(t)
	acked := make(chan Record, 1<<16)
	started := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				r, err := l.Append(t.Context(), "tick", []int{w, i})
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				acked <- r
				if i == 10 {
					started <- struct{}{}
				}
			}
		})
	}
	for range 8 {
		<-started
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(acked)
	recs, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for r := range acked {
		n++
		if r.Seq > uint64(len(recs)) || !bytes.Equal(recs[r.Seq-1].Data, r.Data) {
			t.Fatalf("acknowledged %+v not in the file as acknowledged", r)
		}
	}
	if n != len(recs) {
		t.Fatalf("%d acknowledged, %d in the file: Close dropped or invented appends", n, len(recs))
	}
}

func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		opts Options
		ok   bool
	}{
		{Options{}, true},
		{Options{MaxRecordBytes: 1 << 10}, true},
		{Options{MaxRecordBytes: -1}, false},
		{Options{MaxRecordBytes: maxLineBytes + 1}, false},
	} {
		if err := tt.opts.Validate(); (err == nil) != tt.ok {
			t.Errorf("%+v: Validate = %v", tt.opts, err)
		}
		if _, err := Open(filepath.Join(t.TempDir(), "e.jsonl"), tt.opts); !tt.ok && err == nil {
			t.Errorf("%+v: Open accepted invalid options", tt.opts)
		}
	}
}
