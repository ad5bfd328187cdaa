package agents

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/arborhq/arbor/agents/harness"
	"github.com/arborhq/arbor/gitstate"
	"github.com/arborhq/arbor/workspace"
)

// The branch check and the text advice of a harness proposal. The branch check (a scope's
// "gate" command) runs in the sandbox on a clean checkout of the proposing session's branch in
// which every protected path is as it was at the session's base commit — so a session that
// edited or deleted a test cannot pass by it. It says the proposer's branch is green, nothing
// about the edit: what the edit does is the eval gate's to measure (evalgate.go). The text
// rules (advice) flag what a reviewer should look at and refuse nothing.

// builtinProtected are the paths every scope protects: tests and their configuration in the
// usual layouts, and the configuration that names the gate.
var builtinProtected = []string{
	"**/test_*.py", "**/*_test.py", "**/conftest.py", "**/tests/**", "**/test/**", "**/testdata/**",
	"**/*_test.go", "**/__tests__/**", "**/*.test.*", "**/*.spec.*", "**/spec/**",
	"pytest.ini", "tox.ini", "noxfile.py", ".github/workflows/**", "arbor.json",
}

// skipping catches proposals that would teach the agent to skip or weaken a check, whichever
// file they name.
var skipping = regexp.MustCompile(`(?i)(pytest\.skip|mark\.skip|mark\.xfail|unittest\.skip|@skip\b|\bt\.skip\(|--deselect|-k\s*["']?\s*not\b|--no-verify|\bskip(ping)?\s+(the\s+)?(failing\s+)?(tests?|checks?|verif\w*)|\b(delete|remove|edit|modify|rewrite|weaken|disable|comment out)\s+(the\s+)?(failing\s+)?(tests?|assert\w*|checks?|verif\w*)|exit\s*\(\s*0\s*\)\s*#.*test)`)

// protectedGlobs are the scope's protected paths: the built-in ones, the configured ones, and
// the files the gate command names.
func (s *Session) protectedGlobs(pol workspace.HarnessPolicy) []string {
	globs := append(append([]string(nil), builtinProtected...), pol.Protected...)
	s.awaitWorktree(context.Background()) // the files the gate names must be seen
	for _, f := range strings.Fields(pol.Gate) {
		f = strings.Trim(f, `"'`)
		if strings.HasPrefix(f, "-") || filepath.IsAbs(f) || !strings.ContainsAny(f, "./") {
			continue
		}
		if fi, err := os.Stat(filepath.Join(s.meta.Worktree, f)); err == nil && !fi.IsDir() {
			globs = append(globs, path.Clean(f))
		}
	}
	return globs
}

// matchGlob matches a slash-separated path against a glob in which ** is any number of
// segments; a glob without a slash matches the path's last segment anywhere.
func matchGlob(glob, p string) bool {
	if !strings.Contains(glob, "/") {
		ok, _ := path.Match(glob, path.Base(p))
		return ok
	}
	return matchSegs(strings.Split(glob, "/"), strings.Split(p, "/"))
}

func matchSegs(g, p []string) bool {
	for len(g) > 0 {
		if g[0] == "**" {
			for i := 0; i <= len(p); i++ {
				if matchSegs(g[1:], p[i:]) {
					return true
				}
			}
			return false
		}
		if len(p) == 0 {
			return false
		}
		if ok, _ := path.Match(g[0], p[0]); !ok {
			return false
		}
		g, p = g[1:], p[1:]
	}
	return len(p) == 0
}

var pathToken = regexp.MustCompile(`[A-Za-z0-9_.\-/]+`)

