package gitstate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The tests below are what a hostile cell does to its worktree, which the sandbox lets it
// write: it rewrites the worktree's .git file so that git resolves it somewhere gitstate's
// reading of the file does not, and the daemon's next host-side git command in the worktree
// then runs with a repository the cell wrote. Each asserts that nothing the cell configured
// runs on the host, that the checkpoint lands on the session's own branch, and that the
// .git file is back to what gitstate wrote.

// evilGitDir makes a git directory at dir whose config runs a script that creates marker
// from its fsmonitor hook and from a clean filter every file in the worktree takes, and
// gives the worktree the .gitattributes that asks for the filter (the attribute also sends
// the checkpoint through the git CLI, where the filter would run).
func evilGitDir(t *testing.T, wt, dir, marker string) {
	t.Helper()
	scratch := t.TempDir()
	git(t, scratch, "init", "-q", "-b", "main")
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(dir)
	if err := os.Rename(filepath.Join(scratch, ".git"), dir); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(wt, "evil.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntouch '"+marker+"'\ncat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := "[core]\n\tfsmonitor = " + script + "\n[filter \"x\"]\n\tclean = " + script + "\n\tsmudge = " + script + "\n"
	f, err := os.OpenFile(filepath.Join(dir, "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(cfg); err != nil {
		t.Fatal(err)
	}
	f.Close()
	writeFiles(t, wt, map[string]string{".gitattributes": "* filter=x\n", "work.txt": "the session's work\n"})
}

// assertNoMarker fails the test if the attacker's command ran.
func assertNoMarker(t *testing.T, marker string) {
	t.Helper()
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the cell's git config ran a command on the host (%s exists)", marker)
	}
}

// assertGitFile checks that wt's .git file is what gitstate wrote for the worktree named name.
func assertGitFile(t *testing.T, r *Repo, wt, name string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(wt, ".git"))
	if want := "gitdir: " + r.adminDir(name) + "\n"; err != nil || string(b) != want {
		t.Errorf(".git of %s = %q (%v), want it restored to %q", wt, b, err, want)
	}
}

// assertCheckpointed checks that the last checkpoint of wt is on branch and holds work.txt.
func assertCheckpointed(t *testing.T, root, branch, commit string) {
	t.Helper()
	if tip := git(t, root, "rev-parse", branch); tip != commit {
		t.Errorf("%s is at %s, want the checkpoint %s", branch, tip, commit)
	}
	if got := git(t, root, "show", commit+":work.txt"); got != "the session's work" {
		t.Errorf("checkpoint's work.txt = %q", got)
	}
}

// TestGitFileSymlinkBeforeDotDot: "<wt>/sym/../../../../worktrees/s" reads as the session's
// own admin dir when cleaned as text, but the kernel follows sym first, so git would land in
// a git dir inside the worktree.
func TestGitFileSymlinkBeforeDotDot(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)
	wt := addSession(t, r, "s")
	marker := filepath.Join(t.TempDir(), "ran")
	evilGitDir(t, wt, filepath.Join(wt, "worktrees", "s"), marker)
	if err := os.MkdirAll(filepath.Join(wt, "p", "q", "r", "t"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("p/q/r/t", filepath.Join(wt, "sym")); err != nil {
		t.Fatal(err)
	}
	gitfile := "gitdir: " + wt + "/sym/../../../../worktrees/s\n"
	if filepath.Clean(strings.TrimSpace(strings.TrimPrefix(gitfile, "gitdir:"))) != r.adminDir("s") {
		t.Fatalf("the trick's path does not read as the admin dir")
	}
	writeFiles(t, wt, map[string]string{".git": gitfile})

	commit, _, err := r.Checkpoint(t.Context(), wt, "turn", nil)
	if err != nil {
		t.Fatal(err)
	}
	assertNoMarker(t, marker)
	assertCheckpointed(t, root, "arbor/s", commit)
	assertGitFile(t, r, wt, "s")
}

// TestGitFileTwoSpaces: git takes everything after "gitdir: " as the path, so a second space
// makes it a relative path under the worktree; trimmed, it reads as the admin dir.
func TestGitFileTwoSpaces(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)
	wt := addSession(t, r, "s")
	marker := filepath.Join(t.TempDir(), "ran")
	evilGitDir(t, wt, filepath.Join(wt, " "+r.adminDir("s")), marker)
	writeFiles(t, wt, map[string]string{".git": "gitdir:  " + r.adminDir("s") + "\n"})

	commit, _, err := r.Checkpoint(t.Context(), wt, "turn", nil)
	if err != nil {
		t.Fatal(err)
	}
	assertNoMarker(t, marker)
	assertCheckpointed(t, root, "arbor/s", commit)
	assertGitFile(t, r, wt, "s")

	// Removing the worktree checks it for uncommitted work with git first.
	evilGitDir(t, wt, filepath.Join(wt, " "+r.adminDir("s")), marker)
	writeFiles(t, wt, map[string]string{".git": "gitdir:  " + r.adminDir("s") + "\n", "more.txt": "not checkpointed\n"})
	if err := r.RemoveWorktree(t.Context(), wt, false); err == nil {
		t.Error("a worktree with uncommitted work was removed")
	}
	assertNoMarker(t, marker)
}

// TestGitFileSibling: a .git file naming another session's admin dir would make the
// checkpoint read that session's HEAD and index and commit this worktree onto its branch.
func TestGitFileSibling(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)
	wt := addSession(t, r, "s")
	addSession(t, r, "sib")
	before := git(t, root, "rev-parse", "arbor/sib")
	writeFiles(t, wt, map[string]string{".git": "gitdir: " + r.adminDir("sib") + "\n", "work.txt": "the session's work\n"})
	os.Remove(filepath.Join(wt, "a.go"))

	commit, _, err := r.Checkpoint(t.Context(), wt, "turn", nil)
	if err != nil {
		t.Fatal(err)
	}
	if after := git(t, root, "rev-parse", "arbor/sib"); after != before {
		t.Errorf("the sibling's branch moved from %s to %s", before, after)
	}
	assertCheckpointed(t, root, "arbor/s", commit)
	assertGitFile(t, r, wt, "s")
	if files := git(t, root, "show", "--name-status", "--format=", commit); files != "D\ta.go\nA\twork.txt" {
		t.Errorf("checkpoint changed\n%s\nwant a.go deleted and work.txt added", files)
	}
}

