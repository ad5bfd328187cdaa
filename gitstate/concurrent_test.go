package gitstate

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestConcurrentSessions drives one Repo from many goroutines: the Repo's lock must keep go-git
// single-threaded (checked by -race) and every session's work must land on its own branch.
func TestConcurrentSessions(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)
	_, head, err := r.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("c%02d", i)
			dir := filepath.Join(r.CommonDir(), "arbor", "worktrees", id)
			err := func() error {
				if err := r.AddWorktree(t.Context(), WorktreeSpec{Name: id, Branch: "arbor/" + id, Base: head, Dir: dir}); err != nil {
					return err
				}
				for name, content := range map[string]string{id + ".txt": id + "\n", "a.go": "package a // " + id + "\n"} {
					if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
						return err
					}
				}
				if _, changed, err := r.Checkpoint(t.Context(), dir, "turn "+id, nil); err != nil || !changed {
					return fmt.Errorf("checkpoint: changed=%v %w", changed, err)
				}
				d, err := r.Diff(t.Context(), "main", "arbor/"+id)
				if err != nil {
					return err
				}
				if len(d.Files) != 2 {
					return fmt.Errorf("%s: diff has %d files, want 2", id, len(d.Files))
				}
				if i%2 == 0 {
					return r.RemoveWorktree(t.Context(), dir, false)
				}
				return nil
			}()
			if err != nil {
				errs <- fmt.Errorf("%s: %w", id, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := strings.Count(git(t, root, "worktree", "list"), "\n") + 1; got != 1+n/2 {
		t.Errorf("git worktree list has %d entries, want %d", got, 1+n/2)
	}
	if got := strings.Count(git(t, root, "branch", "--list", "arbor/*"), "\n") + 1; got != n {
		t.Errorf("%d session branches, want %d", got, n)
	}
	assertFsck(t, root)
}

// TestNoGoroutinesLeft: checkout writers and parallel stat workers all return.
func TestNoGoroutinesLeft(t *testing.T) {
	root := newTestRepo(t)
	r := openTest(t, root)
	before := runtime.NumGoroutine()
	wt := addSession(t, r, "g")
	writeFiles(t, wt, map[string]string{"x.txt": "x\n"})
	if _, _, err := r.Checkpoint(t.Context(), wt, "t", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Discard(t.Context(), wt, "", false); err != nil {
		t.Fatal(err)
	}
	// Goroutines of earlier tests (exec's pipe copiers, context watchers) may still be on
	// their way out, so wait for the count to settle before calling it a leak.
	deadline := time.Now().Add(5 * time.Second)
	after := runtime.NumGoroutine()
	for after > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		after = runtime.NumGoroutine()
	}
	if after > before {
		buf := make([]byte, 1<<20)
		t.Errorf("goroutines: %d before, %d after\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
}

// TestPendingWorktreeIsLeftAlone: while a fork writes its files without the lock, the other
// operations refuse or skip that worktree instead of reading a half-written tree.
func TestPendingWorktreeIsLeftAlone(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)
	wt := addSession(t, r, "p")
	unlock, _ := r.lock(t.Context())
	r.pending["p"] = wt
	unlock()
	if _, _, err := r.Checkpoint(t.Context(), wt, "t", nil); err == nil || !strings.Contains(err.Error(), "still being created") {
		t.Errorf("Checkpoint(pending) = %v", err)
	}
	if err := r.RemoveWorktree(t.Context(), wt, true); err == nil {
		t.Error("RemoveWorktree(pending) succeeded")
	}
	os.RemoveAll(wt)
	if rep, err := r.Reconcile(t.Context(), map[string]string{}); err != nil || len(rep.Orphans)+len(rep.Recreated) != 0 {
		t.Errorf("Reconcile touched a pending worktree: %+v %v", rep, err)
	}
}