// advice is what the text rules notice in a proposal's edits: a path the checks rely on
// (test files, verifier scripts, the branch check's own files, arbor.json, the scope's
// "protected" globs), and words that would tell the agent to skip or weaken a check. They are
// shown to whoever decides — they do not refuse: text misses what matters (a path built from
// pieces) and catches what does not ("run the tests in tests/ before you claim"); only a
// measured effect and a person refuse.
func (s *Session) advice(pol workspace.HarnessPolicy, edits []harness.Edit) []string {
	globs := s.protectedGlobs(pol)
	var out []string
	for _, e := range edits {
		text := strings.Join([]string{e.Entry.Title, e.Entry.Body, e.Entry.Module}, "\n")
		if sp := e.Entry.Spec; sp != nil {
			text += "\n" + sp.Instructions
		}
	tokens:
		for _, tok := range pathToken.FindAllString(text, -1) {
			tok = strings.Trim(strings.TrimPrefix(tok, "./"), ".")
			if !strings.Contains(tok, "/") && !strings.Contains(tok, ".") {
				continue
			}
			for _, g := range globs {
				if matchGlob(g, tok) {
					out = append(out, fmt.Sprintf("%s %s names %s, a path the checks rely on (%s): make sure it does not change what they judge", e.Entry.Kind, e.Entry.ID, tok, g))
					break tokens
				}
			}
		}
		if m := skipping.FindString(text); m != "" {
			out = append(out, fmt.Sprintf("%s %s may tell the agent to skip or weaken a check (%q)", e.Entry.Kind, e.Entry.ID, strings.TrimSpace(m)))
		}
	}
	return out
}

// gateOutputTail is how much of a gate's output a verdict keeps.
const gateOutputTail = 4 << 10

// runGate runs the scope's branch check for a proposal of this session, judged (runJudged): on
// a clean checkout of the session's branch with the protected paths and test and build
// configuration restored from its base, Python isolated, a unittest or pytest command judged by
// its report, in the sandbox, bounded by the check's timeout. A command that is missing, cannot
// start or times out fails.
func (s *Session) runGate(ctx context.Context, pol workspace.HarnessPolicy, pid string) *harness.Verdict {
	v := &harness.Verdict{Command: pol.Gate}
	start := time.Now()
	defer func() { v.DurationMs = time.Since(start).Milliseconds() }()
	rev, err := s.gitMain(ctx, "rev-parse", "--verify", "--quiet", "refs/heads/"+s.meta.Branch+"^{commit}")
	head := strings.TrimSpace(rev)
	if err != nil || head == "" {
		v.Error = fmt.Sprintf("the session's branch %s is gone", s.meta.Branch)
		return v
	}
	v.Commit = head
	timeout := pol.GateTimeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	r := s.runJudged(ctx, filepath.Join("gate", pid), head, pol.Gate, slices.Concat(s.protectedGlobs(pol), judgeProtected), nil, nil,
		[]string{"ARBOR_SESSION=" + s.meta.ID, "ARBOR_PROPOSAL=" + pid}, timeout, "")
	v.Passed, v.ExitCode, v.TimedOut, v.Output, v.Error, v.Judged = r.passed, r.exitCode, r.timedOut, r.output, r.err, r.judged
	return v
}

// cmdResult is how a verifier command (a gate, an end condition) ended.
type cmdResult struct {
	passed   bool
	exitCode int
	timedOut bool   // ctx's deadline ended it (exitCode -1)
	output   string // the tail of its combined output
	err      string // it could not run: not found, cannot start
}

// runCommand runs a verifier's shell command in dir, sandboxed as setup commands are, until it
// exits or ctx ends.
func (s *Session) runCommand(ctx context.Context, dir, script string, env []string) cmdResult {
	var r cmdResult
	cmd, release, err := s.setupCommand(ctx, dir, script, env)
	if err != nil {
		r.err = err.Error()
		return r
	}
	defer release()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	r.output = tail(out.String(), gateOutputTail)
	var exit *exec.ExitError
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		r.timedOut, r.exitCode = true, -1
	case errors.As(err, &exit):
		r.exitCode = exit.ExitCode()
		if r.exitCode == 127 {
			r.err = "the command was not found: " + strings.TrimSpace(r.output)
		}
	case err != nil:
		r.err = err.Error()
	default:
		r.passed = true
	}
	return r
}

