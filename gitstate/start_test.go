package gitstate

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestStartWorktreeRegistersFirst: StartWorktree returns once the branch and the record
// exist, while another worktree's files are still being written (held here by the hook);
// that worktree is refused by Checkpoint until its files are in, and both end complete and
// clean to the git CLI.
func TestStartWorktreeRegistersFirst(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)
	_, head, err := r.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	r.beforeFill = func(name string) {
		if name == "slow" {
			<-hold
		}
	}
	spec := func(id string) WorktreeSpec {
		return WorktreeSpec{Name: id, Branch: "arbor/" + id, Base: head, Dir: filepath.Join(r.CommonDir(), "arbor", "worktrees", id)}
	}
	slow, err := r.StartWorktree(t.Context(), spec("slow"))
	if err != nil {
		t.Fatal(err)
	}
	if got := git(t, root, "rev-parse", "arbor/slow"); got != head {
		t.Errorf("branch arbor/slow = %q before its files, want %s", got, head)
	}
	fast, err := r.StartWorktree(t.Context(), spec("fast"))
	if err != nil {
		t.Fatal(err)
	}
	if err := fast.Wait(t.Context()); err != nil {
		t.Fatalf("the second worktree waited for the first one's files: %v", err)
	}
	select {
	case <-slow.Done():
		t.Fatal("the held worktree finished")
	default:
	}
	if _, _, err := r.Checkpoint(t.Context(), spec("slow").Dir, "t", nil); err == nil || !strings.Contains(err.Error(), "still being created") {
		t.Errorf("Checkpoint of a worktree being made = %v, want a refusal", err)
	}
	if err := r.RemoveWorktree(t.Context(), spec("slow").Dir, true); err == nil {
		t.Error("RemoveWorktree of a worktree being made succeeded")
	}
	close(hold)
	if err := slow.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if slow.Took() <= 0 {
		t.Errorf("Took = %v", slow.Took())
	}
	for _, id := range []string{"slow", "fast"} {
		dir := spec(id).Dir
		if st := git(t, dir, "status", "--porcelain"); st != "" {
			t.Errorf("%s: git status = %q", id, st)
		}
		if _, err := os.Stat(filepath.Join(dir, "dir", "sub", "c.txt")); err != nil {
			t.Errorf("%s: %v", id, err)
		}
		if _, err := os.Stat(filepath.Join(r.adminDir(id), "locked")); !os.IsNotExist(err) {
			t.Errorf("%s still marked initializing: %v", id, err)
		}
	}
	if list := git(t, root, "worktree", "list"); !strings.Contains(list, spec("slow").Dir) {
		t.Errorf("git worktree list = %q", list)
	}
}