// TestGitFileFromSetupCommand: the worktree's setup command (sandboxed, repository-chosen)
// points .git at a git dir of its own; setup then lists what the command made with git.
func TestGitFileFromSetupCommand(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)
	wt := addSession(t, r, "s")
	marker := filepath.Join(t.TempDir(), "ran")
	evil := filepath.Join(wt, "evil")
	evilGitDir(t, wt, evil, marker)
	os.Remove(filepath.Join(wt, ".gitattributes"))
	err := r.SetupWorktree(t.Context(), wt, Setup{Command: "printf 'gitdir: " + evil + "\\n' > .git && echo v > made.txt"})
	assertNoMarker(t, marker)
	if err != nil {
		t.Fatal(err)
	}
	assertGitFile(t, r, wt, "s")
	commit, _, err := r.Checkpoint(t.Context(), wt, "turn", nil)
	if err != nil {
		t.Fatal(err)
	}
	assertNoMarker(t, marker)
	if files := git(t, root, "show", "--name-only", "--format=", commit); strings.Contains(files, "made.txt") {
		t.Errorf("the checkpoint took what setup made:\n%s", files)
	}
}

// TestOpenFromATamperedWorktree: opening the repository from inside a session's worktree (an
// editor's request names a file there) finds the repository the worktree belongs to, not the
// one its rewritten .git file names.
func TestOpenFromATamperedWorktree(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)
	wt := addSession(t, r, "s")
	other := newTestRepo(t)
	writeFiles(t, wt, map[string]string{
		"evil/commondir": filepath.Join(other, ".git") + "\n",
		"evil/HEAD":      "ref: refs/heads/main\n",
		".git":           "gitdir: " + filepath.Join(wt, "evil") + "\n",
	})
	o := openTest(t, filepath.Join(wt, "dir"))
	defer o.Close()
	if o.Root() != root {
		t.Errorf("opened from the worktree: %s, want %s", o.Root(), root)
	}
}

