package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/gitstate"
)

// twoTurnScript writes a.txt in the first turn and, on "second", b.txt in the next.
const twoTurnScript = `{"rules":[
 {"when":{"turn":1},"code":"open('a.txt','w').write('one\\n')"},
 {"when":{"turn":2},"text":"wrote a"},
 {"when":{"last":"^second"},"code":"open('b.txt','w').write('two\\n')"},
 {"when":{"last":"^third"},"code":"open('c.txt','w').write('three\\n')"},
 {"when":{"last":"^nothing"},"text":"nothing to do"}
],"default":{"text":"done"}}`

type seqCheckpoint struct {
	seq    uint64
	commit string
}

func checkpoints(t *testing.T, s *Session) []seqCheckpoint {
	t.Helper()
	recs, err := s.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	var out []seqCheckpoint
	for _, r := range recs {
		if r.Type == string(event.TypeCheckpoint) {
			var c event.Checkpoint
			json.Unmarshal(r.Data, &c)
			out = append(out, seqCheckpoint{r.Seq, c.Commit})
		}
	}
	return out
}

func (e *testEnv) send(s *Session, text string) {
	e.t.Helper()
	if _, err := e.svc.Send(context.Background(), s.meta.ID, text, ""); err != nil {
		e.t.Fatal(err)
	}
	e.settled(s)
}

func revParse(t *testing.T, dir, rev string) string {
	return strings.TrimSpace(git(t, dir, "rev-parse", rev))
}

func TestForkAtTwoPoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t, twoTurnScript)
	ctx := t.Context()
	parent := e.create("write files")
	e.settled(parent)
	e.send(parent, "second")
	cps := checkpoints(t, parent)
	if len(cps) != 2 {
		t.Fatalf("parent made %d checkpoints, want 2", len(cps))
	}
	before, _ := parent.Events(0)
	parentTip := revParse(t, e.repo, parent.meta.Branch)

	// Fork at the end of each turn: its final answer, after the cell's checkpoint.
	answerAfter := func(seq uint64) uint64 {
		for _, r := range before {
			if r.Seq > seq && r.Type == string(event.TypeAssistantMessage) {
				return r.Seq
			}
		}
		t.Fatalf("no answer after seq %d", seq)
		return 0
	}
	var forks []*Session
	for i, cp := range cps {
		at := answerAfter(cp.seq)
		f, err := e.svc.Fork(ctx, parent.meta.ID, at, fmt.Sprintf("try-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		forks = append(forks, f)
		if got := revParse(t, e.repo, f.meta.Branch); got != cp.commit {
			t.Errorf("fork at seq %d: branch at %s, want checkpoint %s", at, got, cp.commit)
		}
		if f.meta.Parent != "" || f.meta.ForkOf != parent.meta.ID || f.meta.ForkSeq != at {
			t.Errorf("fork meta: parent %q forkOf %q forkSeq %d", f.meta.Parent, f.meta.ForkOf, f.meta.ForkSeq)
		}
		if st := f.State(); st != Idle {
			t.Errorf("fork state %v, want idle", st)
		}
		if err := f.AwaitWorktree(ctx); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(git(t, e.repo, "worktree", "list"), f.meta.Worktree) {
			t.Errorf("git worktree list lacks %s", f.meta.Worktree)
		}
	}
	// The first fork's files are those of the first checkpoint: a.txt without b.txt.
	if _, err := os.Stat(filepath.Join(forks[0].meta.Worktree, "b.txt")); !os.IsNotExist(err) {
		t.Errorf("fork at the first checkpoint has b.txt: %v", err)
	}
	latest, err := e.svc.Fork(ctx, parent.meta.ID, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := revParse(t, e.repo, latest.meta.Branch); got != cps[1].commit {
		t.Errorf("fork at 0 starts at %s, want the latest checkpoint %s", got, cps[1].commit)
	}

	// Forked inside a cell, the fork learns why the cell has no result.
	var inCell uint64
	for _, r := range before {
		if r.Type == string(event.TypeToolStarted) {
			inCell = r.Seq
			break
		}
	}
	mid, err := e.svc.Fork(ctx, parent.meta.ID, inCell, "")
	if err != nil {
		t.Fatal(err)
	}
	if conv := mid.conversation(); len(conv) < 2 || !strings.Contains(conv[len(conv)-2].Content, "forked while this cell ran") {
		t.Errorf("fork inside a cell: conversation %v", conv)
	}
	if got := revParse(t, e.repo, mid.meta.Branch); got != parent.meta.BaseCommit {
		t.Errorf("fork before any checkpoint starts at %s, want the base %s", got, parent.meta.BaseCommit)
	}

	// The conversation came along, the kernel did not; a message starts the fork.
	if n := len(forks[0].conversation()); n < 3 {
		t.Errorf("fork conversation has %d messages", n)
	}
	e.send(forks[0], "third")
	fcps := checkpoints(t, forks[0])
	if len(fcps) != 1 || revParse(t, e.repo, forks[0].meta.Branch) != fcps[0].commit {
		t.Fatalf("fork checkpoints %v", fcps)
	}
	if got := git(t, e.repo, "show", forks[0].meta.Branch+":c.txt"); got != "three\n" {
		t.Errorf("c.txt on the fork = %q", got)
	}
	if git(t, e.repo, "rev-list", "--count", cps[0].commit+".."+forks[0].meta.Branch) != "1\n" {
		t.Errorf("the fork's new commit does not sit on the checkpoint it forked at")
	}
	// Its turns continue the source's numbering: the turn after turn 1 is turn 2.
	d, err := e.svc.DiffTurn(ctx, forks[0].meta.ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	if paths(d) != "c.txt" {
		t.Errorf("fork turn 2 changed %s, want c.txt", paths(d))
	}
	if d, err := e.svc.DiffTurn(ctx, forks[0].meta.ID, 1); err != nil || paths(d) != "a.txt" {
		t.Errorf("fork's inherited turn 1: %v %v", paths(d), err)
	}

	after, _ := parent.Events(0)
	if !reflect.DeepEqual(before, after) {
		t.Errorf("the parent's log changed: %d records before, %d after", len(before), len(after))
	}
	if got := revParse(t, e.repo, parent.meta.Branch); got != parentTip {
		t.Errorf("the parent's branch moved from %s to %s", parentTip, got)
	}
	if out := git(t, e.repo, "fsck", "--no-progress"); strings.Contains(out, "error") || strings.Contains(out, "missing") {
		t.Errorf("git fsck:\n%s", out)
	}

	// A restarted daemon rebuilds the fork's conversation from the source's log.
	want := forks[1].conversation()
	svc2 := e.restart()
	f2, err := svc2.Get(forks[1].meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := f2.conversation(); !reflect.DeepEqual(got, want) {
		t.Errorf("recovered fork conversation:\n%v\nwant\n%v", got, want)
	}
	f2.mu.Lock()
	head, turn := f2.head, f2.turn
	f2.mu.Unlock()
	if head != cps[1].commit || turn != 2 {
		t.Errorf("recovered fork head %s turn %d, want %s and 2", head, turn, cps[1].commit)
	}
}

// restart closes the service and recovers a new one over the same state.
func (e *testEnv) restart() *Service {
	e.t.Helper()
	if err := e.svc.Close(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	svc, err := New(e.svc.opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { svc.Close(context.Background()) })
	if err := svc.Recover(e.t.Context()); err != nil {
		e.t.Fatal(err)
	}
	return svc
}

func paths(d *gitstate.Diff) string {
	if d == nil {
		return "<nil>"
	}
	var ps []string
	for _, f := range d.Files {
		ps = append(ps, f.Path)
	}
	return strings.Join(ps, ",")
}

func TestDiffIgnoresBaseMovingAheadAndPerTurn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, twoTurnScript)
	ctx := t.Context()
	s := e.create("write files")
	e.settled(s)
	// The user commits on main after the session started.
	os.WriteFile(filepath.Join(e.repo, "user.txt"), []byte("mine\n"), 0o644)
	git(t, e.repo, "add", "user.txt")
	git(t, e.repo, "-c", "user.name=u", "-c", "user.email=u@u", "commit", "-qm", "user work")
	e.send(s, "second")
	e.send(s, "nothing")

	d, err := e.svc.Diff(ctx, s.meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	if paths(d) != "a.txt,b.txt" {
		t.Errorf("session diff shows %s, want a.txt,b.txt (not the user's new commit)", paths(d))
	}
	for turn, want := range map[int]string{1: "a.txt", 2: "b.txt"} {
		d, err := e.svc.DiffTurn(ctx, s.meta.ID, turn)
		if err != nil {
			t.Fatalf("turn %d: %v", turn, err)
		}
		if paths(d) != want || d.Files[0].Status != gitstate.Added {
			t.Errorf("turn %d diff = %s %v, want %s added", turn, paths(d), d.Files, want)
		}
	}
	if _, err := e.svc.DiffTurn(ctx, s.meta.ID, 3); !errors.Is(err, errNoCheckpoint) {
		t.Errorf("turn 3 changed nothing: err = %v", err)
	}
	if _, err := e.svc.DiffTurn(ctx, s.meta.ID, 9); err == nil || !strings.Contains(err.Error(), "3 turn(s)") {
		t.Errorf("turn 9: err = %v", err)
	}
}

// TestConcurrentForks forks one session many times at once: every fork gets its own branch at
// the checkpoint and its own worktree, with no race on the session or the repository.
func TestConcurrentForks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, twoTurnScript)
	parent := e.create("write files")
	e.settled(parent)
	cps := checkpoints(t, parent)
	const n = 12
	forks := make([]*Session, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			forks[i], errs[i] = e.svc.Fork(t.Context(), parent.meta.ID[:8], 0, fmt.Sprintf("f%d", i))
		}()
	}
	wg.Wait()
	for i, f := range forks {
		if errs[i] != nil {
			t.Fatalf("fork %d: %v", i, errs[i])
		}
		if err := f.AwaitWorktree(t.Context()); err != nil { // written in the background
			t.Fatalf("fork %d's worktree: %v", i, err)
		}
	}
	list := git(t, e.repo, "worktree", "list")
	for i, f := range forks {
		if got := revParse(t, e.repo, f.meta.Branch); got != cps[0].commit {
			t.Errorf("fork %d at %s, want %s", i, got, cps[0].commit)
		}
		if !strings.Contains(list, f.meta.Worktree) {
			t.Errorf("fork %d's worktree is not listed", i)
		}
	}
	if out := git(t, e.repo, "fsck", "--no-progress"); strings.Contains(out, "error") {
		t.Errorf("git fsck:\n%s", out)
	}
}

// A fork at a seq inside a turn, after a cell that changed files, starts from those files:
// the conversation it inherits says the cell ran, and its worktree agrees.
func TestForkMidTurnMatchesConversation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[
 {"when":{"turn":1},"code":"open('a.txt','w').write('one\\n')"},
 {"when":{"turn":2},"code":"open('b.txt','w').write('two\\n')"},
 {"when":{"turn":3},"text":"wrote a and b"}
],"default":{"text":"done"}}`)
	parent := e.create("two cells in one turn")
	e.settled(parent)
	recs, _ := parent.Events(0)
	var firstCell uint64
	for _, r := range recs {
		if r.Type == string(event.TypeToolFinished) {
			firstCell = r.Seq
			break
		}
	}
	if firstCell == 0 {
		t.Fatal("no tool_finished")
	}
	f, err := e.svc.Fork(t.Context(), parent.meta.ID, firstCell, "mid")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.AwaitWorktree(t.Context()); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(f.meta.Worktree, "a.txt")); err != nil || string(b) != "one\n" {
		t.Errorf("fork after the first cell: a.txt = %q, %v; want the file that cell wrote", b, err)
	}
	if _, err := os.Stat(filepath.Join(f.meta.Worktree, "b.txt")); !os.IsNotExist(err) {
		t.Errorf("fork after the first cell has b.txt, written by a later cell: %v", err)
	}
	// The turn's diff still covers the whole turn.
	d, err := e.svc.DiffTurn(t.Context(), parent.meta.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Files) != 2 {
		t.Errorf("turn 1 diff has %d files, want a.txt and b.txt", len(d.Files))
	}
}

// A fork returns once registered, as a new session does: its files follow in the background
// (Info.WorktreeWriting meanwhile, then announced done), a message sent at once runs, and its
// first cell waits for the files and reads them all.
func TestForkReturnsBeforeItsFiles(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[
 {"when":{"turn":1},"text":"ready"},
 {"when":{"turn":2},"code":"import os\nprint('files', sum(len(f) for _, _, f in os.walk('big')))"}
],"default":{"text":"done"}}`)
	const files = 3000
	for i := range files {
		p := filepath.Join(e.repo, "big", fmt.Sprintf("d%02d", i%30), fmt.Sprintf("f%04d.txt", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(strings.Repeat(fmt.Sprintln("line of file", i), 20)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, e.repo, "add", "big")
	git(t, e.repo, "commit", "-qm", "a bigger tree")
	src := e.create("a tree to fork")
	e.settled(src)
	const n = 8 // more than the background writes that run at once
	forks := make([]*Session, n)
	writing := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			f, err := e.svc.Fork(t.Context(), src.meta.ID, 0, fmt.Sprintf("f%d", i))
			if err != nil {
				t.Error(err)
				return
			}
			forks[i], writing[i] = f, e.svc.Info(f).WorktreeWriting
			if st := f.State(); st != Idle {
				t.Errorf("fork %d is %v on return, want idle", i, st)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if !slices.Contains(writing, true) {
		t.Errorf("every fork's files were in when it returned (%v): forks wait for their trees", writing)
	}
	e.send(forks[n-1], "count the files")
	e.settled(forks[n-1])
	if outs := e.events(forks[n-1], event.TypeToolFinished); len(outs) != 1 || !strings.Contains(fmt.Sprint(outs[0]["output"]), fmt.Sprint("files ", files)) {
		t.Errorf("the fork's first cell: %v", outs)
	}
	for i, f := range forks {
		if err := f.AwaitWorktree(t.Context()); err != nil {
			t.Fatalf("fork %d: %v", i, err)
		}
		e.waitFor("the fork's worktree announced written", func() bool { return !e.svc.Info(f).WorktreeWriting })
		if st := git(t, f.meta.Worktree, "status", "--porcelain"); st != "" {
			t.Errorf("fork %d's worktree is not clean:\n%s", i, st)
		}
	}
}
