package eventlog

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

func openTemp(t *testing.T) (*Log, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sessions", "s1", "events.jsonl")
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, path
}

func TestAppendReopen(t *testing.T) {
	t.Parallel()
	l, path := openTemp(t)
	ctx := t.Context()
	inputs := []struct {
		typ  string
		data any
		want string
	}{
		{"session_created", map[string]any{"task": "rename <Foo> & co"}, `{"task":"rename <Foo> & co"}`},
		{"user_message", json.RawMessage(`{ "text" : "hi\tthere" }`), `{"text":"hi\tthere"}`},
		{"heartbeat_tick", nil, `null`},
		{"state_changed", struct {
			State string `json:"state"`
		}{"running"}, `{"state":"running"}`},
		{"tool_finished", "line1\nline2", `"line1\nline2"`},
	}
	for i, in := range inputs {
		r, err := l.Append(ctx, in.typ, in.data)
		if err != nil {
			t.Fatal(err)
		}
		if r.Seq != uint64(i+1) || string(r.Data) != in.want || r.Type != in.typ {
			t.Fatalf("Append %d = %+v, want seq %d data %s", i, r, i+1, in.want)
		}
	}
	if got := l.LastSeq(); got != uint64(len(inputs)) {
		t.Fatalf("LastSeq = %d", got)
	}
	recs, err := l.Records(3)
	if err != nil || len(recs) != 3 || recs[0].Seq != 3 {
		t.Fatalf("Records(3) = %v, %v", recs, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close = %v, want ErrClosed", err)
	}
	if _, err := l.Append(ctx, "x", 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close = %v, want ErrClosed", err)
	}
	if _, err := l.Records(1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Records after Close = %v, want ErrClosed", err)
	}

	l2, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if l2.LastSeq() != uint64(len(inputs)) {
		t.Fatalf("reopened LastSeq = %d", l2.LastSeq())
	}
	r, err := l2.Append(ctx, "recovered", map[string]int{"n": 1})
	if err != nil || r.Seq != uint64(len(inputs)+1) {
		t.Fatalf("Append after reopen = %+v, %v", r, err)
	}
	all, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, in := range inputs {
		if all[i].Type != in.typ || string(all[i].Data) != in.want {
			t.Errorf("record %d = %s %s, want %s %s", i+1, all[i].Type, all[i].Data, in.typ, in.want)
		}
	}
	if len(all) != len(inputs)+1 {
		t.Fatalf("ReadFile: %d records", len(all))
	}
}

func TestAppendRejects(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "events.jsonl")
	l, err := Open(path, Options{MaxRecordBytes: 200})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tests := []struct {
		name string
		typ  string
		data any
		is   error
	}{
		{"empty type", "", 1, nil},
		{"bad raw json", "x", json.RawMessage(`{"a":`), nil},
		{"unencodable", "x", make(chan int), nil},
		{"too large", "x", string(make([]byte, 300)), ErrTooLarge},
	}
	for _, tt := range tests {
		_, err := l.Append(t.Context(), tt.typ, tt.data)
		if err == nil || (tt.is != nil && !errors.Is(err, tt.is)) {
			t.Errorf("%s: Append = %v, want error %v", tt.name, err, tt.is)
		}
	}
	// Nothing was written and seqs were not used up.
	if r, err := l.Append(t.Context(), "ok", 1); err != nil || r.Seq != 1 {
		t.Fatalf("Append after rejects = %+v, %v", r, err)
	}
}

