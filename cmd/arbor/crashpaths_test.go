package main

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestDaemonServesAnUnrecordedSession: a log that holds only session_created (the daemon was
// killed between a session's first two fsyncs) once made every daemon that recovered it
// crash on `arbor ls`. Now the daemon comes up, lists the session, runs its task, and stays.
func TestDaemonServesAnUnrecordedSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := sessionID(t, e.mustArbor("run", "say something"))
	old := e.daemonPID()
	e.mustArbor("daemon", "stop")
	eventually(t, "the daemon to stop", func() bool { return syscall.Kill(old, 0) != nil })
	path := filepath.Join(e.repo, ".git", "arbor", "sessions", id, "events.jsonl")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data[:bytes.IndexByte(data, '\n')+1], 0o644); err != nil {
		t.Fatal(err)
	}
	e.mustArbor("ls") // starts a daemon, which recovers the session
	pid := e.daemonPID()
	eventually(t, "the recovered session to run its task", func() bool {
		s := e.session(id)
		return s.State == "idle" || s.State == "inactive"
	})
	e.mustArbor("ls", "--json")
	if got := e.daemonPID(); got != pid || pid == old || syscall.Kill(pid, 0) != nil {
		t.Errorf("the daemon changed from pid %d to %d: it died serving the session", pid, got)
	}
}

// TestListDuringForkSetup: listing while a fork's worktree setup runs (minutes, with a setup
// command) once crashed the daemon on the fork's unset state. The fork is listed as admitted,
// and the daemon stays.
func TestListDuringForkSetup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	writeFile(t, filepath.Join(e.repo, "arbor.json"), `{"worktree":{"command":"sleep 2"}}`)
	e.git(e.repo, "add", "arbor.json")
	e.git(e.repo, "commit", "-qm", "slow setup")
	e.mustArbor("trust", "--yes")
	id := sessionID(t, e.mustArbor("run", "say something"))
	pid := e.daemonPID()
	var wg sync.WaitGroup
	wg.Add(1)
	var fork result
	go func() { defer wg.Done(); fork = e.arbor("fork", id, "--name", "slow") }()
	deadline := time.Now().Add(2 * time.Second)
	sawAdmitted := false
	for time.Now().Before(deadline) {
		for _, s := range e.ls() {
			if s.State == "admitted" && s.ID != id {
				sawAdmitted = true
			}
			if s.State == "" || s.State == "unknown" {
				t.Errorf("session %s listed without a state", s.ID)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	if fork.code != 0 {
		t.Fatalf("fork: %s", fork)
	}
	if !sawAdmitted {
		t.Error("the fork was never listed as admitted while its setup ran")
	}
	if got := e.daemonPID(); got != pid {
		t.Errorf("the daemon changed from pid %d to %d during the fork", pid, got)
	}
}
