package gitstate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A known session's worktree whose .git link was broken (an agent that ran `rm .git; git init`)
// is recreated from its branch, and the old files — work no checkpoint took — are moved aside,
// never deleted.
func TestReconcileKeepsABrokenWorktreesFiles(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)
	wt := addSession(t, r, "broken")
	writeFiles(t, wt, map[string]string{"work.go": "package main // not checkpointed\n"})
	os.Remove(filepath.Join(wt, ".git"))
	git(t, wt, "init", "-q")

	rep, err := r.Reconcile(t.Context(), map[string]string{"broken": wt})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Recreated) != 1 || len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0], ".broken-") {
		t.Fatalf("reconcile report %+v: want the worktree recreated and where its old files went", rep)
	}
	aside := rep.Problems[0][strings.LastIndex(rep.Problems[0], " ")+1:]
	if b, err := os.ReadFile(filepath.Join(aside, "work.go")); err != nil || !strings.Contains(string(b), "not checkpointed") {
		t.Fatalf("the uncheckpointed file is not at %s: %v", aside, err)
	}
	if out := git(t, wt, "status", "--porcelain"); out != "" {
		t.Errorf("the recreated worktree is not clean: %q", out)
	}
	assertFsck(t, root)
}

// A repository made inside a session's worktree (git init or clone) is never checkpointed, so
// a discard without force refuses and names it.
func TestDiscardRefusesANestedRepository(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)
	wt := addSession(t, r, "nested")
	lib := filepath.Join(wt, "vendor", "lib")
	os.MkdirAll(lib, 0o755)
	git(t, lib, "init", "-q")
	writeFiles(t, lib, map[string]string{"lib.go": "package lib\n"})
	git(t, lib, "add", ".")
	git(t, lib, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "lib")

	_, err := r.Discard(t.Context(), wt, "", false)
	var dirty *DirtyError
	if !errors.As(err, &dirty) || !strings.Contains(err.Error(), "vendor/lib/") {
		t.Fatalf("discard with a nested repository: %v; want a refusal naming vendor/lib/", err)
	}
	if _, err := os.Stat(filepath.Join(lib, "lib.go")); err != nil {
		t.Fatalf("the nested repository is gone: %v", err)
	}
	if _, err := r.Discard(t.Context(), wt, "", true); err != nil {
		t.Fatalf("forced discard: %v", err)
	}
}

// Accept refuses to overwrite the user's ignored files: a session that commits debug.log (force-
// added past .gitignore) or build/out.txt meets the user's own, ignored, copies.
func TestAcceptRefusesToOverwriteIgnoredFiles(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)
	wt := addSession(t, r, "ign")
	writeFiles(t, wt, map[string]string{"debug.log": "agent log\n", "build/out.txt": "agent build\n"})
	git(t, wt, "add", "-f", "debug.log", "build/out.txt")
	git(t, wt, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "logs")
	writeFiles(t, root, map[string]string{"debug.log": "USER PRECIOUS\n", "build/out.txt": "user build\n"})

	_, err := r.Accept(t.Context(), AcceptOptions{Head: "arbor/ign", Message: "logs"})
	var dirty *DirtyError
	if !errors.As(err, &dirty) || len(dirty.Files) != 2 {
		t.Fatalf("accept over ignored files: %v; want a refusal naming debug.log and build/out.txt", err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "debug.log")); string(b) != "USER PRECIOUS\n" {
		t.Fatalf("the user's ignored file was overwritten: %q", b)
	}
}

// A fork's branch holds its source's tip, but it is a session branch too, discarded the same
// way: discarding the source archives its work instead of trusting the fork to keep it.
func TestDiscardArchivesWorkOnlySessionBranchesHold(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)
	wt := addSession(t, r, "src")
	writeFiles(t, wt, map[string]string{"work.txt": "precious\n"})
	c, _, err := r.Checkpoint(t.Context(), wt, "work", nil)
	if err != nil {
		t.Fatal(err)
	}
	git(t, root, "branch", "arbor/fork-of-src", c)
	res, err := r.Discard(t.Context(), wt, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Archived == "" {
		t.Fatalf("discard = %+v: the work only a session branch holds was not archived", res)
	}
	git(t, root, "branch", "-D", "arbor/fork-of-src")
	if got := git(t, root, "rev-parse", res.Archived); got != c {
		t.Errorf("archive at %s, want %s", got, c)
	}
}

// A turn that only edits .gitignore, un-ignoring files that were already there, checkpoints
// those files: the .gitignore's directory is in scope, not just the file itself.
func TestCheckpointAfterUnignoring(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)
	wt := addSession(t, r, "unignore")
	writeFiles(t, wt, map[string]string{"keep.log": "now wanted\n", "dir/sub/.gitignore": "*.txt\n"})
	if _, _, err := r.Checkpoint(t.Context(), wt, "first", nil); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, wt, map[string]string{".gitignore": "build/\n"})
	if _, changed, err := r.Checkpoint(t.Context(), wt, "unignore", []string{".gitignore"}); err != nil || !changed {
		t.Fatalf("checkpoint: changed %v, %v", changed, err)
	}
	if out := git(t, wt, "ls-tree", "--name-only", "HEAD", "keep.log"); out != "keep.log" {
		t.Errorf("keep.log not checkpointed after .gitignore stopped ignoring it: %q", out)
	}
	if out := git(t, wt, "status", "--porcelain"); out != "" {
		t.Errorf("worktree not clean after the checkpoint: %q", out)
	}
}
