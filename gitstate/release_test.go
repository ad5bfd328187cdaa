package gitstate

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// releaseSteps are ReleaseWorktree's steps, in order (see its doc).
var releaseSteps = []string{"checkpointed", "marked", "moved", "unregistered", "removed"}

// TestReleaseWorktreeKilledAtEachStep kills a process (SIGKILL) after each step of releasing a
// worktree that holds uncommitted work; in every case the next process's Reconcile leaves the
// session either holding its worktree or released, and after RestoreWorktree the work is there,
// byte for byte, and committed on the branch or still in the files.
func TestReleaseWorktreeKilledAtEachStep(t *testing.T) {
	t.Parallel()
	for _, step := range append(releaseSteps, "") {
		t.Run("after_"+step, func(t *testing.T) {
			t.Parallel()
			root := newTestRepo(t)
			r := openTest(t, root)
			wt := addSession(t, r, "s")
			r.Close()
			os.WriteFile(filepath.Join(wt, "a.go"), []byte("package a // edited, not committed\n"), 0o644)
			os.WriteFile(filepath.Join(wt, "new.txt"), []byte("new work\n"), 0o644)

			cmd := exec.Command(os.Args[0], "-test.run=^TestReleaseWorker$")
			cmd.Env = append(os.Environ(), "ARBOR_RELEASE_WORKER="+root, "ARBOR_RELEASE_KILL_AT="+step)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			killed := errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL
			if step != "" && !killed {
				t.Fatalf("the worker was not killed at %s: %v\n%s", step, err, out)
			}
			if step == "" && err != nil {
				t.Fatalf("release: %v\n%s", err, out)
			}

			r = openTest(t, root)
			defer r.Close()
			rep, err := r.Reconcile(t.Context(), map[string]string{"s": wt})
			if err != nil || len(rep.Problems) > 0 || len(rep.Orphans) > 0 {
				t.Fatalf("Reconcile: %+v, %v", rep, err)
			}
			if _, err := os.Stat(wt + ".released"); !os.IsNotExist(err) {
				t.Errorf("the moved-aside directory is still there after Reconcile: %v", err)
			}
			released := r.Released("s")
			if _, err := os.Stat(wt); (err == nil) == released {
				t.Fatalf("released = %v but the worktree dir stat = %v", released, err)
			}
			if released {
				if list := git(t, root, "worktree", "list"); strings.Contains(list, wt) {
					t.Errorf("a released worktree is still registered: %s", list)
				}
				if err := r.RestoreWorktree(t.Context(), "s", "arbor/s", wt); err != nil {
					t.Fatalf("RestoreWorktree: %v", err)
				}
				if r.Released("s") {
					t.Error("still released after RestoreWorktree")
				}
			}
			for f, want := range map[string]string{"a.go": "package a // edited, not committed\n", "new.txt": "new work\n"} {
				if b, err := os.ReadFile(filepath.Join(wt, f)); err != nil || string(b) != want {
					t.Errorf("%s after the crash: %q, %v; want %q", f, b, err, want)
				}
			}
			if step != "" && step != "checkpointed" || released {
				// From the checkpoint on, the work is on the branch too.
				if got := git(t, root, "show", "arbor/s:new.txt"); got != "new work" {
					t.Errorf("arbor/s:new.txt = %q", got)
				}
			}
			if st := git(t, wt, "status", "--porcelain"); released && st != "" {
				t.Errorf("the restored worktree is not clean: %q", st)
			}
			assertFsck(t, root)
		})
	}
}

// TestReleaseWorker is the worker of TestReleaseWorktreeKilledAtEachStep: it releases the
// worktree of session s, dying at ARBOR_RELEASE_KILL_AT.
func TestReleaseWorker(t *testing.T) {
	root := os.Getenv("ARBOR_RELEASE_WORKER")
	if root == "" {
		t.Skip("run by TestReleaseWorktreeKilledAtEachStep")
	}
	r, err := Open(root, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	at := os.Getenv("ARBOR_RELEASE_KILL_AT")
	r.OnStep(func(_, step string) {
		if step == at {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	})
	if _, err := r.ReleaseWorktree(context.Background(), filepath.Join(r.CommonDir(), "arbor", "worktrees", "s"), "arbor: released"); err != nil {
		t.Fatal(err)
	}
}

// TestReleaseRefusesWorkNoCheckpointTakes: a repository of its own inside the worktree is
// never committed, so the worktree is not released.
func TestReleaseRefusesWorkNoCheckpointTakes(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)
	wt := addSession(t, r, "s")
	git(t, wt, "init", "-q", "inner")
	_, err := r.ReleaseWorktree(t.Context(), wt, "arbor: released")
	var dirty *DirtyError
	if !errors.As(err, &dirty) {
		t.Fatalf("ReleaseWorktree = %v, want a DirtyError", err)
	}
	if r.Released("s") {
		t.Error("marked released")
	}
	if _, err := os.Stat(filepath.Join(wt, "inner", ".git")); err != nil {
		t.Errorf("the inner repository: %v", err)
	}
}

func TestTreeSize(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)
	_, head, _ := r.Head(t.Context())
	n, err := r.TreeSize(t.Context(), head)
	// Nine entries, each under a block: a.go b.go .gitignore noeol.txt "spaced name.txt" run.sh
	// link dir/sub/c.txt dir/d.bin; three directories (the top, dir, dir/sub); a small index.
	if want := int64(9+3+1) * 4096; err != nil || n != want {
		t.Errorf("TreeSize = %d, %v; want %d", n, err, want)
	}
	// Against what du sees of a checkout of it: the worktree and its index.
	wt := filepath.Join(t.TempDir(), "wt")
	if err := r.AddWorktree(t.Context(), WorktreeSpec{Name: "sized", Branch: "sized", Base: head, Dir: wt}); err != nil {
		t.Fatal(err)
	}
	var du int64
	for _, d := range []string{wt, filepath.Join(r.adminDir("sized"), "index")} {
		filepath.Walk(d, func(_ string, fi os.FileInfo, err error) error {
			if err == nil {
				du += fi.Sys().(*syscall.Stat_t).Blocks * 512
			}
			return nil
		})
	}
	if float64(n) < 0.75*float64(du) || float64(n) > 1.25*float64(du) {
		t.Errorf("TreeSize %d, but the checkout takes %d on disk", n, du)
	}
}
