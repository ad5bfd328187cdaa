package gitstate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// acceptFixture: a session that edits a.go, two far-apart lines of dir/sub/c.txt and adds
// new.txt, while the user's main branch moves ahead with user.txt.
func acceptFixture(t *testing.T) (root string, r *Repo, wt string) {
	t.Helper()
	root = newTestRepo(t)
	r = openTest(t, root)
	wt = addSession(t, r, "s")
	writeFiles(t, wt, map[string]string{
		"a.go":          "package a\n\nfunc Bar() int { return 1 }\n",
		"dir/sub/c.txt": "ONE\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nTEN\n",
		"new.txt":       "new\n",
	})
	if _, _, err := r.Checkpoint(t.Context(), wt, "turn", nil); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, root, map[string]string{"user.txt": "user\n"})
	git(t, root, "add", "user.txt")
	git(t, root, "commit", "-q", "-m", "user work")
	return root, r, wt
}

func TestAcceptWhole(t *testing.T) {
	t.Parallel()
	root, r, _ := acceptFixture(t)
	before := git(t, root, "rev-parse", "HEAD")
	res, err := r.Accept(t.Context(), AcceptOptions{Head: "arbor/s", Message: "Rename Foo to Bar"})
	if err != nil {
		t.Fatal(err)
	}
	if got := git(t, root, "rev-parse", "HEAD"); got != res.Commit || res.Branch != "main" {
		t.Errorf("HEAD %s, result %+v", got, res)
	}
	if parents := git(t, root, "log", "-1", "--format=%P"); parents != before {
		t.Errorf("squash parents = %q, want %s", parents, before)
	}
	if got := git(t, root, "diff", "--name-only", "HEAD~1", "HEAD"); got != "a.go\ndir/sub/c.txt\nnew.txt" {
		t.Errorf("accepted files:\n%s", got)
	}
	if st := git(t, root, "status", "--porcelain"); st != "" {
		t.Errorf("user tree not clean after accept:\n%s", st)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "new.txt")); string(b) != "new\n" {
		t.Errorf("new.txt in user tree = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "user.txt")); string(b) != "user\n" {
		t.Errorf("user's own work lost: %q", b)
	}
	// Merging the squashed session records that it is merged and changes no content.
	session := git(t, root, "rev-parse", "arbor/s")
	merged, err := r.Accept(t.Context(), AcceptOptions{Head: "arbor/s", Merge: true})
	if err != nil {
		t.Fatalf("merge after the squash: %v", err)
	}
	if parents := git(t, root, "log", "-1", "--format=%P"); parents != res.Commit+" "+session {
		t.Errorf("merge parents = %q, want %s %s", parents, res.Commit, session)
	}
	if got, want := git(t, root, "rev-parse", merged.Commit+"^{tree}"), git(t, root, "rev-parse", res.Commit+"^{tree}"); got != want {
		t.Errorf("merge changed the tree: %s, was %s", got, want)
	}
	if st := git(t, root, "status", "--porcelain"); st != "" {
		t.Errorf("user tree not clean after the merge:\n%s", st)
	}
	// Now the session is contained in main: a third accept has nothing to bring.
	if _, err := r.Accept(t.Context(), AcceptOptions{Head: "arbor/s", Message: "again"}); err == nil || !strings.Contains(err.Error(), "nothing to accept") {
		t.Errorf("third accept = %v, want nothing to accept", err)
	}
	if got := git(t, root, "rev-parse", "HEAD"); got != merged.Commit {
		t.Errorf("HEAD moved to %s after the refused accept", got)
	}
	assertFsck(t, root)
}

