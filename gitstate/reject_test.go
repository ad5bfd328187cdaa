package gitstate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Rejecting a hunk and a file reverts them on the session's branch as a new commit its
// worktree moves to; the user's branch does not move; a stale review and bad selections are
// refused; rejecting what is left empties the diff.
func TestRejectHunksAndFiles(t *testing.T) {
	t.Parallel()
	root, r, wt := acceptFixture(t)
	mainBefore := git(t, root, "rev-parse", "HEAD")
	d, err := r.Diff(t.Context(), "main", "arbor/s")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []RejectOptions{
		{Hunks: map[string][]int{"dir/sub/c.txt": {2}}},
		{Files: []string{"b.go"}},
	} {
		bad.Dir, bad.From, bad.Head, bad.Reason = wt, d.Base, d.Head, "x"
		if _, _, err := r.Reject(t.Context(), bad); err == nil {
			t.Errorf("reject %+v succeeded", bad)
		}
	}
	commit, paths, err := r.Reject(t.Context(), RejectOptions{Dir: wt, From: d.Base, Head: d.Head, Reason: "the user rejected part",
		Files: []string{"new.txt"}, Hunks: map[string][]int{"dir/sub/c.txt": {0}}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(paths, ",") != "dir/sub/c.txt,new.txt" {
		t.Errorf("paths %v", paths)
	}
	if got := git(t, root, "rev-parse", "arbor/s"); got != commit {
		t.Errorf("arbor/s at %s, the reject made %s", got, commit)
	}
	if got := git(t, root, "log", "-1", "--format=%P%n%s", "arbor/s"); got != d.Head+"\nthe user rejected part" {
		t.Errorf("reject commit parent/subject %q", got)
	}
	if got := git(t, root, "show", "arbor/s:dir/sub/c.txt"); got != "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nTEN" {
		t.Errorf("c.txt on the branch:\n%s", got)
	}
	if got := git(t, root, "ls-tree", "--name-only", "arbor/s", "new.txt"); got != "" {
		t.Errorf("new.txt still on the branch: %s", got)
	}
	if b, _ := os.ReadFile(filepath.Join(wt, "dir/sub/c.txt")); !strings.HasPrefix(string(b), "one\n") {
		t.Errorf("the worktree did not move: c.txt\n%s", b)
	}
	if _, err := os.Stat(filepath.Join(wt, "new.txt")); !os.IsNotExist(err) {
		t.Errorf("new.txt still in the worktree: %v", err)
	}
	if st := git(t, wt, "status", "--porcelain"); st != "" {
		t.Errorf("session worktree not clean:\n%s", st)
	}
	if got := git(t, root, "rev-parse", "HEAD"); got != mainBefore {
		t.Error("the user's branch moved")
	}
	// The review of before is stale now.
	if _, _, err := r.Reject(t.Context(), RejectOptions{Dir: wt, From: d.Base, Head: d.Head, Reason: "x", Files: []string{"a.go"}}); err == nil || !strings.Contains(err.Error(), "out of date") {
		t.Errorf("stale reject: %v", err)
	}
	// Everything left.
	d2, err := r.Diff(t.Context(), "main", "arbor/s")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Reject(t.Context(), RejectOptions{Dir: wt, From: d2.Base, Head: d2.Head, Reason: "all"}); err != nil {
		t.Fatal(err)
	}
	if d3, err := r.Diff(t.Context(), "main", "arbor/s"); err != nil || len(d3.Files) != 0 {
		t.Errorf("after rejecting all: %v %v", paths3(d3), err)
	}
	assertFsck(t, root)
}

func paths3(d *Diff) []string {
	if d == nil {
		return nil
	}
	var out []string
	for _, f := range d.Files {
		out = append(out, f.Path)
	}
	return out
}

// Accepted parts leave the remaining diff: a hunk, then a file, then the rest, each chosen
// from the diff that remained, and the user's branch ends with all of it.
func TestAcceptedPointLeavesRemainingDiff(t *testing.T) {
	t.Parallel()
	root, r, _ := acceptFixture(t)
	d, err := r.Diff(t.Context(), "main", "arbor/s")
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Accept(t.Context(), AcceptOptions{Head: d.Head, Base: d.Base, Message: "hunk", Hunks: map[string][]int{"dir/sub/c.txt": {1}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetAccepted(t.Context(), "s", res.Selected); err != nil {
		t.Fatal(err)
	}
	from, err := r.Accepted("s")
	if err != nil || from != res.Selected {
		t.Fatalf("accepted point %q %v", from, err)
	}
	rem, err := r.DiffFrom(t.Context(), from, "arbor/s")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(paths3(rem), ","); got != "a.go,dir/sub/c.txt,new.txt" {
		t.Errorf("remaining files %s", got)
	}
	for _, f := range rem.Files {
		if f.Path == "dir/sub/c.txt" && (len(f.Hunks) != 1 || !strings.Contains(strings.Join(f.Hunks[0].Lines, ""), "+ONE")) {
			t.Errorf("c.txt remaining hunks %+v", f.Hunks)
		}
	}
	res2, err := r.Accept(t.Context(), AcceptOptions{Head: rem.Head, From: from, Message: "file", Files: []string{"new.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := git(t, root, "diff", "--name-only", "HEAD~1", "HEAD"); got != "new.txt" {
		t.Errorf("second accept changed %s", got)
	}
	r.SetAccepted(t.Context(), "s", res2.Selected)
	rem2, _ := r.DiffFrom(t.Context(), res2.Selected, "arbor/s")
	if got := strings.Join(paths3(rem2), ","); got != "a.go,dir/sub/c.txt" {
		t.Errorf("remaining after the file: %s", got)
	}
	res3, err := r.Accept(t.Context(), AcceptOptions{Head: rem2.Head, From: res2.Selected, Message: "rest"})
	if err != nil {
		t.Fatal(err)
	}
	r.SetAccepted(t.Context(), "s", res3.Selected)
	if rem3, _ := r.DiffFrom(t.Context(), res3.Selected, "arbor/s"); len(rem3.Files) != 0 {
		t.Errorf("remaining after all: %v", paths3(rem3))
	}
	if got := git(t, root, "diff", "--name-only", "HEAD", "arbor/s"); got != "user.txt" {
		t.Errorf("main against the session differs in %q, want only the user's own file", got)
	}
	if err := r.DropAccepted(t.Context(), "s"); err != nil {
		t.Fatal(err)
	}
	if a, _ := r.Accepted("s"); a != "" {
		t.Errorf("accepted point after drop: %s", a)
	}
	assertFsck(t, root)
}

// A child and its parent change one line each way: the merge conflicts, Conflicts shows the
// three versions and git's merge; resolutions are refused for a path not in conflict or
// with markers left; all resolved, the merge commits the resolution.
func TestMergeConflictResolutions(t *testing.T) {
	t.Parallel()
	root, r, parent := acceptFixture(t)
	_, base, _ := r.Head(t.Context())
	child := filepath.Join(r.CommonDir(), "arbor", "worktrees", "child")
	if err := r.Fork(t.Context(), WorktreeSpec{Name: "child", Branch: "arbor/child", Base: base, Dir: child}); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, child, map[string]string{"b.go": "package a\n\nfunc Bar() int { return Foo() + 2 }\n", "child.txt": "c\n"})
	if _, _, err := r.Checkpoint(t.Context(), child, "child turn", nil); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, parent, map[string]string{"b.go": "package a\n\nfunc Bar() int { return Foo() + 3 }\n"})
	if _, _, err := r.Checkpoint(t.Context(), parent, "parent turn", nil); err != nil {
		t.Fatal(err)
	}
	parentHead := git(t, parent, "rev-parse", "HEAD")
	_, err := r.Merge(t.Context(), "arbor/child", parent, "merge", nil)
	var ce *ConflictError
	if !errors.As(err, &ce) || strings.Join(ce.Files, ",") != "b.go" {
		t.Fatalf("merge: %v", err)
	}
	cs, err := r.Conflicts(t.Context(), "arbor/child", parent)
	if err != nil || len(cs) != 1 {
		t.Fatalf("conflicts %+v %v", cs, err)
	}
	c := cs[0]
	if c.Path != "b.go" || !strings.Contains(string(c.Base), "+ 1") || !strings.Contains(string(c.Ours), "+ 3") ||
		!strings.Contains(string(c.Theirs), "+ 2") || !strings.Contains(string(c.Merged), "<<<<<<< ") {
		t.Errorf("versions: %+v", c)
	}
	for _, bad := range []map[string][]byte{
		{"b.go": []byte("x\n"), "child.txt": []byte("c\n")},
		{"b.go": c.Merged},
	} {
		if _, err := r.Merge(t.Context(), "arbor/child", parent, "merge", bad); !errors.Is(err, ErrBadResolution) {
			t.Errorf("resolutions %v: %v", bad, err)
		}
	}
	if got := git(t, parent, "rev-parse", "HEAD"); got != parentHead {
		t.Fatal("a refused merge moved the parent")
	}
	resolved := "package a\n\nfunc Bar() int { return Foo() + 5 }\n"
	res, err := r.Merge(t.Context(), "arbor/child", parent, "merge", map[string][]byte{"b.go": []byte(resolved)})
	if err != nil {
		t.Fatal(err)
	}
	if got := git(t, root, "show", res.Commit+":b.go"); got+"\n" != resolved {
		t.Errorf("b.go merged as %q", got)
	}
	if b, _ := os.ReadFile(filepath.Join(parent, "child.txt")); string(b) != "c\n" {
		t.Errorf("child.txt in the parent = %q", b)
	}
	if parents := strings.Fields(git(t, parent, "log", "-1", "--format=%P")); len(parents) != 2 {
		t.Errorf("merge parents %v", parents)
	}
	if st := git(t, parent, "status", "--porcelain"); st != "" {
		t.Errorf("parent worktree after the merge:\n%s", st)
	}
	if cs, err := r.Conflicts(t.Context(), "arbor/child", parent); err != nil || len(cs) != 0 {
		t.Errorf("conflicts after the merge: %v %v", cs, err)
	}
	assertFsck(t, root)
}
