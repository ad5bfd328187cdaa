package server

import (
	"encoding/json"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// A replay longer than the connection's event queue: the client gets the events up to the
// gap and arbor/fellBehind naming it, reattaches from there, and in the end has every event
// once, in order.
func TestAttachReplayLongerThanTheQueue(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	ctx := t.Context()
	repo, sock := modelDaemonWith(t, `{"rules":[
 {"when":{"last":"step 30\\n?$"},"text":"done"},
 {"when":{},"code":"n = globals().get('n', 0) + 1\nprint('step', n)"}
],"default":{"text":"done"}}`, DaemonOptions{EventQueue: 16})
	c := dialClient(t, sock)
	var s Session
	if err := c.Call(ctx, MethodSessionCreate, &SessionCreateParams{Task: "many cells", Dir: repo}, &s); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(120 * time.Second); s.State.String() != StateIdle; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("session never went idle: %+v", s)
		}
		if err := c.Call(ctx, MethodSessionGet, &SessionRef{ID: s.ID}, &s); err != nil {
			t.Fatal(err)
		}
	}
	if s.LastSeq < 100 {
		t.Fatalf("only %d events; the test needs many more than the queue holds", s.LastSeq)
	}

	var mu sync.Mutex
	var seqs []uint64
	behind := make(chan uint64, 16)
	nc, err := Dial(ctx, DialOptions{Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	r := NewClient(ctx, nc, func(method string, params json.RawMessage) {
		switch method {
		case NotifyEvent:
			var e Event
			json.Unmarshal(params, &e)
			if e.Session == s.ID {
				mu.Lock()
				seqs = append(seqs, e.Seq)
				mu.Unlock()
			}
		case NotifyFellBehind:
			var fb FellBehindParams
			json.Unmarshal(params, &fb)
			behind <- fb.LastSeq
		}
	})
	defer r.Close()
	if err := r.Call(ctx, "initialize", map[string]any{"capabilities": map[string]any{}}, nil); err != nil {
		t.Fatal(err)
	}
	since, reattached := uint64(0), 0
	for {
		if err := r.Call(ctx, MethodSessionAttach, &AttachParams{ID: s.ID, SinceSeq: since}, &AttachResult{}); err != nil {
			t.Fatal(err)
		}
		select {
		case last := <-behind:
			reattached++
			since = last + 1
			continue
		case <-time.After(3 * time.Second):
		}
		mu.Lock()
		n := len(seqs)
		mu.Unlock()
		if n > 0 && seqs[n-1] >= s.LastSeq {
			break
		}
		t.Fatalf("no fellBehind and not every event: got %d, the last %v of %d", n, seqs[max(0, n-1):], s.LastSeq)
	}
	mu.Lock()
	defer mu.Unlock()
	if reattached == 0 {
		t.Errorf("a replay of %d events through a queue of 16 never fell behind", s.LastSeq)
	}
	for i, q := range seqs {
		if q != uint64(i+1) {
			t.Fatalf("event %d has seq %d: lost or repeated (%d events, %d reattaches)", i, q, len(seqs), reattached)
		}
	}
	if uint64(len(seqs)) != s.LastSeq {
		t.Errorf("%d events, want %d", len(seqs), s.LastSeq)
	}
}