// TestCheckpointOnlyOnItsOwnBranch: a worktree switched to a branch another session records
// as its own, or another worktree has checked out, is not checkpointed onto it.
func TestCheckpointOnlyOnItsOwnBranch(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)
	wt := addSession(t, r, "s")
	addSession(t, r, "sib")
	writeFiles(t, wt, map[string]string{"work.txt": "w\n"})
	for branch, want := range map[string]string{"arbor/sib": "session sib's", "main": "also checked out in " + root} {
		writeFiles(t, r.adminDir("s"), map[string]string{"HEAD": "ref: refs/heads/" + branch + "\n"})
		before := git(t, root, "rev-parse", branch)
		if _, _, err := r.Checkpoint(t.Context(), wt, "turn", nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("checkpoint with %s checked out: %v, want a refusal naming it (%s)", branch, err, want)
		}
		if after := git(t, root, "rev-parse", branch); after != before {
			t.Errorf("%s moved from %s to %s", branch, before, after)
		}
	}
}

// TestSubmoduleConfigDoesNotRun: a submodule's git dir is in the worktree, so whatever runs
// there can configure it; git's status of the worktree (after the setup command) must not
// start git in the submodule, where its clean filter would run.
func TestSubmoduleConfigDoesNotRun(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	lib := newTestRepo(t)
	git(t, root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "sub")
	git(t, root, "commit", "-qm", "submodule")
	r := openTest(t, root)
	wt := addSession(t, r, "s")
	marker := filepath.Join(t.TempDir(), "ran")
	hook := filepath.Join(wt, "hook.sh")
	writeFiles(t, wt, map[string]string{"hook.sh": "#!/bin/sh\ntouch '" + marker + "'\ncat\n"})
	os.Chmod(hook, 0o755)
	cmd := "rm -rf sub && mkdir sub && cd sub && git init -q && echo '* filter=x' > .gitattributes && echo f > f.txt && " +
		"git add -A && git -c user.name=t -c user.email=t@t commit -qm s && git config filter.x.clean " + hook +
		" && git config core.fsmonitor " + hook + " && sleep 0.01 && touch f.txt"
	err := r.SetupWorktree(t.Context(), wt, Setup{Command: cmd})
	assertNoMarker(t, marker)
	if err != nil {
		t.Fatal(err)
	}
}

// TestGitFileForTheSandbox: what a sandbox binds read-only is the .git file gitstate wrote,
// also after a cell replaced it with a symlink to a file of the user's.
func TestGitFileForTheSandbox(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)
	wt := addSession(t, r, "s")
	secret := filepath.Join(t.TempDir(), "id_rsa")
	writeFiles(t, filepath.Dir(secret), map[string]string{"id_rsa": "PRIVATE\n"})
	os.Remove(filepath.Join(wt, ".git"))
	if err := os.Symlink(secret, filepath.Join(wt, ".git")); err != nil {
		t.Fatal(err)
	}
	p, err := r.GitFile(wt)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("%s is not a regular file: %v %v", p, fi, err)
	}
	assertGitFile(t, r, wt, "s")
	if b, _ := os.ReadFile(secret); string(b) != "PRIVATE\n" {
		t.Errorf("the symlink's target was written: %q", b)
	}
}

// TestDiscardAfterGitInit: a cell that ran `rm .git; git init` in its worktree left a
// repository that may hold commits of its own: a discard names it, a forced one removes it.
func TestDiscardAfterGitInit(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)
	wt := addSession(t, r, "s")
	os.Remove(filepath.Join(wt, ".git"))
	git(t, wt, "init", "-q")
	if _, err := r.Discard(t.Context(), wt, "", false); err == nil || !strings.Contains(err.Error(), ".git/") {
		t.Errorf("discard over a repository made in .git: %v, want a refusal naming .git/", err)
	}
	if _, err := r.Discard(t.Context(), wt, "", true); err != nil {
		t.Fatalf("forced discard: %v", err)
	}
	if _, err := os.Stat(wt); err == nil {
		t.Errorf("%s is still there", wt)
	}
	if _, err := os.Stat(r.adminDir("s")); err == nil {
		t.Errorf("the registration %s is still there", r.adminDir("s"))
	}
}
