package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// userTree is what a user would look at to see whether arbor touched their checkout.
type userTree struct {
	head, branchTip, sessionTip, status, readme string
	hello                                       bool // hello.txt exists in the user's tree
}

func (e *env) userTree(sessionBranch string) userTree {
	e.t.Helper()
	readme, err := os.ReadFile(filepath.Join(e.repo, "README.md"))
	if err != nil {
		e.t.Fatal(err)
	}
	_, err = os.Stat(filepath.Join(e.repo, "hello.txt"))
	return userTree{
		head:       strings.TrimSpace(e.git(e.repo, "symbolic-ref", "HEAD")),
		branchTip:  strings.TrimSpace(e.git(e.repo, "rev-parse", "main")),
		sessionTip: strings.TrimSpace(e.git(e.repo, "rev-parse", sessionBranch)),
		status:     e.git(e.repo, "status", "--porcelain"),
		readme:     string(readme),
		hello:      err == nil,
	}
}

// TestAcceptWithoutGitIdentity is a user with no git identity anywhere — no global or system
// config, nothing in the repository, no GIT_AUTHOR_* or EMAIL — accepting a session's change:
// arbor says how to set one and leaves the branch, index and files as they were; once the
// repository has an identity the same accept goes through, signed with it.
func TestAcceptWithoutGitIdentity(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.git(e.repo, "config", "--unset", "user.name")
	e.git(e.repo, "config", "--unset", "user.email")
	if out := e.git(e.repo, "config", "--list", "--show-origin"); strings.Contains(out, "user.") {
		t.Fatalf("the repository still has an identity:\n%s", out)
	}

	// Checkpoints on the session branch are arbor's own, so the session runs without one.
	id := sessionID(t, e.mustArbor("run", "write a file please"))
	s := e.session(id)
	// The user has work in progress: an edit and a staged new file, neither in the change.
	writeFile(t, filepath.Join(e.repo, "README.md"), "# test repo\n\nwork in progress\n")
	writeFile(t, filepath.Join(e.repo, "notes.txt"), "staged, not committed\n")
	e.git(e.repo, "add", "notes.txt")
	before := e.userTree(s.Branch)

	r := e.arbor("accept", id)
	if r.code == 0 {
		t.Fatalf("accept without an identity succeeded:\n%s", r)
	}
	for _, want := range []string{`git config --global user.name "Your Name"`, `git config --global user.email you@example.com`} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the error does not say %s:\n%s", want, r)
		}
	}
	if after := e.userTree(s.Branch); after != before {
		t.Errorf("a refused accept changed the user's checkout:\nbefore %+v\nafter  %+v", before, after)
	}

	e.git(e.repo, "config", "user.name", testUserName)
	e.git(e.repo, "config", "user.email", testUserEmail)
	r = e.mustArbor("accept", id)
	if !strings.Contains(r.stdout, "on your branch: hello.txt") {
		t.Errorf("accept does not report hello.txt:\n%s", r)
	}
	want := testUserName + " <" + testUserEmail + ">"
	if got := strings.TrimSpace(e.git(e.repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>", "main")); got != want+"|"+want {
		t.Errorf("the accepted commit is signed %q, want author and committer %s", got, want)
	}
	if files := strings.TrimSpace(e.git(e.repo, "show", "--name-only", "--format=", "main")); files != "hello.txt" {
		t.Errorf("the accepted commit changes %q, want hello.txt", files)
	}
	if st := e.git(e.repo, "status", "--porcelain"); st != before.status {
		t.Errorf("git status --porcelain after accept = %q, want the user's work in progress %q", st, before.status)
	}
}
