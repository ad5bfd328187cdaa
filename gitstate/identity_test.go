package gitstate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// noIdentity empties the process's git identity for one test: no global or system config, no
// identity variables. It uses t.Setenv, so such tests do not run in parallel.
func noIdentity(t *testing.T) {
	t.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	for _, k := range []string{"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
}

// TestAcceptWithoutIdentity: Accept and Merge on a machine where git knows no one fail before
// touching anything, naming the commands that fix it; checkpoints carry on.
func TestAcceptWithoutIdentity(t *testing.T) {
	noIdentity(t)
	root, r, parent := acceptFixture(t)
	git(t, root, "config", "--unset", "user.name")
	git(t, root, "config", "--unset", "user.email")
	head := git(t, root, "rev-parse", "HEAD")
	objects := git(t, root, "count-objects")

	_, err := r.Accept(t.Context(), AcceptOptions{Head: "arbor/s", Message: "m"})
	if !errors.Is(err, ErrNoIdentity) {
		t.Fatalf("Accept without identity = %v, want ErrNoIdentity", err)
	}
	for _, cmd := range []string{`git config --global user.name "Your Name"`, `git config --global user.email you@example.com`} {
		if !strings.Contains(err.Error(), cmd) {
			t.Errorf("error %q does not name %s", err, cmd)
		}
	}
	if got := git(t, root, "count-objects"); got != objects {
		t.Errorf("objects written before the refusal: %s, then %s", objects, got)
	}
	child := filepath.Join(r.CommonDir(), "arbor", "worktrees", "child")
	if err := r.Fork(t.Context(), WorktreeSpec{Name: "child", Branch: "arbor/child", Base: "arbor/s", Dir: child}); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, child, map[string]string{"child.txt": "c\n"})
	if _, _, err := r.Checkpoint(t.Context(), child, "child turn", nil); err != nil {
		t.Fatalf("checkpoint without identity: %v", err)
	}
	if got := git(t, child, "log", "-1", "--format=%an <%ae>|%cn <%ce>"); got != "Arbor <arbor@localhost>|Arbor <arbor@localhost>" {
		t.Errorf("checkpoint signed %q", got)
	}
	parentHead := git(t, parent, "rev-parse", "HEAD")
	objects = git(t, root, "count-objects")
	if _, err := r.Merge(t.Context(), "arbor/child", parent, "", Resolutions{}); !errors.Is(err, ErrNoIdentity) {
		t.Fatalf("Merge without identity = %v, want ErrNoIdentity", err)
	}
	if got := git(t, root, "rev-parse", "HEAD"); got != head {
		t.Error("the user's branch moved")
	}
	if got := git(t, parent, "rev-parse", "HEAD"); got != parentHead {
		t.Error("the parent's branch moved")
	}
	if got := git(t, root, "count-objects"); got != objects {
		t.Errorf("objects written before the refusal: %s, then %s", objects, got)
	}
	for _, d := range []string{root, parent} {
		if st := git(t, d, "status", "--porcelain"); st != "" {
			t.Errorf("%s changed:\n%s", d, st)
		}
	}

	// The identity may come from the environment alone.
	t.Setenv("GIT_AUTHOR_NAME", "Env")
	t.Setenv("GIT_AUTHOR_EMAIL", "env@example.com")
	t.Setenv("GIT_COMMITTER_NAME", "Env")
	t.Setenv("GIT_COMMITTER_EMAIL", "env@example.com")
	if _, err := r.Accept(t.Context(), AcceptOptions{Head: "arbor/s", Message: "m"}); err != nil {
		t.Fatalf("Accept with the identity in the environment: %v", err)
	}
	if got := git(t, root, "log", "-1", "--format=%an"); got != "Env" {
		t.Errorf("accepted commit signed by %q", got)
	}
}
