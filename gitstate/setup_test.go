package gitstate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSetupWorktree(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	writeFiles(t, root, map[string]string{".env": "SECRET=1\n", "cache/deep/x.bin": "cached\n", "node_modules/m/index.js": "js\n"})
	r := openTest(t, root)
	wt := addSession(t, r, "s")
	err := r.SetupWorktree(t.Context(), wt, Setup{
		Copy: []string{".env", "cache"},
		Link: []string{"node_modules"},
		// What the command makes is setup output, not the session's work.
		Command: "test -f .env && echo ran > setup-ran.log && mkdir -p gen && echo o > gen/out.o && echo v > VERSION.txt",
	})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(wt, "cache/deep/x.bin")); string(b) != "cached\n" {
		t.Errorf("copied cache = %q", b)
	}
	if target, _ := os.Readlink(filepath.Join(wt, "node_modules")); target != filepath.Join(r.Root(), "node_modules") {
		t.Errorf("node_modules link = %q", target)
	}
	// A checkpoint never commits what setup brought in or made (.env is not in .gitignore
	// here, nor are gen/ and VERSION.txt).
	writeFiles(t, wt, map[string]string{"work.txt": "w\n"})
	if _, _, err := r.Checkpoint(t.Context(), wt, "turn", nil); err != nil {
		t.Fatal(err)
	}
	if files := git(t, wt, "show", "--name-only", "--format=", "HEAD"); files != "work.txt" {
		t.Errorf("checkpoint committed %q, want only work.txt", files)
	}
	if _, _, err := r.Checkpoint(t.Context(), wt, "turn", []string{".env", "cache/deep/x.bin"}); err != nil {
		t.Fatal(err)
	}
	if n := git(t, wt, "rev-list", "--count", "HEAD"); n != "2" {
		t.Errorf("touched checkpoint of excluded paths committed: %s commits", n)
	}

	// Failures come back with what went wrong.
	wt2 := addSession(t, r, "s2")
	var se *SetupError
	err = r.SetupWorktree(t.Context(), wt2, Setup{Command: "echo boom >&2; exit 3"})
	if !errors.As(err, &se) || se.Step != "command" || !strings.Contains(se.Output, "boom") {
		t.Errorf("failing command: %v", err)
	}
	err = r.SetupWorktree(t.Context(), wt2, Setup{Copy: []string{"missing.txt"}})
	if !errors.As(err, &se) || se.Step != "copy" {
		t.Errorf("missing copy source: %v", err)
	}
	if err := r.SetupWorktree(t.Context(), wt2, Setup{Copy: []string{"../escape"}}); err == nil {
		t.Error("setup path outside the worktree accepted")
	}
}

// TestSetupRefusesSymlinkEscapes: a symlink in the main tree or on the session branch cannot
// make setup copy the user's files in or write outside the session worktree.
func TestSetupRefusesSymlinkEscapes(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	secret := t.TempDir()
	writeFiles(t, secret, map[string]string{"id_rsa": "PRIVATE\n"})
	if err := os.Symlink(secret, filepath.Join(root, "vendor")); err != nil {
		t.Fatal(err)
	}
	r := openTest(t, root)
	wt := addSession(t, r, "s")
	var se *SetupError
	for _, s := range []Setup{{Copy: []string{"vendor"}}, {Copy: []string{"vendor/id_rsa"}}, {Link: []string{"vendor"}}} {
		err := r.SetupWorktree(t.Context(), wt, s)
		if !errors.As(err, &se) || !strings.Contains(err.Error(), "outside") {
			t.Errorf("setup %+v through a symlink out of the repository: %v", s, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(wt, "vendor")); err == nil {
		t.Error("something named vendor appeared in the session worktree")
	}
	// The session branch has a symlink where the copy would land.
	outside := t.TempDir()
	writeFiles(t, root, map[string]string{"conf/app.env": "A=1\n"})
	if err := os.Symlink(outside, filepath.Join(wt, "conf")); err != nil {
		t.Fatal(err)
	}
	if err := r.SetupWorktree(t.Context(), wt, Setup{Copy: []string{"conf/app.env"}}); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Errorf("copy through a symlink in the session worktree: %v", err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("setup wrote outside the worktree: %v", entries)
	}
}
