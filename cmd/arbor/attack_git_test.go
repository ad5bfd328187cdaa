package main

// The daemon's git, attacked from a cell: the cell rewrites its worktree's .git file so that
// git would find a repository the cell wrote (whose config runs a program) or a sibling
// session's admin dir, and the turn's checkpoints then run git on the host. Nothing the cell
// configured may run there, the sibling's branch must not move, and the session's own
// checkpoints must still land on its own branch with the .git file put back.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arborhq/arbor/sandbox"
)

// gitAttackPrelude is shared by the attack cells: where things are, and a git dir whose
// fsmonitor hook and clean filter run hook.sh, which would create MARKER on the host.
const gitAttackPrelude = `
import json, os, subprocess
wt = os.getcwd()
name = os.path.basename(wt)
admins = os.path.join(REPO, '.git', 'worktrees')
own = os.path.join(admins, name)
r = {'gitfile_before': open('.git').read()}
def evil(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    subprocess.run(['git', 'init', '-q', '--bare', path], check=True, capture_output=True)
    hook = os.path.join(wt, 'hook.sh')
    with open(hook, 'w') as f:
        f.write('#!/bin/sh\ntouch %s\ncat\n' % MARKER)
    os.chmod(hook, 0o755)
    for k, v in [('core.bare', 'false'), ('core.fsmonitor', hook), ('filter.x.clean', hook), ('filter.x.smudge', hook)]:
        subprocess.run(['git', 'config', '-f', os.path.join(path, 'config'), k, v], check=True)
    with open('.gitattributes', 'w') as f:
        f.write('* filter=x\n')
def point(content):
    try:
        with open('.git', 'w') as f:
            f.write(content)
        r['gitfile_write'] = 'wrote'
    except OSError as e:
        r['gitfile_write'] = 'blocked: %s' % e
`

// The three cells: a second space after "gitdir:", a symlinked component before "..", and
// the sibling's admin dir. Each also leaves work of its own for the checkpoint.
const (
	gitAttackTwoSpaces = `
evil(os.path.join(wt, ' ' + own))
open('work1.txt', 'w').write('one\n')
point('gitdir:  ' + own + '\n')
print('GITATTACK ' + json.dumps(r))
`
	gitAttackSymlink = `
evil(os.path.join(wt, 'worktrees', name))
os.makedirs('p/q/r/t', exist_ok=True)
os.symlink('p/q/r/t', 'sym')
open('work2.txt', 'w').write('two\n')
point('gitdir: ' + wt + '/sym/../../../../worktrees/' + name + '\n')
print('GITATTACK ' + json.dumps(r))
`
	gitAttackSibling = `
sib = [d for d in os.listdir(admins) if d != name][0]
os.remove('README.md')
open('work3.txt', 'w').write('three\n')
point('gitdir: ' + os.path.join(admins, sib) + '\n')
print('GITATTACK ' + json.dumps(r))
`
)

// With the sandbox on, the .git file is bound read-only, so the cell's rewrites fail there
// already; with it off they land, and only the daemon's own git stands between them and the
// host, which is what the "sandbox-off" case holds to account.
func TestGitAttacksFromModelCode(t *testing.T) {
	probe := sandbox.Probe(t.Context())
	for _, tc := range []struct {
		name   string
		mode   string
		asUser bool
	}{
		{"root/sandbox-default", "", false},
		{"user/sandbox-default", "", true},
		{"root/sandbox-off", "off", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.mode == "" && !probe.Available {
				t.Skipf("bubblewrap cannot sandbox here: %s", probe.Reason)
			}
			var as *osUser
			if tc.asUser {
				u := throwawayUser(t) // skips unless root: the tests then run unprivileged already
				as = &u
			}
			w := newGitAttackWorld(t, as, tc.mode)
			defer w.stop()
			reports := w.run(t)
			for i, rep := range reports {
				if tc.mode == "off" && rep["gitfile_write"] != "wrote" {
					t.Errorf("cell %d could not rewrite .git without the sandbox (%s): the daemon's git was not tested", i+1, rep["gitfile_write"])
				}
			}
		})
	}
}

type gitAttackWorld struct {
	*attackWorld
	marker string
}

