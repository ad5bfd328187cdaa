package agents

import (
	"context"
	"strings"
	"testing"

	"github.com/arborhq/arbor/agents/event"
)

const watchedTurnsScript = `{"rules":[
 {"when":{"task":"^files","turn":1},"code":"open('a.txt','w').write('a\\n')\nprint('wrote a')"},
 {"when":{"task":"^files","last":"^second"},"code":"import os\nos.makedirs('b/c', exist_ok=True)\nopen('b/c/d.txt','w').write('d\\n')\nos.remove('a.txt')\nos.chmod('main.py', 0o755)\nprint('second done')"},
 {"when":{"task":"^files"},"text":"ok"}
],"default":{"text":"ok"}}`

// TestCheckpointsFromWatchedChanges: the first checkpoint scans the worktree, later ones commit
// what the watcher saw change — additions in new directories, deletions, mode changes.
func TestCheckpointsFromWatchedChanges(t *testing.T) {
	t.Parallel()
	e := newEnv(t, watchedTurnsScript)
	s := e.create("files across turns")
	e.settled(s)
	if _, err := e.svc.Send(context.Background(), s.meta.ID, "second turn please", "auto"); err != nil {
		t.Fatal(err)
	}
	e.waitFor("second checkpoint", func() bool { return len(e.events(s, event.TypeCheckpoint)) == 2 })
	e.settled(s)
	tree := git(t, e.repo, "ls-tree", "-r", s.meta.Branch)
	if strings.Contains(tree, "a.txt") || !strings.Contains(tree, "b/c/d.txt") || !strings.Contains(tree, "100755 blob") {
		t.Errorf("branch tree after the watched turn:\n%s", tree)
	}
	if out := git(t, s.meta.Worktree, "status", "--porcelain"); out != "" {
		t.Errorf("worktree not clean after the checkpoint:\n%s", out)
	}
	if out := git(t, e.repo, "fsck"); strings.Contains(out, "error") {
		t.Errorf("git fsck: %s", out)
	}
}
