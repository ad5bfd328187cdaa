package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestDaemonKilledWhileWorktreeIsWritten: a session is recorded before its worktree's files
// are all written (they are written while its first model call goes out). A daemon killed
// (SIGKILL) right then leaves a half-made worktree; the next daemon recreates it from the
// session's branch, and the session runs its task in it.
func TestDaemonKilledWhileWorktreeIsWritten(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Enough files that writing them outlasts the step the daemon dies at.
	for i := range 3000 {
		dir := filepath.Join(e.repo, "many", fmt.Sprintf("d%02d", i%30))
		os.MkdirAll(dir, 0o755)
		writeFile(t, filepath.Join(dir, fmt.Sprintf("f%04d.txt", i)), fmt.Sprintf("file %d\n", i))
	}
	e.git(e.repo, "add", "many")
	e.git(e.repo, "commit", "-qm", "many files")

	e.vars["ARBOR_TEST_CRASH_WORKTREE"] = "writing"
	// The kill waits for the background write to have begun (under load it may not have).
	e.vars["ARBOR_TEST_CRASH_WORKTREE_WAIT"] = filepath.Join(e.repo, ".git", "arbor", "worktrees", "*", "many")
	r := e.arbor("run", "--detach", "compute two while writing")
	pid := e.daemonPID()
	delete(e.vars, "ARBOR_TEST_CRASH_WORKTREE")
	delete(e.vars, "ARBOR_TEST_CRASH_WORKTREE_WAIT")
	if r.code == 0 {
		t.Fatalf("the command succeeded, so the daemon did not die at the hook:\n%s", r)
	}
	eventually(t, "the killed daemon to be gone", func() bool { return pid == 0 || syscall.Kill(pid, 0) != nil })

	dirs, _ := filepath.Glob(filepath.Join(e.repo, ".git", "arbor", "worktrees", "*"))
	if len(dirs) != 1 {
		t.Fatalf("worktrees after the kill: %v, want one", dirs)
	}
	id := filepath.Base(dirs[0])
	if _, err := os.Stat(filepath.Join(e.repo, ".git", "worktrees", id, "locked")); err != nil {
		t.Fatalf("the worktree was complete when the daemon died (no initializing marker: %v): the test did not cut its write short", err)
	}

	e.mustArbor("ls") // a new daemon recovers the session and its worktree
	eventually(t, "the recovered session to run its task", func() bool {
		s := e.session(id)
		return s.State == "idle" || s.State == "inactive"
	})
	if st := e.git(dirs[0], "status", "--porcelain"); strings.TrimSpace(st) != "" {
		t.Errorf("the recreated worktree is not clean: %q", st)
	}
	if b, err := os.ReadFile(filepath.Join(dirs[0], "many", "d29", "f2999.txt")); err != nil || string(b) != "file 2999\n" {
		t.Errorf("the last file of the recreated worktree: %q, %v", b, err)
	}
	out := e.mustArbor("log", id, "--json").stdout
	if !strings.Contains(out, "recreated from branch") {
		t.Errorf("no recovered event says the worktree was recreated:\n%s", out)
	}
	if !strings.Contains(out, "the answer is 2") && !strings.Contains(out, `"output":"2`) {
		t.Errorf("the recovered session did not run its task:\n%s", out)
	}
}
