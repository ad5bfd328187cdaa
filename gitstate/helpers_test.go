package gitstate

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// git runs the git CLI in dir and returns its trimmed stdout, failing the test on error.
func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := gitErr(dir, args...)
	if err != nil {
		t.Fatalf("git %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return out
}

func gitErr(dir string, args ...string) (string, error) { return gitEnvErr(dir, nil, args...) }

// gitEnv is git with extra environment variables.
func gitEnv(t testing.TB, dir string, env []string, args ...string) string {
	t.Helper()
	out, err := gitEnvErr(dir, env, args...)
	if err != nil {
		t.Fatalf("git %s (in %s, %v): %v\n%s", strings.Join(args, " "), dir, env, err, out)
	}
	return out
}

func gitEnvErr(dir string, env []string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+os.TempDir())
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// setIdentity gives the repository at dir an identity of its own, so that what gitstate runs
// there (accept's commit-tree) never depends on the developer's git config.
func setIdentity(t testing.TB, dir string) {
	t.Helper()
	git(t, dir, "config", "user.name", "Test")
	git(t, dir, "config", "user.email", "t@example.com")
}

func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// newTestRepo makes a repository with one commit holding text, binary, executable, symlink and
// ignored files, and returns its root.
func newTestRepo(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	setIdentity(t, dir)
	writeFiles(t, dir, map[string]string{
		"a.go":            "package a\n\nfunc Foo() int { return 1 }\n",
		"b.go":            "package a\n\nfunc Bar() int { return Foo() + 1 }\n",
		"dir/sub/c.txt":   "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\n",
		"dir/d.bin":       "\x00\x01\x02binary\x00",
		".gitignore":      "*.log\nbuild/\n",
		"noeol.txt":       "no newline at end",
		"spaced name.txt": "x\n",
	})
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.go", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "initial")
	return dir
}

func openTest(t testing.TB, dir string) *Repo {
	t.Helper()
	r, err := Open(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// addSession creates a worktree for a session named id at the repo's HEAD and returns its dir.
func addSession(t testing.TB, r *Repo, id string) string {
	t.Helper()
	ctx := context.Background()
	_, head, err := r.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(r.CommonDir(), "arbor", "worktrees", id)
	if err := r.AddWorktree(ctx, WorktreeSpec{Name: id, Branch: "arbor/" + id, Base: head, Dir: dir}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// assertFsck checks the repository with `git fsck`.
func assertFsck(t testing.TB, dir string) {
	t.Helper()
	git(t, dir, "fsck", "--no-progress", "--strict")
}

// mustLinked is gitstate's view of the linked worktree at dir.
func mustLinked(t testing.TB, r *Repo, dir string) linked {
	t.Helper()
	l, err := r.linkedWorktree(dir)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
