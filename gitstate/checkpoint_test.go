package gitstate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckpoint(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		edit    func(t *testing.T, wt string)
		touched []string
		status  string // `git diff --name-status HEAD~1 HEAD` after; "" means no commit
	}{
		{"nothing", func(t *testing.T, wt string) {}, nil, ""},
		{"modify", func(t *testing.T, wt string) {
			writeFiles(t, wt, map[string]string{"a.go": "package a\n\nfunc Foo2() int { return 1 }\n"})
		}, nil, "M\ta.go"},
		{"add nested", func(t *testing.T, wt string) {
			writeFiles(t, wt, map[string]string{"new/deep/x.txt": "x\n"})
		}, nil, "A\tnew/deep/x.txt"},
		{"delete dir", func(t *testing.T, wt string) {
			os.RemoveAll(filepath.Join(wt, "dir"))
		}, nil, "D\tdir/d.bin\nD\tdir/sub/c.txt"},
		{"ignored not added", func(t *testing.T, wt string) {
			writeFiles(t, wt, map[string]string{"x.log": "log\n", "build/out": "o\n", "keep.txt": "k\n"})
		}, nil, "A\tkeep.txt"},
		{"chmod", func(t *testing.T, wt string) {
			os.Chmod(filepath.Join(wt, "b.go"), 0o755)
		}, nil, "M\tb.go"},
		{"symlink retarget", func(t *testing.T, wt string) {
			os.Remove(filepath.Join(wt, "link"))
			os.Symlink("b.go", filepath.Join(wt, "link"))
		}, nil, "M\tlink"},
		{"binary", func(t *testing.T, wt string) {
			writeFiles(t, wt, map[string]string{"dir/d.bin": "\x00\xff\x00"})
		}, nil, "M\tdir/d.bin"},
		{"file becomes dir", func(t *testing.T, wt string) {
			os.Remove(filepath.Join(wt, "b.go"))
			writeFiles(t, wt, map[string]string{"b.go/inner.go": "package inner\n"})
		}, nil, "D\tb.go\nA\tb.go/inner.go"},
		{"dir becomes file", func(t *testing.T, wt string) {
			os.RemoveAll(filepath.Join(wt, "dir", "sub"))
			writeFiles(t, wt, map[string]string{"dir/sub": "now a file\n"})
		}, nil, "A\tdir/sub\nD\tdir/sub/c.txt"},
		{"touched only", func(t *testing.T, wt string) {
			writeFiles(t, wt, map[string]string{"a.go": "changed\n", "b.go": "also changed\n"})
		}, []string{"a.go"}, "M\ta.go"},
		{"touched dir", func(t *testing.T, wt string) {
			writeFiles(t, wt, map[string]string{"dir/sub/c.txt": "changed\n", "dir/new.txt": "n\n"})
			os.Remove(filepath.Join(wt, "dir", "d.bin"))
		}, []string{"dir"}, "D\tdir/d.bin\nA\tdir/new.txt\nM\tdir/sub/c.txt"},
		{"touched deleted and ignored", func(t *testing.T, wt string) {
			os.Remove(filepath.Join(wt, "a.go"))
			writeFiles(t, wt, map[string]string{"y.log": "l\n"})
		}, []string{"a.go", "y.log", "missing/file"}, "D\ta.go"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			root := newTestRepo(t)
			r := openTest(t, root)
			wt := addSession(t, r, "s")
			before := git(t, wt, "rev-parse", "HEAD")
			c.edit(t, wt)
			commit, changed, err := r.Checkpoint(t.Context(), wt, "turn 1", c.touched)
			if err != nil {
				t.Fatal(err)
			}
			if changed != (c.status != "") {
				t.Fatalf("changed = %v, want %v", changed, c.status != "")
			}
			if !changed {
				if commit != before {
					t.Errorf("unchanged checkpoint returned %s, want HEAD %s", commit, before)
				}
				if n := git(t, wt, "rev-list", "--count", "HEAD"); n != "1" {
					t.Errorf("commits = %s, want 1", n)
				}
				return
			}
			if got := git(t, wt, "rev-parse", "HEAD"); got != commit {
				t.Errorf("branch at %s, Checkpoint returned %s", got, commit)
			}
			if got := git(t, wt, "diff", "--name-status", "--no-renames", "HEAD~1", "HEAD"); got != c.status {
				t.Errorf("committed changes:\n%s\nwant:\n%s", got, c.status)
			}
			if c.touched == nil {
				if st := git(t, wt, "status", "--porcelain"); st != "" {
					t.Errorf("git status after checkpoint not clean:\n%s", st)
				}
			}
			if msg := git(t, wt, "log", "-1", "--format=%s"); msg != "turn 1" {
				t.Errorf("message = %q", msg)
			}
			if main := git(t, root, "status", "--porcelain"); main != "" {
				t.Errorf("main worktree touched:\n%s", main)
			}
			assertFsck(t, root)
		})
	}
}

func TestCheckpointTwiceAndByHand(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)
	wt := addSession(t, r, "s")
	writeFiles(t, wt, map[string]string{"a.go": "v2\n"})
	c1, _, err := r.Checkpoint(t.Context(), wt, "t1", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The user commits by hand in the session worktree; the next checkpoint builds on it.
	writeFiles(t, wt, map[string]string{"hand.txt": "by hand\n"})
	git(t, wt, "add", "hand.txt")
	git(t, wt, "commit", "-q", "-m", "by hand")
	writeFiles(t, wt, map[string]string{"a.go": "v3\n"})
	c3, changed, err := r.Checkpoint(t.Context(), wt, "t3", nil)
	if err != nil || !changed {
		t.Fatalf("checkpoint after hand commit: %v %v", changed, err)
	}
	log := git(t, wt, "log", "--format=%s", c1+"~1.."+c3)
	if log != "t3\nby hand\nt1" {
		t.Errorf("log = %q", log)
	}
	if st := git(t, wt, "status", "--porcelain"); st != "" {
		t.Errorf("status not clean: %s", st)
	}
	// Staged-only change (index differs from HEAD, file matches index) is committed too.
	writeFiles(t, wt, map[string]string{"b.go": "staged\n"})
	git(t, wt, "add", "b.go")
	if _, changed, err := r.Checkpoint(t.Context(), wt, "t4", nil); err != nil || !changed {
		t.Fatalf("staged change: %v %v", changed, err)
	}
	if got := git(t, wt, "show", "HEAD:b.go"); got != "staged" {
		t.Errorf("b.go = %q", got)
	}
	assertFsck(t, root)
}

func TestCheckpointErrors(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)
	wt := addSession(t, r, "s")
	for _, c := range []struct {
		dir     string
		touched []string
		want    string
	}{
		{root, nil, "not a linked worktree"},
		{wt, []string{"../x"}, "outside the worktree"},
		{wt, []string{"/abs"}, "relative"},
	} {
		_, _, err := r.Checkpoint(t.Context(), c.dir, "m", c.touched)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Checkpoint(%s, %v) = %v, want %q", c.dir, c.touched, err, c.want)
		}
	}
	git(t, wt, "checkout", "-q", "--detach")
	if _, _, err := r.Checkpoint(t.Context(), wt, "m", nil); err == nil || !strings.Contains(err.Error(), "detached") {
		t.Errorf("detached: %v", err)
	}
}
