package agents

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/gitstate"
)

func TestDiscardKeepsUnmergedWork(t *testing.T) {
	t.Parallel()
	e := newEnv(t, acceptScript)
	ctx := t.Context()
	unmerged := e.create("files task")
	merged := e.create("merged task")
	e.settled(unmerged)
	e.settled(merged)
	if _, err := e.svc.Accept(ctx, merged.meta.ID, nil, nil, true); err != nil {
		t.Fatal(err)
	}
	// Work the agent (or the user) left uncommitted in the worktree is kept too.
	os.WriteFile(filepath.Join(unmerged.meta.Worktree, "extra.txt"), []byte("by hand\n"), 0o644)

	res, err := e.svc.Discard(ctx, unmerged.meta.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	archive := gitstate.ArchivePrefix + unmerged.meta.Branch
	if !res.Removed || !res.Deleted || res.Archived != archive {
		t.Errorf("discard result %+v, want removed, deleted and archived at %s", res, archive)
	}
	for file, want := range map[string]string{"x.txt": "x\n", "y.txt": "y\n", "extra.txt": "by hand\n"} {
		if got := git(t, e.repo, "show", archive+":"+file); got != want {
			t.Errorf("%s in the archive = %q, want %q", file, got, want)
		}
	}
	if out := git(t, e.repo, "branch", "--list", unmerged.meta.Branch); out != "" {
		t.Errorf("the branch is still there: %s", out)
	}
	if strings.Contains(git(t, e.repo, "worktree", "list"), unmerged.meta.Worktree) {
		t.Errorf("git still lists the worktree")
	}
	if _, err := os.Stat(unmerged.meta.Worktree); !os.IsNotExist(err) {
		t.Errorf("the worktree dir is still there: %v", err)
	}
	if st := unmerged.State(); st != Stopped {
		t.Errorf("state %v, want stopped", st)
	}
	if d, ok := unmerged.Discarded(); !ok || d.Archived != archive {
		t.Errorf("Discarded() = %v %v", d, ok)
	}
	if in := e.svc.Info(unmerged); !in.Discarded || in.Archived != archive {
		t.Errorf("Info discarded %v archived %q, want the archive %s", in.Discarded, in.Archived, archive)
	}
	if _, err := e.svc.Discard(ctx, unmerged.meta.ID, false); !errors.Is(err, ErrInvalidState) {
		t.Errorf("second discard: %v", err)
	}
	if _, err := e.svc.Send(ctx, unmerged.meta.ID, "more", ""); !errors.Is(err, ErrInvalidState) {
		t.Errorf("send to a discarded session: %v", err)
	}
	// Its history can still be forked: the commits live on in the archive.
	f, err := e.svc.Fork(ctx, unmerged.meta.ID, 0, "revive")
	if err != nil {
		t.Fatal(err)
	}
	if got := git(t, e.repo, "show", f.meta.Branch+":extra.txt"); got != "by hand\n" {
		t.Errorf("fork of the discarded session lacks extra.txt: %q", got)
	}
	if in := e.svc.Info(f); in.Discarded {
		t.Error("the fork of a discarded session is shown discarded")
	}

	// A branch whose work is on main goes without an archive.
	res, err = e.svc.Discard(ctx, merged.meta.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Deleted || res.Archived != "" {
		t.Errorf("discard of merged work: %+v", res)
	}
	if out := git(t, e.repo, "for-each-ref", gitstate.ArchivePrefix+merged.meta.Branch); out != "" {
		t.Errorf("merged work was archived: %s", out)
	}
	if out := git(t, e.repo, "fsck", "--no-progress"); strings.Contains(out, "error") {
		t.Errorf("git fsck:\n%s", out)
	}
	// Discards survive a restart.
	svc2 := e.restart()
	s2, err := svc2.Get(unmerged.meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s2.Discarded(); !ok || s2.State() != Stopped {
		t.Errorf("after restart: discarded %v, state %v", ok, s2.State())
	}
	if in := svc2.Info(s2); !in.Discarded || in.Archived != archive {
		t.Errorf("after restart: Info discarded %v archived %q", in.Discarded, in.Archived)
	}
}

func TestDiscardForceDropsWork(t *testing.T) {
	t.Parallel()
	e := newEnv(t, acceptScript)
	s := e.create("files task")
	e.settled(s)
	os.WriteFile(filepath.Join(s.meta.Worktree, "extra.txt"), []byte("dropped\n"), 0o644)
	res, err := e.svc.Discard(context.Background(), s.meta.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Removed || !res.Deleted || res.Archived != "" {
		t.Errorf("forced discard %+v", res)
	}
	if out := git(t, e.repo, "for-each-ref", gitstate.ArchivePrefix); out != "" {
		t.Errorf("forced discard archived: %s", out)
	}
}

const busyScript = `{"rules":[
 {"when":{"task":"^busy","turn":1},"code":"open('wip.txt','w').write('half done\\n')\nimport time\nprint('started', flush=True)\ntime.sleep(120)"}
],"default":{"text":"done"}}`

// TestDiscardRunningSession discards a session in the middle of a cell: the turn ends, the
// work it wrote is archived, and nothing is recorded after the discard.
func TestDiscardRunningSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, busyScript)
	s := e.create("busy task")
	e.waitFor("the cell to start", func() bool {
		return len(e.events(s, event.TypeToolStarted)) > 0 && fileExists(filepath.Join(s.meta.Worktree, "wip.txt"))
	})
	res, err := e.svc.Discard(t.Context(), s.meta.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := git(t, e.repo, "show", res.Archived+":wip.txt"); got != "half done\n" {
		t.Errorf("wip.txt in the archive = %q", got)
	}
	e.settled(s)
	recs, _ := s.Events(0)
	if last := recs[len(recs)-1]; last.Type != string(event.TypeDiscarded) {
		t.Errorf("recorded after the discard: %s %s", last.Type, last.Data)
	}
	for _, f := range e.events(s, event.TypeTurnFailed) {
		t.Errorf("turn failed: %v", f)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
