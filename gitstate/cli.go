package gitstate

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// gitAt names the repository and working tree a git command works on. gitstate always
// passes them to git (GIT_DIR, GIT_COMMON_DIR, GIT_WORK_TREE) and never lets git discover them:
// a session's worktree is writable by the code the session runs, and git discovering its
// repository there would follow whatever .git file that code left, into a git dir whose
// config names programs (core.fsmonitor, a filter's clean command) that git then runs here,
// on the host.
type gitAt struct {
	work   string // the working tree: the command's directory and GIT_WORK_TREE
	gitDir string // GIT_DIR: the common dir for the main worktree, the admin dir for a linked one
	common string // GIT_COMMON_DIR
}

// mainAt is the main worktree.
func (r *Repo) mainAt() gitAt { return gitAt{work: r.root, gitDir: r.common, common: r.common} }

// linkedAt is the linked worktree at dir whose admin dir is admin (from gitstate's record or
// git's registration, never from dir/.git).
func (r *Repo) linkedAt(dir, admin string) gitAt {
	return gitAt{work: dir, gitDir: admin, common: r.common}
}

// gitGuards turn off what git would run on its own from a repository's configuration or
// hooks, whoever wrote them: the fsmonitor hook, every hook (update-ref's
// reference-transaction, read-tree's post-index-change), automatic maintenance, and recursion
// into submodules, whose git dirs live in the worktree. Filter and diff drivers named by
// .gitattributes still come from the configuration git reads — the system's, the user's and
// the repository's common config and per-worktree config, none of which a sandbox can write.
// Passed with -c, they also reach the git processes git starts.
var gitGuards = []string{
	"-c", "core.fsmonitor=false",
	"-c", "core.hooksPath=/dev/null",
	"-c", "submodule.recurse=false",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
}

// Guards returns git's leading arguments that turn off what git would run on its own from a
// repository's configuration or hooks (see gitGuards), for callers outside gitstate that run
// git on a checkout a sandbox can write.
func Guards() []string { return slices.Clone(gitGuards) }

// runGit runs the git CLI on at: for merges and accepts, and for whatever the policy in doc.go
// sends through git. Variables of the daemon's environment that would redirect git to another
// repository or index are replaced by at's. Callers hold the lock.
func runGit(ctx context.Context, at gitAt, stdin []byte, args ...string) (string, error) {
	if at.work == "" || at.gitDir == "" || at.common == "" {
		return "", fmt.Errorf("git %s: no repository given (work tree %q, git dir %q)", strings.Join(args, " "), at.work, at.gitDir)
	}
	cmd := exec.CommandContext(ctx, "git", append(slices.Clip(gitGuards), args...)...)
	cmd.Dir = at.work
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR",
			"GIT_NAMESPACE", "GIT_CEILING_DIRECTORIES", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_PREFIX":
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, "GIT_DIR="+at.gitDir, "GIT_COMMON_DIR="+at.common, "GIT_WORK_TREE="+at.work,
		"GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	err := cmd.Run()
	if err != nil {
		return stdout.String(), &gitError{args: args, err: err, stderr: strings.TrimSpace(stderr.String())}
	}
	return stdout.String(), nil
}

type gitError struct {
	args   []string
	err    error
	stderr string
}

func (e *gitError) Error() string {
	return fmt.Sprintf("git %s: %v: %s", strings.Join(e.args, " "), e.err, e.stderr)
}

func (e *gitError) Unwrap() error { return e.err }

// exitCode is the git process's exit status, or -1.
func exitCode(err error) int {
	var ee *exec.ExitError
	if ge, ok := err.(*gitError); ok && asExit(ge.err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

func asExit(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	if ok {
		*ee = e
	}
	return ok
}