func TestConcurrentAppend(t *testing.T) {
	t.Parallel()
	l, path := openTemp(t)
	const writers, each = 8, 50
	var wg sync.WaitGroup
	got := make([][]Record, writers)
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				r, err := l.Append(t.Context(), "tick", map[string]int{"w": w, "i": i})
				if err != nil {
					errs <- err
					return
				}
				got[w] = append(got[w], r)
			}
		})
	}
	// Read while appending: only whole, durable records come back.
	for range 5 {
		if _, err := l.Records(1); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadFile(path); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	recs, err := l.Records(1)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != writers*each {
		t.Fatalf("%d records, want %d", len(recs), writers*each)
	}
	bySeq := map[uint64]Record{}
	for i, r := range recs {
		if r.Seq != uint64(i+1) {
			t.Fatalf("record %d has seq %d", i, r.Seq)
		}
		bySeq[r.Seq] = r
	}
	for w := range writers {
		for i, r := range got[w] {
			if i > 0 && r.Seq <= got[w][i-1].Seq {
				t.Fatalf("writer %d: seq %d after %d", w, r.Seq, got[w][i-1].Seq)
			}
			if string(bySeq[r.Seq].Data) != string(r.Data) {
				t.Fatalf("seq %d: file has %s, Append returned %s", r.Seq, bySeq[r.Seq].Data, r.Data)
			}
		}
	}
}

func TestOpenLocked(t *testing.T) {
	t.Parallel()
	_, path := openTemp(t)
	if _, err := Open(path, Options{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	if _, err := Repair(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("Repair of open log = %v, want ErrLocked", err)
	}
}

func TestOpenCreatesPrivate(t *testing.T) {
	t.Parallel()
	_, path := openTemp(t)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("log mode %v, want 0600", fi.Mode().Perm())
	}
	di, err := os.Stat(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v, want 0700", di.Mode().Perm())
	}
}

// TestRecordsFrom reads from many seqs around index points, with the index built both by
// recovery and by appends.
func TestRecordsFrom(t *testing.T) {
	t.Parallel()
	l, path := openTemp(t)
	appendN := func(l *Log, n int) {
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := range n / 8 {
					if _, err := l.Append(t.Context(), "tick", []int{w, i}); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	appendN(l, 3*indexStride)
	l.Close()
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	appendN(l, indexStride)
	all, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	if len(l.index) != 4 {
		t.Errorf("index has %d entries, want 4", len(l.index))
	}
	l.mu.Unlock()
	last := uint64(len(all))
	if last != 4*indexStride || l.LastSeq() != last {
		t.Fatalf("%d records, LastSeq %d", last, l.LastSeq())
	}
	for _, from := range []uint64{0, 1, 2, indexStride - 1, indexStride, indexStride + 1, indexStride + 2,
		3 * indexStride, 3*indexStride + 1, 3*indexStride + 2, last - 1, last, last + 1, 1 << 40} {
		got, err := l.Records(from)
		if err != nil {
			t.Fatal(err)
		}
		start := min(max(from, 1)-1, last)
		sameRecords(t, got, all[start:])
	}
}

// TestGroupCommit holds the first write until seven more appends have queued behind it, then
// checks that those seven share one write and one sync.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "events.jsonl")
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	release := make(chan struct{})
	var batches []int // written by one writer at a time, read after Close
	l.testHookFlush = func(n int) {
		if len(batches) == 0 {
			<-release
		}
		batches = append(batches, n)
	}
	var wg sync.WaitGroup
	wg.Go(func() { l.Append(t.Context(), "first", 0) })
	for !l.flushing() {
		runtime.Gosched()
	}
	for i := range 7 {
		wg.Go(func() { l.Append(t.Context(), "queued", i) })
	}
	for l.pendingRecords() < 7 {
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	l.Close()
	if len(batches) != 2 || batches[0] != 1 || batches[1] != 7 {
		t.Fatalf("batches %v, want [1 7]", batches)
	}
	if recs, err := ReadFile(path); err != nil || len(recs) != 8 {
		t.Fatalf("ReadFile = %d records, %v", len(recs), err)
	}
}

// flushing reports whether a writer has taken a batch and not yet finished it.
func (l *Log) flushing() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nextSeq > 1 && l.pending == nil && l.durable == 0
}

func (l *Log) pendingRecords() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending == nil {
		return 0
	}
	return len(l.pending.recs)
}