// restoreProtected puts every protected path of the checkout at dir back as it is at the
// session's base commit: changed ones restored, added ones removed.
func (s *Session) restoreProtected(ctx context.Context, dir, head string, globs []string) error {
	list := func(commit string) (map[string]bool, error) {
		out, err := s.gitMain(ctx, "ls-tree", "-r", "-z", "--name-only", commit)
		if err != nil {
			return nil, fmt.Errorf("list %s: %v: %s", short(commit), err, out)
		}
		m := map[string]bool{}
		for p := range strings.SplitSeq(out, "\x00") {
			if p != "" && protectedPath(globs, p) {
				m[p] = true
			}
		}
		return m, nil
	}
	base, err := list(s.meta.BaseCommit)
	if err != nil {
		return err
	}
	now, err := list(head)
	if err != nil {
		return err
	}
	var restore []string
	for p := range base {
		restore = append(restore, p)
	}
	for p := range now {
		if !base[p] {
			if err := os.Remove(filepath.Join(dir, p)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	if len(restore) > 0 {
		if out, err := s.checkoutGit(ctx, dir, append([]string{"checkout", s.meta.BaseCommit, "--"}, restore...)...); err != nil {
			return fmt.Errorf("restore the protected paths from %s: %v: %s", short(s.meta.BaseCommit), err, out)
		}
	}
	return nil
}

func protectedPath(globs []string, p string) bool {
	for _, g := range globs {
		if matchGlob(g, p) {
			return true
		}
	}
	return false
}

// gitMain runs git on the session's repository, with nothing the repository configures run
// on the way (gitstate.Guards).
func (s *Session) gitMain(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", slices.Concat([]string{"-C", s.ws.Root}, gitstate.Guards(), args)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// checkoutGit runs git on the scratch checkout at dir (made by `git worktree add`), naming its
// git dir, common dir and work tree itself: the command a gate judges runs in that checkout
// and can rewrite its .git file, and git discovering the repository from it would run what
// that file's target configures.
func (s *Session) checkoutGit(ctx context.Context, dir string, args ...string) (string, error) {
	admin := checkoutAdmin(s.ws.Repo.CommonDir(), dir)
	if admin == "" {
		return "", fmt.Errorf("the checkout %s is not registered in %s", dir, s.ws.Repo.CommonDir())
	}
	cmd := exec.CommandContext(ctx, "git", append(gitstate.Guards(), args...)...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_DIR=") && !strings.HasPrefix(kv, "GIT_WORK_TREE=") && !strings.HasPrefix(kv, "GIT_COMMON_DIR=") && !strings.HasPrefix(kv, "GIT_INDEX_FILE=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "GIT_DIR="+admin, "GIT_COMMON_DIR="+s.ws.Repo.CommonDir(), "GIT_WORK_TREE="+dir)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// dropCheckout removes a scratch checkout and its registration without git reading anything
// in it (as `git worktree remove --force` would, after reading its .git file).
func (s *Session) dropCheckout(ctx context.Context, dir string) {
	admin := checkoutAdmin(s.ws.Repo.CommonDir(), dir)
	os.RemoveAll(dir)
	if admin != "" {
		os.RemoveAll(admin)
		return
	}
	s.gitMain(ctx, "worktree", "prune")
}

// checkoutAdmin finds the admin dir git registered the linked checkout at dir under, from the
// registrations' own back-pointers (in the common dir, which no sandbox can write), or "".
func checkoutAdmin(common, dir string) string {
	ents, _ := os.ReadDir(filepath.Join(common, "worktrees"))
	for _, e := range ents {
		admin := filepath.Join(common, "worktrees", e.Name())
		b, err := os.ReadFile(filepath.Join(admin, "gitdir"))
		if err == nil && filepath.Clean(strings.TrimSpace(string(b))) == filepath.Join(dir, ".git") {
			return admin
		}
	}
	return ""
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func short(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}
