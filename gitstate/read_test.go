package gitstate

import (
	"errors"
	"testing"
)

func TestFileAtMergeBaseDiffCommits(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)
	wt := addSession(t, r, "s")
	base := git(t, root, "rev-parse", "HEAD")
	writeFiles(t, wt, map[string]string{"a.go": "turn 1\n"})
	c1, _, err := r.Checkpoint(t.Context(), wt, "t1", nil)
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, wt, map[string]string{"b.go": "turn 2\n"})
	c2, _, err := r.Checkpoint(t.Context(), wt, "t2", nil)
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, root, map[string]string{"main.txt": "m\n"})
	git(t, root, "add", "main.txt")
	git(t, root, "commit", "-q", "-m", "main moves")

	for _, c := range []struct{ rev, path, want string }{
		{c1, "a.go", "turn 1\n"},
		{base, "a.go", "package a\n\nfunc Foo() int { return 1 }\n"},
		{"arbor/s", "b.go", "turn 2\n"},
		{c2, "link", "a.go"},
	} {
		if got, err := r.FileAt(t.Context(), c.rev, c.path); err != nil || string(got) != c.want {
			t.Errorf("FileAt(%s, %s) = %q, %v; want %q", c.rev, c.path, got, err, c.want)
		}
	}
	if _, err := r.FileAt(t.Context(), c1, "nope.txt"); !errors.Is(err, ErrNotFound) {
		t.Errorf("FileAt(missing) = %v, want ErrNotFound", err)
	}
	if _, err := r.FileAt(t.Context(), c1, "../etc/passwd"); err == nil {
		t.Error("FileAt(../) succeeded")
	}
	if mb, err := r.MergeBase(t.Context(), "main", "arbor/s"); err != nil || mb != base {
		t.Errorf("MergeBase = %s %v, want %s", mb, err, base)
	}
	d, err := r.DiffCommits(t.Context(), c1, c2)
	if err != nil || len(d.Files) != 1 || d.Files[0].Path != "b.go" {
		t.Errorf("turn 2 diff = %+v %v, want only b.go", d, err)
	}
}