func TestAcceptFilesAndHunks(t *testing.T) {
	t.Parallel()
	root, r, _ := acceptFixture(t)
	d, err := r.Diff(t.Context(), "main", "arbor/s")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range d.Files {
		if f.Path == "dir/sub/c.txt" && len(f.Hunks) != 2 {
			t.Fatalf("c.txt has %d hunks, want 2", len(f.Hunks))
		}
	}
	_, err = r.Accept(t.Context(), AcceptOptions{Head: d.Head, Base: d.Base, Message: "part",
		Files: []string{"new.txt"}, Hunks: map[string][]int{"dir/sub/c.txt": {1}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := git(t, root, "diff", "--name-only", "HEAD~1", "HEAD"); got != "dir/sub/c.txt\nnew.txt" {
		t.Errorf("accepted files:\n%s", got)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "dir/sub/c.txt")); !strings.HasPrefix(string(b), "one\n") || !strings.HasSuffix(string(b), "TEN\n") {
		t.Errorf("c.txt after accepting only the second hunk:\n%s", b)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "a.go")); strings.Contains(string(b), "Bar") {
		t.Error("a.go was not chosen but changed")
	}
	if st := git(t, root, "status", "--porcelain"); st != "" {
		t.Errorf("user tree not clean:\n%s", st)
	}
	// The review's hunk indexes go stale once the merge-base moves.
	git(t, root, "merge", "-q", "--no-edit", "arbor/s")
	if _, err := r.Accept(t.Context(), AcceptOptions{Head: d.Head, Base: d.Base, Message: "x", Files: []string{"a.go"}}); err == nil {
		t.Error("accept with a stale base succeeded")
	}
	assertFsck(t, root)
}

func TestAcceptRefusesDirtyAndConflicts(t *testing.T) {
	t.Parallel()
	root, r, _ := acceptFixture(t)
	head := git(t, root, "rev-parse", "HEAD")

	writeFiles(t, root, map[string]string{"a.go": "uncommitted user edit\n", "new.txt": "untracked in the way\n"})
	_, err := r.Accept(t.Context(), AcceptOptions{Head: "arbor/s", Message: "m"})
	var dirty *DirtyError
	if !errors.As(err, &dirty) || strings.Join(dirty.Files, ",") != "a.go,new.txt" {
		t.Fatalf("Accept over dirty files = %v, want DirtyError naming a.go, new.txt", err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "a.go")); string(b) != "uncommitted user edit\n" {
		t.Errorf("user's edit overwritten: %q", b)
	}
	if got := git(t, root, "rev-parse", "HEAD"); got != head {
		t.Error("branch moved despite the refusal")
	}
	// Uncommitted work elsewhere does not block.
	os.Remove(filepath.Join(root, "new.txt"))
	git(t, root, "checkout", "--", "a.go")
	writeFiles(t, root, map[string]string{"b.go": "unrelated edit\n"})
	if _, err := r.Accept(t.Context(), AcceptOptions{Head: "arbor/s", Message: "m", Files: []string{"new.txt"}}); err != nil {
		t.Fatalf("accept beside an unrelated edit: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "b.go")); string(b) != "unrelated edit\n" {
		t.Errorf("unrelated edit lost: %q", b)
	}

	git(t, root, "checkout", "--", "b.go")
	writeFiles(t, root, map[string]string{"a.go": "package a\n\nfunc Baz() int { return 1 }\n"})
	git(t, root, "commit", "-q", "-am", "conflicting")
	head = git(t, root, "rev-parse", "HEAD")
	_, err = r.Accept(t.Context(), AcceptOptions{Head: "arbor/s", Message: "m"})
	var conflict *ConflictError
	if !errors.As(err, &conflict) || strings.Join(conflict.Files, ",") != "a.go" {
		t.Fatalf("Accept with a conflict = %v, want ConflictError naming a.go", err)
	}
	if got := git(t, root, "rev-parse", "HEAD"); got != head {
		t.Error("branch moved despite the conflict")
	}
	if st := git(t, root, "status", "--porcelain"); st != "" {
		t.Errorf("user tree changed by a failed accept:\n%s", st)
	}
	assertFsck(t, root)
}

func TestAcceptMergeAndChildIntoParent(t *testing.T) {
	t.Parallel()
	root, r, parent := acceptFixture(t)
	_, base, _ := r.Head(t.Context())
	child := filepath.Join(r.CommonDir(), "arbor", "worktrees", "child")
	if err := r.Fork(t.Context(), WorktreeSpec{Name: "child", Branch: "arbor/child", Base: base, Dir: child}); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, child, map[string]string{"child.txt": "from the child\n"})
	if _, _, err := r.Checkpoint(t.Context(), child, "child turn", nil); err != nil {
		t.Fatal(err)
	}
	res, err := r.Merge(t.Context(), "arbor/child", parent, "", Resolutions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Branch != "arbor/s" {
		t.Errorf("merged into %s", res.Branch)
	}
	if parents := strings.Fields(git(t, parent, "log", "-1", "--format=%P")); len(parents) != 2 {
		t.Errorf("merge commit parents = %v", parents)
	}
	if b, _ := os.ReadFile(filepath.Join(parent, "child.txt")); string(b) != "from the child\n" {
		t.Errorf("child.txt in parent = %q", b)
	}
	if st := git(t, parent, "status", "--porcelain"); st != "" {
		t.Errorf("parent worktree not clean:\n%s", st)
	}
	// The parent's next checkpoint builds on the merge.
	writeFiles(t, parent, map[string]string{"after.txt": "x\n"})
	if _, _, err := r.Checkpoint(t.Context(), parent, "after merge", nil); err != nil {
		t.Fatal(err)
	}
	if n := git(t, parent, "rev-list", "--count", "--merges", "HEAD"); n != "1" {
		t.Errorf("merges in parent history = %s", n)
	}
	if main := git(t, root, "rev-parse", "HEAD"); main == res.Commit {
		t.Error("merge went into the user's branch")
	}
	assertFsck(t, root)
}

func TestApplyHunks(t *testing.T) {
	t.Parallel()
	old := "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm"
	cur := "A\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nM\n"
	hs, _, _ := hunks(old, cur)
	if len(hs) != 2 {
		t.Fatalf("%d hunks", len(hs))
	}
	for _, c := range []struct {
		take map[int]bool
		want string
	}{
		{map[int]bool{}, old},
		{map[int]bool{0: true, 1: true}, cur},
		{map[int]bool{0: true}, "A" + old[1:]},
		{map[int]bool{1: true}, old[:len(old)-1] + "M\n"},
	} {
		if got := applyHunks(old, hs, c.take); got != c.want {
			t.Errorf("applyHunks(%v) = %q, want %q", c.take, got, c.want)
		}
	}
}

// TestAcceptCancelled: a cancel before the worktree changes refuses and changes nothing; a
// cancel once it is changing does not stop the branch from following, so the user's tree is
// never left half-accepted.
func TestAcceptCancelled(t *testing.T) {
	root, r, _ := acceptFixture(t)
	before := git(t, root, "rev-parse", "HEAD")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := r.Accept(ctx, AcceptOptions{Head: "arbor/s", Message: "m"}); !errors.Is(err, context.Canceled) {
		t.Errorf("accept with a cancelled context: %v", err)
	}
	if got := git(t, root, "rev-parse", "HEAD"); got != before {
		t.Errorf("HEAD moved to %s", got)
	}
	if st := git(t, root, "status", "--porcelain"); st != "" {
		t.Errorf("tree changed by a cancelled accept:\n%s", st)
	}

	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	testHookAdvanced = cancel
	defer func() { testHookAdvanced = nil }()
	res, err := r.Accept(ctx, AcceptOptions{Head: "arbor/s", Message: "m"})
	if err != nil {
		t.Fatalf("accept cancelled while the tree changed: %v", err)
	}
	if got := git(t, root, "rev-parse", "HEAD"); got != res.Commit {
		t.Errorf("HEAD %s, want the accepted %s", got, res.Commit)
	}
	if st := git(t, root, "status", "--porcelain"); st != "" {
		t.Errorf("user tree not clean:\n%s", st)
	}
}
