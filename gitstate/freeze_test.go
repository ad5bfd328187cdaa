package gitstate

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// swapLoop stands for a cell's background process: over and over it swaps the worktree's
// file name for a symlink to the host's file and back, each swap one rename. Holding mu
// pauses it between swaps, with name a regular file: what a frozen sandbox looks like.
func swapLoop(t *testing.T, mu *sync.Mutex, wt, name, hostFile string) (stop func()) {
	done, exited := make(chan struct{}), make(chan struct{})
	at := filepath.Join(wt, name)
	// The loop's files live outside the worktree, so git sees only the swaps of name.
	spare := t.TempDir()
	mine, link, file := filepath.Join(spare, "mine"), filepath.Join(spare, "link"), filepath.Join(spare, "file")
	// As long as the host's file: git reads as many bytes as its lstat saw.
	st, err := os.Stat(hostFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mine, append(bytes.Repeat([]byte("m"), int(st.Size())-1), '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(exited)
		for {
			select {
			case <-done:
				return
			default:
			}
			mu.Lock()
			os.Symlink(hostFile, link)
			os.Rename(link, at)
			os.Link(mine, file)
			os.Rename(file, at)
			mu.Unlock()
		}
	}()
	return func() { close(done); <-exited }
}

// A checkpoint that git itself must stage (`* text=auto`) runs its git commands with the
// worktree frozen, and one gitstate's own scan does needs no freeze: the hook is called only
// around the CLI path. Frozen, a loop that swaps a file for a symlink to a host file between
// git's lstat and its open never gets the host's file committed.
func TestCheckpointFreezesAroundGitStaging(t *testing.T) {
	t.Parallel()
	secret := "PRIVATE KEY of the host's user\n"
	hostFile := filepath.Join(t.TempDir(), "id_rsa")
	writeFiles(t, filepath.Dir(hostFile), map[string]string{"id_rsa": secret})
	secretBlob := plumbing.ComputeHash(plumbing.BlobObject, []byte(secret)).String()

	root := newTestRepo(t)
	r := openTest(t, root)
	wt := addSession(t, r, "s")
	var loop sync.Mutex // held: the swap loop is frozen
	var mu sync.Mutex
	var freezes []string
	frozen := false
	r.FreezeWith(func(ctx context.Context, dir string) (func(), error) {
		loop.Lock()
		mu.Lock()
		freezes, frozen = append(freezes, dir), true
		mu.Unlock()
		return func() {
			mu.Lock()
			frozen = false
			mu.Unlock()
			loop.Unlock()
		}, nil
	})
	calls := func() int {
		mu.Lock()
		defer mu.Unlock()
		if frozen {
			t.Fatal("a checkpoint returned with the worktree still frozen")
		}
		return len(freezes)
	}

	// The fast path: no freeze.
	writeFiles(t, wt, map[string]string{"x.txt": "mine\n"})
	if _, changed, err := r.Checkpoint(t.Context(), wt, "fast", nil); err != nil || !changed {
		t.Fatalf("fast checkpoint: changed %v, %v", changed, err)
	}
	if n := calls(); n != 0 {
		t.Fatalf("the fast path froze the worktree %d times; its scan reads through descriptors and needs none", n)
	}

	// The CLI path, from the checkpoint that commits the attributes on, raced by the swap
	// loop (started once the index has them, so every checkpoint goes straight to git).
	writeFiles(t, wt, map[string]string{".gitattributes": "* text=auto\n"})
	if _, _, err := r.Checkpoint(t.Context(), wt, "attributes", nil); err != nil {
		t.Fatal(err)
	}
	stop := swapLoop(t, &loop, wt, "x.txt", hostFile)
	const rounds = 100
	failed := 0
	for i := range rounds {
		if _, _, err := r.Checkpoint(t.Context(), wt, fmt.Sprint("turn ", i), nil); err != nil {
			failed++
			t.Logf("checkpoint %d: %v", i, err)
		}
	}
	stop()
	if failed > 0 {
		t.Errorf("%d of %d checkpoints failed: git met the loop's swaps", failed, rounds)
	}
	if n := calls(); n != rounds+1 {
		t.Errorf("%d checkpoints through git froze the worktree %d times, want once each", rounds+1, n)
	}
	for _, d := range freezes {
		if d != wt {
			t.Errorf("froze %s, want the checkpoint's worktree %s", d, wt)
		}
	}
	if _, err := gitErr(root, "cat-file", "-e", secretBlob); err == nil {
		t.Errorf("the host's file was read through a swapped link by git add and stored as %s", secretBlob)
	}
}
