package gitstate

import (
	"errors"
	"github.com/go-git/go-git/v5/plumbing"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpen(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, filepath.Join(root, "dir", "sub"))
	if r.Root() != resolveSymlinks(root) {
		t.Errorf("Root = %s, want %s", r.Root(), root)
	}
	if r.CommonDir() != filepath.Join(r.Root(), ".git") {
		t.Errorf("CommonDir = %s", r.CommonDir())
	}
	wt := addSession(t, r, "s1")
	r2 := openTest(t, wt)
	if r2.Root() != r.Root() || r2.CommonDir() != r.CommonDir() {
		t.Errorf("Open(linked worktree) = %s %s, want %s %s", r2.Root(), r2.CommonDir(), r.Root(), r.CommonDir())
	}

	_, err := Open(t.TempDir(), nil)
	if !errors.Is(err, ErrNotRepo) || !strings.Contains(err.Error(), "not a git repository: ") {
		t.Errorf("Open(non-repo) = %v, want ErrNotRepo naming the dir", err)
	}
}

func TestHead(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)
	branch, commit, err := r.Head(t.Context())
	if err != nil || branch != "main" || commit != git(t, root, "rev-parse", "HEAD") {
		t.Errorf("Head = %q %q %v", branch, commit, err)
	}
	git(t, root, "checkout", "-q", "--detach")
	if branch, _, err = r.Head(t.Context()); err != nil || branch != "" {
		t.Errorf("detached Head = %q %v, want empty branch", branch, err)
	}

	empty := t.TempDir()
	git(t, empty, "init", "-q", "-b", "main")
	_, _, err = openTest(t, empty).Head(t.Context())
	if !errors.Is(err, ErrNoCommits) {
		t.Errorf("Head of empty repo = %v, want ErrNoCommits", err)
	}
}

func TestAddWorktree(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)
	before := git(t, root, "status", "--porcelain")
	wt := addSession(t, r, "s1")

	if got := git(t, wt, "status", "--porcelain", "--untracked-files=all"); got != "" {
		t.Errorf("git status in new worktree not clean:\n%s", got)
	}
	if got := git(t, wt, "rev-parse", "--abbrev-ref", "HEAD"); got != "arbor/s1" {
		t.Errorf("worktree branch = %q", got)
	}
	if list := git(t, root, "worktree", "list", "--porcelain"); !strings.Contains(list, "worktree "+wt) || !strings.Contains(list, "branch refs/heads/arbor/s1") {
		t.Errorf("git worktree list does not show %s:\n%s", wt, list)
	}
	if fi, err := os.Stat(filepath.Join(wt, "run.sh")); err != nil || fi.Mode()&0o100 == 0 {
		t.Errorf("run.sh not executable: %v %v", fi, err)
	}
	if target, err := os.Readlink(filepath.Join(wt, "link")); err != nil || target != "a.go" {
		t.Errorf("link = %q %v", target, err)
	}
	if b, _ := os.ReadFile(filepath.Join(wt, "dir", "d.bin")); string(b) != "\x00\x01\x02binary\x00" {
		t.Errorf("binary content = %q", b)
	}
	if after := git(t, root, "status", "--porcelain"); after != before {
		t.Errorf("main worktree status changed: %q -> %q", before, after)
	}
	// The git CLI can work in it.
	writeFiles(t, wt, map[string]string{"new.txt": "hello\n"})
	git(t, wt, "add", "new.txt")
	git(t, wt, "commit", "-q", "-m", "by hand")
	assertFsck(t, root)

	// Errors: existing branch, taken name, bad spec.
	_, head, _ := r.Head(t.Context())
	for _, spec := range []WorktreeSpec{
		{Name: "s2", Branch: "arbor/s1", Base: head, Dir: filepath.Join(r.CommonDir(), "arbor", "worktrees", "s2")},
		{Name: "s1", Branch: "arbor/other", Base: head, Dir: filepath.Join(r.CommonDir(), "arbor", "worktrees", "x")},
		{Name: "s3", Branch: "bad..name", Base: head, Dir: filepath.Join(root, "x")},
		{Name: "s4", Branch: "ok", Base: "nope", Dir: filepath.Join(root, "y")},
		{Name: "s5", Branch: "ok2", Base: head, Dir: "relative"},
	} {
		if err := r.AddWorktree(t.Context(), spec); err == nil {
			t.Errorf("AddWorktree(%+v) succeeded, want error", spec)
		}
	}
	if got := git(t, root, "branch", "--list", "ok", "ok2", "arbor/other"); got != "" {
		t.Errorf("failed AddWorktree left branches: %q", got)
	}
	assertFsck(t, root)
}

func TestSlug(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"Rename Foo to Bar across files!", "rename-foo-to-bar-across"},
		{"", "task"},
		{"!!!", "task"},
		{"Café au lait", "cafe-au-lait"},
		{"averyveryveryverylongwordthatgoesonandon", "averyveryveryverylongwor"},
		{"fix  bug #42", "fix-bug-42"},
	} {
		if got := Slug(c.in); got != c.want {
			t.Errorf("Slug(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestPackOrder(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	git(t, root, "repack", "-adq")
	writeFiles(t, root, map[string]string{"loose.txt": "loose\n"})
	git(t, root, "add", "loose.txt")
	git(t, root, "commit", "-q", "-m", "loose")
	r := openTest(t, root)
	_, head, _ := r.Head(t.Context())
	c, _ := r.git.CommitObject(plumbing.NewHash(head))
	files, err := r.listTree(c.TreeHash, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	order := packOrder(r.CommonDir(), files)
	if len(order) != len(files) {
		t.Fatalf("order has %d of %d files", len(order), len(files))
	}
	if last := files[order[len(order)-1]].path; last != "loose.txt" {
		t.Errorf("loose object not last: %s", last)
	}
}
