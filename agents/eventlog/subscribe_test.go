package eventlog

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestSubscribe(t *testing.T) {
	t.Parallel()
	l, _ := openTemp(t)
	ch, cancel := l.Subscribe(100)
	defer cancel()
	for i := range 10 {
		if _, err := l.Append(t.Context(), "tick", i); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		r := <-ch
		if r.Seq != uint64(i+1) {
			t.Fatalf("got seq %d, want %d", r.Seq, i+1)
		}
		if r.Seq > l.LastSeq() {
			t.Fatalf("seq %d delivered before it was durable (LastSeq %d)", r.Seq, l.LastSeq())
		}
	}
	cancel()
	cancel() // idempotent
	if _, ok := <-ch; ok {
		t.Fatal("channel open after cancel")
	}
}

// TestSubscribeSlow: a subscriber that does not read is dropped without blocking appends, and the
// documented reattach (Subscribe, then Records) sees every record exactly once.
func TestSubscribeSlow(t *testing.T) {
	t.Parallel()
	l, _ := openTemp(t)
	slow, cancelSlow := l.Subscribe(2)
	defer cancelSlow()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 25 {
				if _, err := l.Append(t.Context(), "tick", []int{w, i}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait() // would hang if publishing blocked on the full channel
	var last uint64
	for r := range slow { // drains what fit, then sees the close
		last = r.Seq
	}
	if last != 2 {
		t.Fatalf("slow subscriber got up to seq %d before being dropped, want 2", last)
	}

	ch, cancel := l.Subscribe(1000)
	defer cancel()
	missed, err := l.Records(last + 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range missed {
		if r.Seq != last+1 {
			t.Fatalf("gap: seq %d after %d", r.Seq, last)
		}
		last = r.Seq
	}
	if _, err := l.Append(t.Context(), "after", nil); err != nil {
		t.Fatal(err)
	}
	for r := range ch {
		if r.Seq <= last {
			continue // seen through Records already
		}
		if r.Seq != last+1 {
			t.Fatalf("gap: seq %d after %d", r.Seq, last)
		}
		last = r.Seq
		if last == 101 {
			break
		}
	}
}

func TestSubscribeClose(t *testing.T) {
	t.Parallel()
	l, _ := openTemp(t)
	ch, cancel := l.Subscribe(1)
	defer cancel()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-ch; ok {
		t.Fatal("channel open after Close")
	}
	after, _ := l.Subscribe(1)
	if _, ok := <-after; ok {
		t.Fatal("Subscribe after Close returned an open channel")
	}
}

// TestOnDurableInSeqOrder: concurrent appends reach OnDurable once each, in seq order, and
// before their Append returns.
func TestOnDurableInSeqOrder(t *testing.T) {
	var mu sync.Mutex
	var seen []uint64
	l, err := Open(filepath.Join(t.TempDir(), "e.jsonl"), Options{OnDurable: func(recs []Record) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range recs {
			seen = append(seen, r.Seq)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				rec, err := l.Append(context.Background(), "x", i)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				ok := slices.Contains(seen, rec.Seq)
				mu.Unlock()
				if !ok {
					t.Errorf("Append of seq %d returned before OnDurable saw it", rec.Seq)
				}
			}
		}()
	}
	wg.Wait()
	if len(seen) != 400 {
		t.Fatalf("OnDurable saw %d records, want 400", len(seen))
	}
	for i, s := range seen {
		if s != uint64(i+1) {
			t.Fatalf("OnDurable order: position %d has seq %d", i, s)
		}
	}
}

// TestOnDurablePanicIsContained: a panicking OnDurable does not wedge the log: appends are
// acknowledged and the next ones go through.
func TestOnDurablePanicIsContained(t *testing.T) {
	l, err := Open(filepath.Join(t.TempDir(), "e.jsonl"), Options{OnDurable: func([]Record) { panic("listener bug") }})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a hang guard
		if _, err := l.Append(ctx, "x", i); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		cancel()
	}
	if l.LastSeq() != 3 {
		t.Errorf("last seq %d, want 3", l.LastSeq())
	}
}
