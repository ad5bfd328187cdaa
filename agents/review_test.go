package agents

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/gitstate"
)

// The review by hunk: accepting one hunk takes it out of the remaining diff; rejecting the
// other reverts it on the session's branch as a checkpoint (the user's branch does not move),
// the agent is told in its conversation (also after a restart), and nothing is left to review.
func TestReviewAcceptOneHunkRejectTheOther(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[
 {"when":{"task":"^hunks","turn":1},"code":"ls = open('long.txt').read().split('\\n')\nls[1] = 'CHANGED 2'\nls[39] = 'CHANGED 40'\nopen('long.txt','w').write('\\n'.join(ls))\nopen('extra.txt','w').write('extra\\n')"},
 {"when":{"task":"^hunks","turn":2},"text":"understood"}
],"default":{"text":"done"}}`)
	ctx := t.Context()
	var long []string
	for i := 1; i <= 50; i++ {
		long = append(long, fmt.Sprintf("line %d", i))
	}
	os.WriteFile(filepath.Join(e.repo, "long.txt"), []byte(strings.Join(long, "\n")+"\n"), 0o644)
	commitAll(t, e.repo, "fixtures")
	s := e.create("hunks task")
	e.settled(s)

	d, err := e.svc.Diff(ctx, s.meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := paths(d); got != "extra.txt,long.txt" {
		t.Fatalf("diff %s", got)
	}
	if _, err := e.svc.AcceptAt(ctx, s.meta.ID, Review{Head: d.Head}, nil, map[string][]int{"long.txt": {1}}, false); err != nil {
		t.Fatal(err)
	}
	mainAfterAccept := revParse(t, e.repo, "main")
	if got := git(t, e.repo, "show", "main:long.txt"); !strings.Contains(got, "CHANGED 40") || strings.Contains(got, "CHANGED 2") {
		t.Errorf("main:long.txt after accepting hunk 1:\n%s", got)
	}
	rem, err := e.svc.Diff(ctx, s.meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := paths(rem); got != "extra.txt,long.txt" {
		t.Fatalf("remaining %s", got)
	}
	for _, f := range rem.Files {
		if f.Path == "long.txt" && (len(f.Hunks) != 1 || !strings.Contains(strings.Join(f.Hunks[0].Lines, "\n"), "+CHANGED 2")) {
			t.Errorf("long.txt remaining hunks %+v", f.Hunks)
		}
	}
	if b, err := e.svc.ReviewBase(ctx, s.meta.ID); err != nil || b == "" || b != rem.Base {
		t.Errorf("review base %q %v, remaining diff base %s", b, err, rem.Base)
	}
	if base, err := e.svc.FileAt(ctx, s.meta.ID, "long.txt", "base"); err != nil || !strings.Contains(string(base), "CHANGED 40") {
		t.Errorf("the remaining diff's base side of long.txt lacks the accepted hunk: %v", err)
	}

	// A review of the diff from before the accept is refused: its hunk indexes point elsewhere.
	none := ""
	if _, _, err := e.svc.Reject(ctx, s.meta.ID, Review{Head: rem.Head, Accepted: &none}, nil, map[string][]int{"long.txt": {0}}); err == nil || !strings.Contains(err.Error(), "accepted since") {
		t.Errorf("a reject reviewed before the accept: %v", err)
	}
	commit, files, err := e.svc.Reject(ctx, s.meta.ID, Review{Head: rem.Head, Accepted: &rem.Base}, nil, map[string][]int{"long.txt": {0}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(files, ",") != "long.txt" || revParse(t, e.repo, s.meta.Branch) != commit {
		t.Errorf("reject %s %v; branch at %s", commit, files, revParse(t, e.repo, s.meta.Branch))
	}
	if got := git(t, e.repo, "show", s.meta.Branch+":long.txt"); strings.Contains(got, "CHANGED 2") || !strings.Contains(got, "CHANGED 40") {
		t.Errorf("the session's long.txt after the reject:\n%s", got)
	}
	if got, _ := os.ReadFile(filepath.Join(s.meta.Worktree, "long.txt")); strings.Contains(string(got), "CHANGED 2") {
		t.Error("the session's worktree still has the rejected hunk")
	}
	if revParse(t, e.repo, "main") != mainAfterAccept {
		t.Error("the reject moved the user's branch")
	}
	// A stale review is refused.
	if _, _, err := e.svc.Reject(ctx, s.meta.ID, Review{Head: rem.Head}, []string{"extra.txt"}, nil); err == nil || !strings.Contains(err.Error(), "diff again") {
		t.Errorf("reject with a stale head: %v", err)
	}
	if rem2, err := e.svc.Diff(ctx, s.meta.ID); err != nil || paths(rem2) != "extra.txt" {
		t.Errorf("remaining after accept and reject: %s %v", paths(rem2), err)
	}
	if cps := e.events(s, event.TypeCheckpoint); len(cps) == 0 || cps[len(cps)-1]["commit"] != commit {
		t.Errorf("the reject is not the session's latest checkpoint: %v", cps)
	}
	if rj := e.events(s, event.TypeRejected); len(rj) != 1 || fmt.Sprint(rj[0]["hunks"]) != "[long.txt#0]" {
		t.Errorf("rejected events %v", rj)
	}
	// The user resets their branch to before the accept: the whole change is to review again.
	git(t, e.repo, "reset", "-q", "--hard", "HEAD~1")
	if b, _ := e.svc.ReviewBase(ctx, s.meta.ID); b != "" {
		t.Errorf("the accepted point holds after the user dropped the accept: %s", b)
	}
	if again, err := e.svc.Diff(ctx, s.meta.ID); err != nil || paths(again) != "extra.txt,long.txt" {
		t.Errorf("after the reset the remaining diff is %s %v, want the accepted hunk back in review", paths(again), err)
	}
	told := func(svc *Service) bool {
		s2, err := svc.Get(s.meta.ID)
		if err != nil {
			t.Fatal(err)
		}
		conv := s2.conversation()
		return len(conv) > 0 && strings.Contains(conv[len(conv)-1].Content, "rejected part of it: long.txt (hunks long.txt#0)")
	}
	if !told(e.svc) {
		t.Error("the agent's conversation does not say what was rejected")
	}
	if !told(e.restart()) {
		t.Error("after a restart the conversation does not say what was rejected")
	}
}

// Merging a conflicting child: the conflict's files with their versions, a refused partial
// resolution, then the resolved merge on the parent's branch.
func TestMergeConflictResolvedByTheUser(t *testing.T) {
	t.Parallel()
	e := newEnv(t, mergeScript)
	ctx := context.Background()
	parent := e.create("merge parent task")
	e.settled(parent)
	alpha, _ := parent.ownChild("alpha")
	beta, err := parent.ownChild("beta")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Merge(ctx, alpha.meta.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Merge(ctx, beta.meta.ID); err == nil {
		t.Fatal("beta merged without a conflict")
	}
	con, err := e.svc.Conflicts(ctx, beta.meta.ID)
	if err != nil || con.Parent != parent.meta.ID || len(con.Files) != 1 || con.ChildHead != revParse(t, e.repo, beta.meta.Branch) {
		t.Fatalf("conflicts %+v %v", con, err)
	}
	cs := con.Files
	if c := cs[0]; c.Path != "shared.txt" || string(c.Ours) != "alpha\n" || string(c.Theirs) != "beta\n" || c.Base != nil || !strings.Contains(string(c.Merged), "<<<<<<<") {
		t.Errorf("shared.txt versions base=%q ours=%q theirs=%q merged=%q", c.Base, c.Ours, c.Theirs, c.Merged)
	}
	// Resolved against a parent that moved since: refused.
	if _, err := e.svc.MergeResolved(ctx, beta.meta.ID, gitstate.Resolutions{Content: map[string][]byte{"shared.txt": []byte("x\n")},
		ParentHead: "0123456789012345678901234567890123456789"}); !errors.Is(err, gitstate.ErrBadResolution) {
		t.Errorf("a resolution against a moved parent: %v", err)
	}
	res, err := e.svc.MergeResolved(ctx, beta.meta.ID, gitstate.Resolutions{Content: map[string][]byte{"shared.txt": []byte("alpha and beta\n")},
		ParentHead: con.ParentHead, ChildHead: con.ChildHead})
	if err != nil {
		t.Fatal(err)
	}
	if got := git(t, e.repo, "show", parent.meta.Branch+":shared.txt"); got != "alpha and beta\n" || revParse(t, e.repo, parent.meta.Branch) != res.Commit {
		t.Errorf("parent shared.txt %q after %s", got, res.Commit)
	}
	if got, _ := os.ReadFile(filepath.Join(parent.meta.Worktree, "shared.txt")); string(got) != "alpha and beta\n" {
		t.Errorf("the parent's worktree shared.txt = %q", got)
	}
	if ev := e.events(parent, event.TypeMerged); len(ev) != 2 || ev[1]["child"] != beta.meta.ID {
		t.Errorf("merged events %v", ev)
	}
}