func newGitAttackWorld(t *testing.T, as *osUser, sandboxMode string) *gitAttackWorld {
	t.Helper()
	w := &gitAttackWorld{attackWorld: newAttackWorld(t, as, sandboxMode, "sk-unused", 0)}
	w.marker = filepath.Join(w.root, "host-marker")
	prelude := fmt.Sprintf("REPO, MARKER = %q, %q\n", w.repo, w.marker) + gitAttackPrelude
	script, _ := json.Marshal(map[string]any{
		"rules": []map[string]any{
			{"when": map[string]any{"task": "^steer", "turn": 1}, "code": prelude + gitAttackTwoSpaces},
			{"when": map[string]any{"task": "^steer", "turn": 2}, "code": prelude + gitAttackSymlink},
			{"when": map[string]any{"task": "^steer", "turn": 3}, "code": prelude + gitAttackSibling},
			{"when": map[string]any{"task": "^steer", "turn": 4}, "text": "done"},
		},
		"default": map[string]any{"text": "ok"},
	})
	path := filepath.Join(w.root, "git-attack.json")
	writeFile(t, path, string(script))
	if as != nil {
		os.Lchown(path, as.uid, as.gid)
	}
	fm, url, err := startFakeModel(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fm.Process.Kill(); fm.Wait() })
	w.vars["ARBOR_MODEL_BASE_URL"] = url
	return w
}

// repoGit is git on the repository as the test's user, which may not own it.
func (w *gitAttackWorld) repoGit(args ...string) string {
	return w.git(w.repo, append([]string{"-c", "safe.directory=*"}, args...)...)
}

// run runs the attacking session, checks what it left, and returns the cells' reports.
func (w *gitAttackWorld) run(t *testing.T) []map[string]string {
	if r := w.arbor("run", "neighbour session"); r.code != 0 {
		t.Fatalf("neighbour session:\n%s", r)
	}
	sib := w.ls()[0]
	sibTip := strings.TrimSpace(w.repoGit("rev-parse", sib.Branch))
	r := w.arbor("run", "steer the daemon's git")
	if r.code != 0 {
		t.Fatalf("attack session:\n%s", r)
	}
	id := sessionID(t, r)
	me := w.session(id)
	own := filepath.Join(w.repo, ".git", "worktrees", id)
	restored := "gitdir: " + own + "\n"

	var reports []map[string]string
	for _, ev := range parseEvents(t, w.arbor("log", "--json", id)) {
		var d struct{ Output, Error string }
		json.Unmarshal(ev.Data, &d)
		if ev.Type == "turn_failed" {
			t.Logf("turn_failed: %s", d.Error)
		}
		if _, js, ok := strings.Cut(d.Output, "GITATTACK "); ok && ev.Type == "tool_finished" {
			js, _, _ = strings.Cut(js, "\n")
			rep := map[string]string{}
			if err := json.Unmarshal([]byte(js), &rep); err != nil {
				t.Fatalf("attack report %q: %v", js, err)
			}
			reports = append(reports, rep)
		}
	}
	if len(reports) != 3 {
		t.Fatalf("want 3 attack reports, got %d: %v\n%s", len(reports), reports, r)
	}
	t.Logf("attack reports: %v", reports)

	if _, err := os.Stat(w.marker); err == nil {
		t.Errorf("a program the cell's git config named ran on the host (%s exists)", w.marker)
	}
	if tip := strings.TrimSpace(w.repoGit("rev-parse", sib.Branch)); tip != sibTip {
		t.Errorf("the sibling's branch %s moved from %s to %s:\n%s", sib.Branch, sibTip, tip, w.repoGit("show", "--stat", tip))
	}
	// Each cell's checkpoint put the .git file back before the next cell ran, and the last
	// one left it so.
	for i, rep := range reports[1:] {
		if rep["gitfile_before"] != restored {
			t.Errorf("cell %d found .git = %q, want it restored to %q", i+2, rep["gitfile_before"], restored)
		}
	}
	if b, err := os.ReadFile(filepath.Join(me.Worktree, ".git")); err != nil || string(b) != restored {
		t.Errorf("the worktree's .git after the turn = %q (%v), want %q", b, err, restored)
	}
	// The session's own work is on its own branch: every cell's file, README.md deleted.
	files := w.repoGit("ls-tree", "-r", "--name-only", me.Branch)
	for _, f := range []string{"work1.txt", "work2.txt", "work3.txt"} {
		if !strings.Contains(files, f+"\n") {
			t.Errorf("%s is not on the session's branch %s:\n%s", f, me.Branch, files)
		}
	}
	if strings.Contains(files, "README.md\n") {
		t.Errorf("the session's deletion of README.md is not on its branch %s", me.Branch)
	}
	return reports
}
