package gitstate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// TestCheckpointDoesNotFollowASwappedLink: the code in a worktree swaps a file, or a
// directory, for a symlink to a file of the host's between the checkpoint's look at it and
// its read. The checkpoint must not read through the link: what it reads is committed, and
// the worktree's code can read every commit back.
func TestCheckpointDoesNotFollowASwappedLink(t *testing.T) {
	t.Parallel()
	secretDir := t.TempDir()
	secret := "PRIVATE KEY of the host's user\n"
	writeFiles(t, secretDir, map[string]string{"id_rsa": secret, ".gitignore": "*.go\n"})
	secretBlob := plumbing.ComputeHash(plumbing.BlobObject, []byte(secret)).String()
	for _, tc := range []struct {
		name, swap, link string
	}{
		{"file", "x.txt", filepath.Join(secretDir, "id_rsa")},
		{"directory", "d", secretDir},
		{"gitignore", "d/.gitignore", filepath.Join(secretDir, ".gitignore")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := newTestRepo(t)
			r := openTest(t, root)
			wt := addSession(t, r, "s")
			writeFiles(t, wt, map[string]string{"x.txt": "x\n", "d/id_rsa": "mine\n", "d/.gitignore": "# nothing\n", "d/keep.go": "package d\n"})
			swapped := false
			r.beforeScanOpen = func(p string) {
				if p != tc.swap && !(tc.name == "gitignore" && p == "d") || swapped {
					return
				}
				swapped = true
				at := filepath.Join(wt, filepath.FromSlash(tc.swap))
				os.RemoveAll(at)
				if err := os.Symlink(tc.link, at); err != nil {
					t.Error(err)
				}
			}
			commit, _, err := r.Checkpoint(t.Context(), wt, "turn", nil)
			if !swapped {
				t.Fatalf("the scan never opened %s", tc.swap)
			}
			t.Logf("checkpoint: %s %v", commit, err)
			if _, err := gitErr(root, "cat-file", "-e", secretBlob); err == nil {
				t.Errorf("the host's file was read through the swapped link and stored as %s", secretBlob)
			}
			// The next checkpoint takes what is there: the link itself.
			r.beforeScanOpen = nil
			again, _, err2 := r.Checkpoint(t.Context(), wt, "turn", nil)
			if err2 != nil {
				t.Fatalf("the checkpoint after the swap: %v", err2)
			}
			if mode := git(t, root, "ls-tree", again, tc.swap); !strings.HasPrefix(mode, "120000 ") {
				t.Errorf("%s after the swap is %q, want the symlink", tc.swap, mode)
			}
			if err == nil && tc.name == "gitignore" {
				// git does not follow a symlinked .gitignore: its patterns do not apply.
				if files := git(t, root, "ls-tree", "-r", "--name-only", commit); !strings.Contains(files, "d/keep.go") {
					t.Errorf("a symlinked .gitignore's patterns were applied:\n%s", files)
				}
			}
		})
	}
}
