package workspace

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// A linked worktree (a session's among them) resolves to its main repository, so listing by
// a worktree finds what creating from it made; a plain repository and a missing directory
// are what they were.
func TestFindRootOfALinkedWorktree(t *testing.T) {
	base := t.TempDir()
	main := filepath.Join(base, "main")
	run := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	os.MkdirAll(filepath.Join(main, "sub"), 0o755)
	run(main, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(main, "sub", "f"), []byte("x"), 0o644)
	run(main, "add", ".")
	run(main, "commit", "-q", "-m", "c")
	linked := filepath.Join(base, "elsewhere", "wt")
	run(main, "worktree", "add", "-q", "-b", "b", linked)
	inside := filepath.Join(main, ".git", "arbor", "worktrees", "s1")
	run(main, "worktree", "add", "-q", "-b", "s1", inside)

	for _, dir := range []string{main, filepath.Join(main, "sub"), linked, filepath.Join(linked, "sub"), inside} {
		got, err := FindRoot(dir)
		if err != nil || got != main {
			t.Errorf("FindRoot(%s) = %q, %v; want %s", dir, got, err, main)
		}
	}
	if _, err := FindRoot(filepath.Join(base, "missing")); !errors.Is(err, ErrNoDirectory) {
		t.Errorf("missing directory: %v, want ErrNoDirectory", err)
	}
	if _, err := FindRoot(base); !errors.Is(err, ErrNotRepo) {
		t.Errorf("no repository: %v, want ErrNotRepo", err)
	}
}
