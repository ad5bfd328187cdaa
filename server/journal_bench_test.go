package server

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/arborhq/arbor/agents"
	"github.com/arborhq/arbor/agents/model/scripted"
	"github.com/arborhq/arbor/workspace"
)

// BenchmarkSendJournal measures what the request journal adds to an arbor/session.send round
// trip: the same sends, to a session of a daemon with the journal and of one without, on the
// same disk in the same run; it reports both and their ratio. Run it with
//
//	go test -run '^$' -bench SendJournal -benchtime 200x ./server
func BenchmarkSendJournal(b *testing.B) {
	b.Setenv("XDG_CONFIG_HOME", b.TempDir())
	script, err := scripted.Parse([]byte(`{"rules":[],"default":{"text":"ok"}}`), b.Name())
	if err != nil {
		b.Fatal(err)
	}
	mctx, stopModel := context.WithCancel(context.Background())
	url, wait, err := scripted.Serve(mctx, "127.0.0.1:0", script, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { stopModel(); wait() }()
	plain := benchSession(b, url, false)
	journalled := benchSession(b, url, true)

	var on, off time.Duration
	b.ResetTimer()
	for i := range b.N {
		// Alternated, so that a slower second half of the run (a busier disk, a warmer
		// cache) weighs on both alike.
		off += plain.send(b, i)
		on += journalled.send(b, i)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(off.Microseconds())/n, "µs/send-plain")
	b.ReportMetric(float64(on.Microseconds())/n, "µs/send-journal")
	b.ReportMetric(float64(on)/float64(off), "journal/plain")
}

type benchTarget struct {
	c  *Client
	id string
}

func (t benchTarget) send(b *testing.B, i int) time.Duration {
	start := time.Now()
	var res SendResult
	if err := t.c.Call(b.Context(), MethodSessionSend, &SendParams{ID: t.id, Text: fmt.Sprint("message ", i), Mode: "follow_up"}, &res); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// benchSession starts a daemon (with or without a journal) and an idle session in a repository
// of its own.
func benchSession(b *testing.B, modelURL string, journal bool) benchTarget {
	dir := b.TempDir()
	repo := filepath.Join(dir, "repo")
	gitInit(b, repo, map[string]string{"main.py": "print('hi')\n"})
	svc, err := agents.New(agents.Options{StateDir: filepath.Join(dir, "state"), PlainKernels: true,
		Overrides: workspace.Overrides{ModelBaseURL: modelURL, Model: "scripted", KernelPython: "/usr/bin/python3"}})
	if err != nil {
		b.Fatal(err)
	}
	opts := DaemonOptions{Socket: filepath.Join(dir, "arbor.sock"), Agents: svc}
	if journal {
		opts.JournalDir = filepath.Join(dir, "state", "journal")
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- RunDaemon(ctx, opts) }()
	b.Cleanup(func() { stop(); <-done })
	c := dialClient(b, opts.Socket)
	b.Cleanup(func() { c.Close() })
	var s Session
	if err := c.Call(b.Context(), MethodSessionCreate, &SessionCreateParams{Task: "wait", Dir: repo}, &s); err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(90 * time.Second); s.State.String() != StateIdle; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("session never went idle: %+v", s)
		}
		if err := c.Call(b.Context(), MethodSessionGet, &SessionRef{ID: s.ID}, &s); err != nil {
			b.Fatal(err)
		}
	}
	return benchTarget{c: c, id: s.ID}
}
