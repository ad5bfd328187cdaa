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

// TestDaemonKilledWhileReleasingAWorktree: with "worktrees": {"max": 1}, a second session
// makes the first (inactive, with a user's uncommitted edit in its worktree) give its worktree
// up. The daemon is killed (SIGKILL) after each step of that release; the next daemon finds
// the session holding its worktree or released, and a message to it brings the worktree back
// with the edit in it, committed on the branch or still in the files.
func TestDaemonKilledWhileReleasingAWorktree(t *testing.T) {
	t.Parallel()
	for _, step := range []string{"checkpointed", "marked", "moved", "unregistered", "removed"} {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			writeFile(t, filepath.Join(e.repo, "arbor.json"), `{"worktrees": {"max": 1}, "idleTimeout": "1s"}`)
			e.git(e.repo, "add", "arbor.json")
			e.git(e.repo, "commit", "-qm", "bounds")

			e.vars["ARBOR_TEST_CRASH_WORKTREE"] = step // read at the daemon's start
			a := sessionID(t, e.mustArbor("run", "write a file"))
			eventually(t, "the first session to go inactive", func() bool { return e.session(a).State == "inactive" })
			wt := e.session(a).Worktree
			writeFile(t, filepath.Join(wt, "user.txt"), "by hand\n") // no checkpoint has it

			pid := e.daemonPID()
			e.arbor("run", "--detach", "compute two while releasing") // its reply may be cut by the kill
			delete(e.vars, "ARBOR_TEST_CRASH_WORKTREE")
			eventually(t, "the daemon to die at "+step, func() bool { return syscall.Kill(pid, 0) != nil })

			if r := e.arbor("fsck"); r.code != 0 {
				t.Fatalf("fsck after the kill at %s:\n%s", step, r)
			}
			s := e.session(a) // a new daemon
			if s.State == "failed" || s.Branch == "" {
				t.Fatalf("after the kill at %s: %+v", step, s)
			}
			if list := e.git(e.repo, "worktree", "list", "--porcelain"); strings.Contains(list, wt+".released") {
				t.Errorf("the moved-aside directory is registered: %s", list)
			}
			e.mustArbor("send", a, "write a file again")
			eventually(t, "the revived session to settle", func() bool {
				st := e.session(a).State
				return st == "idle" || st == "inactive"
			})
			for f, want := range map[string]string{"user.txt": "by hand\n", "hello.txt": "hello from arbor\n"} {
				if b, err := os.ReadFile(filepath.Join(wt, f)); err != nil || string(b) != want {
					t.Errorf("%s in the worktree after the kill at %s: %q, %v", f, step, b, err)
				}
			}
			if _, err := os.Stat(wt + ".released"); !os.IsNotExist(err) {
				t.Errorf("the moved-aside directory is still there: %v", err)
			}
			if step != "checkpointed" {
				// From the checkpoint on, the edit is on the branch too.
				if got := e.git(e.repo, "show", s.Branch+":user.txt"); strings.TrimSpace(got) != "by hand" {
					t.Errorf("%s:user.txt = %q", s.Branch, got)
				}
			}
		})
	}
}