// TestStartWorktreeFailureRollsBack: a worktree whose files cannot be written leaves no
// branch, record or registration, and Wait says why.
func TestStartWorktreeFailureRollsBack(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)
	_, head, _ := r.Head(t.Context())
	dir := filepath.Join(r.CommonDir(), "arbor", "worktrees", "bad")
	r.beforeFill = func(string) {
		// A file where the worktree dir's parent must be: the files cannot be written.
		os.MkdirAll(filepath.Dir(dir), 0o755)
		os.WriteFile(dir, []byte("in the way"), 0o644)
	}
	p, err := r.StartWorktree(t.Context(), WorktreeSpec{Name: "bad", Branch: "arbor/bad", Base: head, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(t.Context()); err == nil {
		t.Fatal("Wait = nil for a worktree that could not be written")
	}
	if out := git(t, root, "branch", "--list", "arbor/bad"); out != "" {
		t.Errorf("branch left behind: %q", out)
	}
	if _, err := os.Stat(r.recordPath("bad")); !os.IsNotExist(err) {
		t.Errorf("record left behind: %v", err)
	}
	if _, err := os.Stat(r.adminDir("bad")); !os.IsNotExist(err) {
		t.Errorf("registration left behind: %v", err)
	}
}

// TestStartWorktreeHold: a held worktree has its branch and record but no directory and no
// write slot until Hold closes; closing the Repo while it is held leaves it as a killed
// process would, and the next Reconcile that knows the session writes it.
func TestStartWorktreeHold(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r, err := Open(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, head, _ := r.Head(t.Context())
	spec := func(id string, hold *Hold) WorktreeSpec {
		return WorktreeSpec{Name: id, Branch: "arbor/" + id, Base: head, Dir: filepath.Join(r.CommonDir(), "arbor", "worktrees", id), Hold: hold}
	}
	holds := map[string]*Hold{}
	var pends []*Pending
	for _, id := range []string{"h1", "h2", "h3"} { // more than maxFills
		holds[id] = NewHold()
		p, err := r.StartWorktree(t.Context(), spec(id, holds[id]))
		if err != nil {
			t.Fatal(err)
		}
		pends = append(pends, p)
	}
	free, err := r.StartWorktree(t.Context(), spec("free", nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := free.Wait(t.Context()); err != nil {
		t.Fatalf("an unheld worktree waited behind held ones: %v", err)
	}
	for id := range holds {
		if _, err := os.Stat(spec(id, nil).Dir); !os.IsNotExist(err) {
			t.Errorf("%s: the held worktree's directory exists: %v", id, err)
		}
		if got := git(t, root, "rev-parse", "arbor/"+id); got != head {
			t.Errorf("branch arbor/%s = %q while held, want %s", id, got, head)
		}
	}
	// Opened and shut again before its turn came: still held. (The write slots are taken by
	// writes this test holds at beforeFill.)
	block, in := make(chan struct{}), make(chan string, 2)
	r.beforeFill = func(name string) {
		if name == "b1" || name == "b2" {
			in <- name
			<-block
		}
	}
	var bs []*Pending
	for _, id := range []string{"b1", "b2"} {
		b, err := r.StartWorktree(t.Context(), spec(id, nil))
		if err != nil {
			t.Fatal(err)
		}
		bs = append(bs, b)
	}
	<-in
	<-in // both slots are taken
	holds["h2"].Open()
	time.Sleep(50 * time.Millisecond)
	if !holds["h2"].Shut() || !holds["h2"].Held() || holds["h2"].Started() {
		t.Error("a hold opened while both write slots were busy did not shut again")
	}
	// Kept open (the files are needed) while the slots are still busy: no Shut holds it back.
	if !holds["h1"].Keep() || holds["h1"].Shut() || holds["h1"].Started() {
		t.Error("a hold kept open before its write began could be shut")
	}
	close(block)
	for _, b := range bs {
		if err := b.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if err := pends[0].Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !holds["h1"].Started() || holds["h1"].Shut() {
		t.Error("a hold whose write ran could be shut")
	}
	if st := git(t, spec("h1", nil).Dir, "status", "--porcelain"); st != "" {
		t.Errorf("h1: git status = %q", st)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range pends[1:] {
		if err := p.Wait(t.Context()); !errors.Is(err, ErrClosed) {
			t.Errorf("a held worktree's Wait after Close = %v, want ErrClosed", err)
		}
	}
	for _, id := range []string{"h2", "h3"} {
		if _, err := os.Stat(spec(id, nil).Dir); !os.IsNotExist(err) {
			t.Errorf("%s: Close wrote a held worktree: %v", id, err)
		}
	}
	r2 := openTest(t, root)
	known := map[string]string{}
	for _, id := range []string{"h1", "h2", "h3", "free", "b1", "b2"} {
		known[id] = spec(id, nil).Dir
	}
	// h3 may wait for its files (a queued child's): deferred, not written.
	rep, err := r2.ReconcileDeferring(t.Context(), known, map[string]bool{"h3": true, "h1": true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Recreated, []string{"h2"}) || !slices.Equal(rep.Deferred, []string{"h3"}) || len(rep.Problems) > 0 {
		t.Errorf("reconcile: recreated %v, deferred %v (want [h2], [h3]; h1 was whole), problems %v", rep.Recreated, rep.Deferred, rep.Problems)
	}
	if st := git(t, spec("h2", nil).Dir, "status", "--porcelain"); st != "" {
		t.Errorf("h2 after Reconcile: git status = %q", st)
	}
	if _, err := os.Stat(spec("h3", nil).Dir); !os.IsNotExist(err) || !r2.Released("h3") {
		t.Errorf("h3 deferred: dir %v, released %v; want no dir, released", err, r2.Released("h3"))
	}
	// A half-made one (still marked initializing, some files missing) holds no work either.
	h2 := spec("h2", nil).Dir
	os.WriteFile(filepath.Join(r2.CommonDir(), "worktrees", "h2", "locked"), []byte("initializing\n"), 0o644)
	os.Remove(filepath.Join(h2, "run.sh"))
	if rep, err = r2.ReconcileDeferring(t.Context(), known, map[string]bool{"h2": true}); err != nil || !slices.Equal(rep.Deferred, []string{"h2"}) {
		t.Errorf("half-made h2: deferred %v, err %v", rep.Deferred, err)
	}
	if _, err := os.Stat(h2); !os.IsNotExist(err) {
		t.Errorf("half-made h2 left on disk: %v", err)
	}
	for _, id := range []string{"h2", "h3"} {
		if err := r2.RestoreWorktree(t.Context(), id, "arbor/"+id, spec(id, nil).Dir); err != nil {
			t.Fatalf("restore %s: %v", id, err)
		}
		if st := git(t, spec(id, nil).Dir, "status", "--porcelain"); st != "" || r2.Released(id) {
			t.Errorf("%s restored: git status = %q, released %v", id, st, r2.Released(id))
		}
	}
}

// TestDiscardUnwritten: a held worktree dropped before its write began is never written, and
// Discard takes its branch and record without a directory to remove; so does it a released
// one's, keeping the work its branch holds.
func TestDiscardUnwritten(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)
	_, head, _ := r.Head(t.Context())
	spec := func(id string, hold *Hold) WorktreeSpec {
		return WorktreeSpec{Name: id, Branch: "arbor/" + id, Base: head, Dir: filepath.Join(r.CommonDir(), "arbor", "worktrees", id), Hold: hold}
	}
	h := NewHold()
	p, err := r.StartWorktree(t.Context(), spec("q", h))
	if err != nil {
		t.Fatal(err)
	}
	if !h.Drop() || h.Drop() || h.Open() || h.Keep() {
		t.Error("Drop: the first gives the write up; after it, nothing opens the hold again")
	}
	if err := p.Wait(t.Context()); !errors.Is(err, ErrDropped) {
		t.Errorf("a dropped write's Wait = %v, want ErrDropped", err)
	}
	res, err := r.Discard(t.Context(), spec("q", nil).Dir, "arbor/q", false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Removed || !res.Deleted || res.Archived != "" {
		t.Errorf("discard of an unwritten worktree: %+v, want the branch deleted (main holds its commit), nothing removed", res)
	}
	if _, err := os.Stat(spec("q", nil).Dir); !os.IsNotExist(err) {
		t.Errorf("the dropped worktree was written: %v", err)
	}
	if _, err := r.readRecord("q"); !os.IsNotExist(err) {
		t.Errorf("the record outlived the discard: %v", err)
	}

	// Released, with work on its branch: archived, and nothing checked out for it.
	if err := r.AddWorktree(t.Context(), spec("rel", nil)); err != nil {
		t.Fatal(err)
	}
	dir := spec("rel", nil).Dir
	os.WriteFile(filepath.Join(dir, "work.txt"), []byte("mine\n"), 0o644)
	commit, err := r.ReleaseWorktree(t.Context(), dir, "released")
	if err != nil || commit == "" {
		t.Fatalf("release: %q, %v", commit, err)
	}
	res, err = r.Discard(t.Context(), dir, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Removed || !res.Deleted || res.Archived != ArchivePrefix+"arbor/rel" {
		t.Errorf("discard of a released worktree: %+v, want its branch archived", res)
	}
	if got := git(t, root, "rev-parse", res.Archived); got != commit {
		t.Errorf("archived at %s, want the release's checkpoint %s", got, commit)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) || r.Released("rel") {
		t.Errorf("after the discard: dir %v, record released %v", err, r.Released("rel"))
	}
	if out := git(t, root, "worktree", "list"); strings.Contains(out, "rel") {
		t.Errorf("git lists the discarded worktree:\n%s", out)
	}
}
