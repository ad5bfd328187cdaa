package agents

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/arborhq/arbor/agents/model/scripted"
	"github.com/arborhq/arbor/workspace"
)

// TestGoroutinesBackAtBaselineAfterClose: 100 sessions — turns, failed kernel starts, armed
// idle timers, worktree watchers — and Close leaves no goroutine of the service behind.
func TestGoroutinesBackAtBaselineAfterClose(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	script, err := scripted.Parse([]byte(`{"rules":[],"default":{"text":"ok"}}`), t.Name())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	url, wait, err := scripted.Serve(ctx, "127.0.0.1:0", script, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); wait() }()
	repo := filepath.Join(t.TempDir(), "repo")
	gitInit(t, repo, map[string]string{"main.py": "print('hi')\n"})
	// An idle timer armed on every session; a kernel Python that cannot start, so 100 roots
	// cost no kernels but still run the warm-up goroutine and its failure.
	os.WriteFile(filepath.Join(repo, "arbor.json"), []byte(`{"idleTimeout":"1h"}`), 0o644)
	baseline := stableGoroutineCount()

	svc, err := New(Options{StateDir: t.TempDir(),
		Overrides: workspace.Overrides{ModelBaseURL: url, Model: "scripted", KernelPython: "/bin/false"}})
	if err != nil {
		t.Fatal(err)
	}
	e := &testEnv{t: t, svc: svc, repo: repo}
	var all []*Session
	for range 100 {
		all = append(all, e.create("say ok"))
	}
	for _, s := range all {
		e.settled(s)
	}
	if err := svc.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second) // a hang guard: they are normally gone at once
	for runtime.NumGoroutine() > baseline {
		if time.Now().After(deadline) {
			var buf bytes.Buffer
			pprof.Lookup("goroutine").WriteTo(&buf, 1)
			t.Fatalf("%d goroutines after Close, %d before the service:\n%s", runtime.NumGoroutine(), baseline, buf.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stableGoroutineCount returns the goroutine count once it stops changing.
func stableGoroutineCount() int {
	n := runtime.NumGoroutine()
	for range 100 {
		time.Sleep(20 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m == n {
			return n
		}
		n = m
	}
	return n
}
