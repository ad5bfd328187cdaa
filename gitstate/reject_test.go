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
	if err := r.SetAccepted(t.Context(), "s", res.Selected, res.Commit, ""); err != nil {
		t.Fatal(err)
	}
	from, onto, err := r.Accepted("s")
	if err != nil || from != res.Selected || onto != res.Commit {
		t.Fatalf("accepted point %q onto %q %v", from, onto, err)
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
	if err := r.SetAccepted(t.Context(), "s", res2.Selected, res2.Commit, "0123456789012345678901234567890123456789"); err == nil {
		t.Error("an accepted point moved meanwhile was replaced")
	}
	if err := r.SetAccepted(t.Context(), "s", res2.Selected, res2.Commit, from); err != nil {
		t.Fatal(err)
	}
	rem2, _ := r.DiffFrom(t.Context(), res2.Selected, "arbor/s")
	if got := strings.Join(paths3(rem2), ","); got != "a.go,dir/sub/c.txt" {
		t.Errorf("remaining after the file: %s", got)
	}
	res3, err := r.Accept(t.Context(), AcceptOptions{Head: rem2.Head, From: res2.Selected, Message: "rest"})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetAccepted(t.Context(), "s", res3.Selected, res3.Commit, res2.Selected); err != nil {
		t.Fatal(err)
	}
	if rem3, _ := r.DiffFrom(t.Context(), res3.Selected, "arbor/s"); len(rem3.Files) != 0 {
		t.Errorf("remaining after all: %v", paths3(rem3))
	}
	if got := git(t, root, "diff", "--name-only", "HEAD", "arbor/s"); got != "user.txt" {
		t.Errorf("main against the session differs in %q, want only the user's own file", got)
	}
	if err := r.DropAccepted(t.Context(), "s"); err != nil {
		t.Fatal(err)
	}
	if a, _, _ := r.Accepted("s"); a != "" {
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
	_, err := r.Merge(t.Context(), "arbor/child", parent, "merge", Resolutions{})
	var ce *ConflictError
	if !errors.As(err, &ce) || strings.Join(ce.Files, ",") != "b.go" {
		t.Fatalf("merge: %v", err)
	}
	cs, _, _, err := r.Conflicts(t.Context(), "arbor/child", parent)
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
		if _, err := r.Merge(t.Context(), "arbor/child", parent, "merge", Resolutions{Content: bad}); !errors.Is(err, ErrBadResolution) {
			t.Errorf("resolutions %v: %v", bad, err)
		}
	}
	if got := git(t, parent, "rev-parse", "HEAD"); got != parentHead {
		t.Fatal("a refused merge moved the parent")
	}
	resolved := "package a\n\nfunc Bar() int { return Foo() + 5 }\n"
	res, err := r.Merge(t.Context(), "arbor/child", parent, "merge", Resolutions{Content: map[string][]byte{"b.go": []byte(resolved)}})
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
	if cs, _, _, err := r.Conflicts(t.Context(), "arbor/child", parent); err != nil || len(cs) != 0 {
		t.Errorf("conflicts after the merge: %v %v", cs, err)
	}
	assertFsck(t, root)
}

// The agent edits a line the user accepted, and the user edits another they accepted: the
// next accept merges over the accepted point, so the agent's new edit lands and the user's
// own edit stays — no false conflict, nothing accepted before comes back.
func TestAcceptOverTheAcceptedPoint(t *testing.T) {
	t.Parallel()
	root, r, wt := acceptFixture(t)
	d, err := r.Diff(t.Context(), "main", "arbor/s")
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Accept(t.Context(), AcceptOptions{Head: d.Head, Base: d.Base, Message: "c.txt", Files: []string{"dir/sub/c.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	// The agent changes TEN again; the user changes ONE on their branch.
	writeFiles(t, wt, map[string]string{"dir/sub/c.txt": "ONE\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nTEN-v2\n"})
	if _, _, err := r.Checkpoint(t.Context(), wt, "turn 2", nil); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, root, map[string]string{"dir/sub/c.txt": "ONE (mine)\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nTEN\n"})
	git(t, root, "commit", "-qam", "user edit")
	rem, err := r.DiffFrom(t.Context(), res.Selected, "arbor/s")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Accept(t.Context(), AcceptOptions{Head: rem.Head, From: res.Selected, Message: "again", Files: []string{"dir/sub/c.txt"}}); err != nil {
		t.Fatalf("accepting the agent's new edit of an accepted line: %v", err)
	}
	if got := git(t, root, "show", "HEAD:dir/sub/c.txt"); got != "ONE (mine)\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nTEN-v2" {
		t.Errorf("c.txt after the second accept:\n%s", got)
	}
	if got := git(t, root, "diff", "--name-only", "HEAD~1", "HEAD"); got != "dir/sub/c.txt" {
		t.Errorf("the second accept changed %s", got)
	}
	assertFsck(t, root)
}

// Conflicts settled by taking a side: the parent's deletion of a file the child modified, and
// the child's version of another, whole.
func TestMergeTakeASide(t *testing.T) {
	t.Parallel()
	root, r, parent := acceptFixture(t)
	_, base, _ := r.Head(t.Context())
	child := filepath.Join(r.CommonDir(), "arbor", "worktrees", "child")
	if err := r.Fork(t.Context(), WorktreeSpec{Name: "child", Branch: "arbor/child", Base: base, Dir: child}); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, child, map[string]string{"b.go": "package a\n// child\n", "dir/d.bin": "\x00child"})
	if _, _, err := r.Checkpoint(t.Context(), child, "child turn", nil); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(parent, "b.go"))
	writeFiles(t, parent, map[string]string{"dir/d.bin": "\x00parent"})
	if _, _, err := r.Checkpoint(t.Context(), parent, "parent turn", nil); err != nil {
		t.Fatal(err)
	}
	cs, ph, ch, err := r.Conflicts(t.Context(), "arbor/child", parent)
	if err != nil || len(cs) != 2 || ph == "" || ch == "" {
		t.Fatalf("conflicts %+v %v", cs, err)
	}
	for _, c := range cs {
		if c.Path == "dir/d.bin" && !c.Binary || c.Path == "b.go" && c.Ours != nil {
			t.Errorf("conflict %s: binary %v ours %q", c.Path, c.Binary, c.Ours)
		}
	}
	if _, err := r.Merge(t.Context(), "arbor/child", parent, "m", Resolutions{Take: map[string]string{"b.go": "mine"}}); !errors.Is(err, ErrBadResolution) {
		t.Errorf("take mine: %v", err)
	}
	res, err := r.Merge(t.Context(), "arbor/child", parent, "m", Resolutions{Take: map[string]string{"b.go": "ours", "dir/d.bin": "theirs"},
		ParentHead: ph, ChildHead: ch})
	if err != nil {
		t.Fatal(err)
	}
	if got := git(t, root, "ls-tree", "--name-only", res.Commit, "b.go"); got != "" {
		t.Errorf("b.go kept although the parent's deletion was taken")
	}
	if got := git(t, root, "show", res.Commit+":dir/d.bin"); got != "\x00child" {
		t.Errorf("d.bin = %q, want the child's", got)
	}
	assertFsck(t, root)
}
