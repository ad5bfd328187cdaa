package agents

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/gitstate"
)

// mergeScript: the parent spawns two children that write the same file differently, then on
// "merge now" merges both from a cell; the second conflicts.
const mergeScript = `{"rules":[
 {"when":{"task":"^merge parent","turn":1},"code":"a = await rlm('child alpha', name='alpha')\nb = await rlm('child beta', name='beta')\ng = await rlm('child gamma', name='gamma')\nprint('spawned')"},
 {"when":{"task":"^merge parent","last":"^merge now"},"code":"open('parent.txt','w').write('parent wip\\n')\nr = await rlm.merge(a)\nprint('merged', sorted(r['files']), 'into', r['branch'])\ntry:\n    await rlm.merge(b)\nexcept ArborError as e:\n    print('refused:', e)"},
 {"when":{"task":"^child alpha","turn":1},"code":"open('shared.txt','w').write('alpha\\n')\nopen('alpha.txt','w').write('a\\n')\nprint(await agent_message.send('alpha done', receiver_role='parent'))"},
 {"when":{"task":"^child gamma","turn":1},"code":"open('gamma.txt','w').write('g\\n')"},
 {"when":{"task":"^child beta","turn":1},"code":"open('shared.txt','w').write('beta\\n')\nprint(await agent_message.send('beta done', receiver_role='parent'))"}
],"default":{"text":"ok"}}`

func TestChildMergeIntoParent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, mergeScript)
	ctx := t.Context()
	parent := e.create("merge parent task")
	e.settled(parent)
	alpha, err := parent.ownChild("alpha")
	if err != nil {
		t.Fatal(err)
	}
	beta, err := parent.ownChild("beta")
	if err != nil {
		t.Fatal(err)
	}
	e.send(parent, "merge now")

	outs := e.events(parent, event.TypeToolFinished)
	last := fmt.Sprint(outs[len(outs)-1]["output"])
	if !strings.Contains(last, "merged ['alpha.txt', 'shared.txt'] into "+parent.meta.Branch) {
		t.Errorf("merging alpha from the cell: %s", last)
	}
	if !strings.Contains(last, "refused:") || !strings.Contains(last, "conflicts") || !strings.Contains(last, "shared.txt") {
		t.Errorf("merging beta did not raise an ArborError naming shared.txt: %s", last)
	}
	// The parent's branch holds its own work-in-progress (checkpointed first) and alpha's
	// merge; beta's conflict left its worktree as it was.
	tip := parent.meta.Branch
	if got := git(t, e.repo, "show", tip+":shared.txt"); got != "alpha\n" {
		t.Errorf("shared.txt on the parent = %q", got)
	}
	if got := git(t, e.repo, "show", tip+":parent.txt"); got != "parent wip\n" {
		t.Errorf("parent.txt on the parent = %q", got)
	}
	log := git(t, e.repo, "log", "--format=%P %s", tip)
	if !strings.Contains(log, "merge subagent alpha") {
		t.Errorf("no merge commit for alpha:\n%s", log)
	}
	merge := strings.Fields(git(t, e.repo, "log", "-1", "--format=%P", "--grep=merge subagent alpha", tip))
	if len(merge) != 2 || merge[1] != revParse(t, e.repo, alpha.meta.Branch) {
		t.Errorf("alpha's merge commit has parents %v", merge)
	}
	if st := git(t, parent.meta.Worktree, "status", "--porcelain"); st != "" {
		t.Errorf("the parent's worktree is not clean:\n%s", st)
	}
	if got, _ := os.ReadFile(filepath.Join(parent.meta.Worktree, "shared.txt")); string(got) != "alpha\n" {
		t.Errorf("the parent's shared.txt = %q", got)
	}
	if ev := e.events(parent, event.TypeMerged); len(ev) != 1 || ev[0]["child"] != alpha.meta.ID {
		t.Errorf("merged events %v", ev)
	}
	parent.mu.Lock()
	head := parent.head
	parent.mu.Unlock()
	if head != revParse(t, e.repo, tip) {
		t.Errorf("the parent's head %s is not its branch tip", head)
	}

	// The same from the API: a conflict names the file; a root session has no parent.
	_, err = e.svc.Merge(ctx, beta.meta.ID)
	var ce *gitstate.ConflictError
	if !errors.As(err, &ce) || strings.Join(ce.Files, ",") != "shared.txt" {
		t.Errorf("Merge(beta) = %v", err)
	}
	gamma, err := parent.ownChild("gamma")
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.svc.Merge(ctx, gamma.meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := git(t, e.repo, "show", tip+":gamma.txt"); got != "g\n" || revParse(t, e.repo, tip) != res.Commit {
		t.Errorf("gamma.txt on the parent = %q after merge %s", got, res.Commit)
	}
	if cps := e.events(parent, event.TypeCheckpoint); len(cps) == 0 || cps[len(cps)-1]["merged"] != gamma.meta.ID {
		t.Errorf("the merge was not recorded as the parent's checkpoint: %v", cps)
	}
	if _, err := e.svc.Merge(ctx, parent.meta.ID); !errors.Is(err, ErrInvalidState) {
		t.Errorf("Merge(root) = %v", err)
	}
	if out := git(t, e.repo, "fsck", "--no-progress"); strings.Contains(out, "error") {
		t.Errorf("git fsck:\n%s", out)
	}
}
