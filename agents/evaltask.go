package agents

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/arborhq/arbor/agents/eval"
	"github.com/arborhq/arbor/agents/harness"
	"github.com/arborhq/arbor/sandbox"
	"github.com/arborhq/arbor/workspace"
)

// One task run of an eval: its fixture, its session, waiting for it to finish, and the hidden
// check on a clean checkout of its branch (see evalrun.go for the run around it).

// evalTask runs one task once. ok is false when the run was stopped before it finished.
func (s *Service) evalTask(ctx context.Context, er *evalRunner, t *eval.Task, k int) (eval.TaskResult, bool) {
	run := er.run
	r := eval.TaskResult{Task: t.ID, Repeat: k, Split: er.suite.SplitOf(t.ID), Tags: t.Tags,
		Harness: run.Harness, Model: run.Model, Started: time.Now().UTC()}
	errored := func(format string, a ...any) (eval.TaskResult, bool) {
		r.Status, r.Error = eval.Errored, fmt.Sprintf(format, a...)
		r.Ended = time.Now().UTC()
		r.WallMs = r.Ended.Sub(r.Started).Milliseconds()
		return r, true
	}
	fixture := filepath.Join(s.opts.StateDir, "eval", "fixtures", run.ID, fmt.Sprintf("%s.%d", t.ID, k))
	os.RemoveAll(fixture)
	s.mu.Lock()
	// Hidden from the setup and the session besides: the measured repository, the suite, the
	// results, and every other fixture (other tasks', earlier repeats' solutions and logs)
	// with the extracted suites.
	s.evals.fixtures[fixture] = evalFixture{ov: er.ov, hide: []string{run.Repo, er.suite.Dir, er.store.Dir(), filepath.Join(s.opts.StateDir, "eval")}}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.evals.fixtures, fixture)
		s.mu.Unlock()
	}()
	if err := s.makeFixture(ctx, er, t, fixture); err != nil {
		s.dropWorkspace(fixture) // the setup's sandbox opened it
		if ctx.Err() != nil {
			return r, false
		}
		return errored("the fixture did not set up: %v", err)
	}
	model := run.Model
	spec := &GoalSpec{Objective: t.Prompt, TurnBudget: t.Limits.Turns, TokenBudget: t.Limits.Tokens,
		WallBudget: time.Duration(t.Limits.Wall), By: "eval"}
	sess, err := s.Create(ctx, CreateRequest{Task: t.Prompt, Dir: fixture, Model: model, Goal: spec, Harness: run.Harness})
	if err != nil {
		if ctx.Err() != nil {
			return r, false
		}
		return errored("the session did not start: %v", err)
	}
	keep := false // a task the daemon's stop cut short stays for the next start to find
	defer func() {
		if !keep {
			s.dropWorkspace(sess.ws.Root)
		}
	}()
	r.Session, r.Branch, r.Fixture = sess.meta.ID, sess.meta.Branch, fixture
	key := eval.Key(t.ID, k)
	er.mu.Lock()
	er.active[key] = sess.meta.ID
	er.mu.Unlock()
	defer func() {
		er.mu.Lock()
		delete(er.active, key)
		er.mu.Unlock()
	}()
	if err := er.store.MarkStarted(run.ID, eval.Started{Task: t.ID, Repeat: k, Session: sess.meta.ID, Fixture: fixture, At: r.Started}); err != nil {
		s.Stop(context.WithoutCancel(ctx), sess.meta.ID)
		return errored("%v", err)
	}
	failure, ok := s.awaitEvalTask(ctx, sess, time.Duration(t.Limits.Wall))
	bg := context.WithoutCancel(ctx)
	if !ok {
		er.mu.Lock()
		stopped := er.run.Status == eval.RunStopped
		er.mu.Unlock()
		if !stopped {
			keep = true
			return r, false // the daemon is stopping: this task runs again at the next start
		}
		failure = "the eval run was stopped while this task ran"
	}
	s.Stop(bg, sess.meta.ID)
	in := s.info(sess)
	r.Usage = eval.TaskUsage{InputTokens: in.Total.InputTokens, OutputTokens: in.Total.OutputTokens,
		CostUSD: in.Total.CostUSD, ModelCalls: in.Total.ModelCalls, CachedInputTokens: in.Total.CachedInputTokens,
		RefineCalls: in.Total.RefineCalls, RefineTokens: in.Total.RefineInputTokens + in.Total.RefineOutputTokens, RefineCostUSD: in.Total.RefineCostUSD}
	r.Cells = in.Total.KernelExecs
	r.Children = len(sess.descendants())
	if g, ok, _ := s.GoalOf(sess.meta.ID); ok {
		r.Claimed, r.Evidence, r.Turns = g.Claimed, g.Evidence, g.Turns
		r.GoalStatus, r.GoalReason = g.Status, g.Reason
	}
	head, err := sess.gitMain(bg, "rev-parse", "--verify", "--quiet", "refs/heads/"+sess.meta.Branch+"^{commit}")
	head = strings.TrimSpace(head)
	if err != nil || head == "" {
		return errored("the session's branch %s is gone", sess.meta.Branch)
	}
	names, err := sess.gitMain(bg, "diff", "--name-only", "-z", "--no-renames", sess.meta.BaseCommit, head)
	if err != nil {
		return errored("diff the session's branch: %v: %s", err, names)
	}
	for p := range strings.SplitSeq(names, "\x00") {
		if p != "" {
			r.Changed = append(r.Changed, p)
		}
	}
	if failure != "" {
		return errored("%s", failure)
	}
	r.Flags = eval.Flags(r.Changed, t.CheckFiles)
	if why := s.validateCheck(ctx, er, sess, t); why != "" && ctx.Err() == nil {
		return errored("%s", why)
	}
	c, flags := s.evalCheck(ctx, sess, t, head)
	r.Flags = append(r.Flags, flags...)
	if added, err := sess.gitMain(bg, "diff", "--name-only", "-z", "--no-renames", "--diff-filter=A", sess.meta.BaseCommit, head); err == nil {
		if m := shadowedModules(strings.Split(added, "\x00"), t.CheckFiles); len(m) > 0 && !slices.Contains(r.Flags, eval.FlagShadowsModule) {
			r.Flags = append(r.Flags, eval.FlagShadowsModule)
		}
	}
	if ctx.Err() != nil {
		er.mu.Lock()
		stopped := er.run.Status == eval.RunStopped
		er.mu.Unlock()
		if !stopped {
			return r, false // the daemon is stopping: this task runs again at the next start
		}
		return errored("the eval run was stopped while the hidden check ran")
	}
	r.Check = c
	r.Ended = time.Now().UTC()
	r.WallMs = r.Ended.Sub(r.Started).Milliseconds()
	// The check ran on the untouched fixture, so a check that now cannot finish or exits as
	// "not found" does so because of the agent's work: a failure, not an error of the suite.
	switch {
	case c.ExitCode == 127 || c.TimedOut:
		r.Status = eval.Failed
		r.Flags = append(r.Flags, eval.FlagCheckBroke)
	case c.Error != "":
		r.Status, r.Error = eval.Errored, "the hidden check could not run: "+c.Error
	case c.Passed:
		r.Status = eval.Passed
	default:
		r.Status = eval.Failed
	}
	return r, true
}

// validateCheck runs the task's check once per run on the untouched fixture: a check that is
// not found there, or does not finish, is an error of the suite (and every run of the task is
// errored); one that runs — passing or, as it should, failing — is sound.
func (s *Service) validateCheck(ctx context.Context, er *evalRunner, sess *Session, t *eval.Task) string {
	er.mu.Lock()
	why, done := er.checked[t.ID]
	er.mu.Unlock()
	if done {
		return why
	}
	c, _ := s.evalCheck(ctx, sess, t, sess.meta.BaseCommit)
	if ctx.Err() != nil {
		return ""
	}
	switch {
	case c.TimedOut:
		why = fmt.Sprintf("the hidden check timed out after %s on the untouched fixture (an error of the suite, not a failure of the agent)", time.Duration(t.CheckTimeout))
	case c.Error != "":
		why = "the hidden check could not run on the untouched fixture: " + c.Error + " (an error of the suite, not a failure of the agent)"
	}
	er.mu.Lock()
	er.checked[t.ID] = why
	er.mu.Unlock()
	return why
}

// awaitEvalTask waits until the task's session is done: its goal ended, or it stopped working
// without claiming (a turn that changed nothing: its goal backs off), or it failed. failure
// is set when the session could not work (the model unreachable); ok is false when ctx ended
// first.
func (s *Service) awaitEvalTask(ctx context.Context, sess *Session, wall time.Duration) (failure string, ok bool) {
	deadline := time.Now().Add(wall + 2*time.Minute)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	settledSince := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return "", false
		case <-tick.C:
		}
		st := sess.State()
		g, has, _ := s.GoalOf(sess.meta.ID)
		busy := st == Running || st == Admitted || len(sess.busyDescendants()) > 0
		switch {
		case st == Stopped:
			return "", true
		case st == Failed && !busy:
			sess.mu.Lock()
			why := sess.errMsg
			sess.mu.Unlock()
			if strings.HasPrefix(why, "model ") {
				return "the model could not be reached: " + why, true
			}
			return "", true
		case has && g.Ended() && !busy:
			// Settled: the last turn's checkpoint is written once the session is idle.
			if settledSince.IsZero() {
				settledSince = time.Now()
			}
			if time.Since(settledSince) > 100*time.Millisecond {
				return "", true
			}
		case has && !g.Ended() && g.Waiting == "backoff" && !busy:
			return "", true // it stopped working without a claim: its goal backs off
		case !has && (st == Idle || st == Inactive) && !busy:
			return "", true
		default:
			settledSince = time.Time{}
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("the task's session was still working %s after its wall limit", 2*time.Minute), true
		}
	}
}

// makeFixture makes the task's repository: its files (or bundle) as one commit, the setup
// command run and committed, and the workspace harness version the run measures.
func (s *Service) makeFixture(ctx context.Context, er *evalRunner, t *eval.Task, dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	gitc := func(args ...string) error {
		// The setup wrote the tree these commands read: no hook or fsmonitor of the fixture's
		// runs on the host (its git dir is read-only to the setup, this holds regardless).
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir, "-c", "user.name=arbor eval", "-c", "user.email=eval@arbor.invalid",
			"-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if t.Bundle {
		out, err := exec.CommandContext(ctx, "git", "clone", "-q", filepath.Join(t.Dir, "repo.bundle"), dir).CombinedOutput()
		if err != nil {
			return fmt.Errorf("clone %s: %v: %s", filepath.Join(t.Dir, "repo.bundle"), err, strings.TrimSpace(string(out)))
		}
	} else {
		if err := copyTree(filepath.Join(t.Dir, "repo"), dir); err != nil {
			return err
		}
		if err := gitc("init", "-q", "-b", "main"); err != nil {
			return err
		}
		if err := gitc("add", "-A"); err != nil {
			return err
		}
		if err := gitc("commit", "-q", "--allow-empty", "-m", "fixture of task "+t.ID); err != nil {
			return err
		}
	}
	if t.Setup != "" {
		if err := s.runSetup(ctx, t, dir); err != nil {
			return err
		}
		if err := gitc("add", "-A"); err != nil {
			return err
		}
		if err := gitc("commit", "-q", "--allow-empty", "-m", "setup of task "+t.ID); err != nil {
			return err
		}
	}
	// The workspace harness measured: its commit's objects fetched from the measured
	// repository and the fixture's workspace scope set to it, so the session's Python reads of
	// the harness see the same version as its prompt.
	if c := er.run.Harness[string(harness.ScopeWorkspace)]; c != "" {
		src := er.ws.Repo.CommonDir()
		if err := gitc("-c", "uploadpack.allowAnySHA1InWant=true", "fetch", "-q", "--no-tags", "--no-write-fetch-head", src, c); err != nil {
			return fmt.Errorf("the harness version %s: %w", c[:min(12, len(c))], err)
		}
		if err := gitc("update-ref", harness.ScopeWorkspace.Ref(""), c); err != nil {
			return err
		}
	}
	return nil
}

// setupTimeout bounds a task's setup command.
const setupTimeout = 5 * time.Minute

// runSetup runs the task's setup command in the fixture dir, confined as the task's session
// and its hidden check will be: the session's sandbox when its kernel would get one (the
// system read-only, the fixture writable but its git dir, $HOME and ~/.ssh, the measured
// repository, the suite and the results hidden, no network unless "network" is set) and
// always the kernels' environment, without a model's key. The suite is the author's, and
// maybe the repository's, code: it gets no more of the host than the agent does.
func (s *Service) runSetup(ctx context.Context, t *eval.Task, dir string) error {
	ws, err := s.workspaceFor(dir)
	if err != nil {
		return err
	}
	cfg, err := ws.config(s.overridesFor(ws.Root))
	if err != nil {
		return err
	}
	scratch, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".setup-")
	if err != nil {
		return fmt.Errorf("setup scratch dir: %w", err)
	}
	defer os.RemoveAll(scratch)
	// The paths, mode and environment of a session of the fixture, which does not exist yet.
	// Its sandbox is built here rather than by setupCommand: that hides the workspace's root
	// (a session works in a worktree beside it), and the fixture is the root.
	box := &Session{svc: s, ws: ws, cfg: cfg, dir: scratch}
	mode, err := box.sandboxFor()
	if err != nil {
		return fmt.Errorf("setup %q: %w", t.Setup, err)
	}
	env := sandbox.Env(cfg.KernelEnv, box.keyEnvs())
	argv := []string{"sh", "-c", t.Setup}
	where := "unsandboxed: the sandbox cannot work here"
	if cfg.Sandbox == workspace.SandboxOff {
		where = `unsandboxed: "sandbox": "off"`
	}
	if mode != "" {
		tmp, cache := filepath.Join(scratch, "tmp"), filepath.Join(scratch, "cache")
		for _, d := range []string{tmp, cache} {
			if err := os.Mkdir(d, 0o700); err != nil {
				return fmt.Errorf("setup sandbox: %w", err)
			}
		}
		hide, ro := box.sandboxPaths()
		hide = slices.DeleteFunc(hide, func(p string) bool { return p == ws.Root })
		spec := sandbox.Spec{Dir: dir, Writable: []string{cache}, Hide: hide, ReadOnly: ro, Tmp: tmp,
			HomeAllow: cfg.SandboxHome, Network: cfg.AllowNetwork}
		spec.Home, _ = os.UserHomeDir()
		if rt := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(rt) {
			spec.Hide = append(spec.Hide, rt)
		}
		args, err := spec.Args()
		if err != nil {
			return fmt.Errorf("setup sandbox: %w", err)
		}
		argv = append(append(append([]string{s.sandbox.Path}, args...), "--"), argv...)
		env = append(env, "XDG_CACHE_HOME="+cache)
		where = "in the sandbox: only the fixture is writable; $HOME, ~/.ssh and the network are out of reach unless the configuration gives them"
	}
	sctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	cmd := exec.CommandContext(sctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	if mode != "" {
		g, err := s.budget(cfg.Limits, "e-")
		if err != nil {
			return fmt.Errorf("setup sandbox: %w", err)
		}
		defer g.Remove()
		g.Apply(cmd)
	}
	// A child left holding the output does not hold the task: the wait ends 5 s after the
	// shell does.
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	switch {
	case sctx.Err() == context.DeadlineExceeded:
		return fmt.Errorf("setup %q did not finish in %s (%s): %s", t.Setup, setupTimeout, where, tail(strings.TrimSpace(string(out)), 2000))
	case err != nil:
		return fmt.Errorf("setup %q failed (%s): %v: %s", t.Setup, where, err, tail(strings.TrimSpace(string(out)), 2000))
	}
	return nil
}

// evalCheck runs the task's hidden check on a clean checkout of head with the check's files
// laid over it, judged (judge.go), in the session's sandbox, bounded by the check's timeout.
// It returns the flags the agent's tree earned on the way.
func (s *Service) evalCheck(ctx context.Context, sess *Session, t *eval.Task, head string) (*eval.Check, []string) {
	c := &eval.Check{Command: t.Check, Commit: head}
	start := time.Now()
	defer func() { c.DurationMs = time.Since(start).Milliseconds() }()
	lay := func(dir string) error {
		for _, f := range t.CheckFiles {
			if err := layFile(dir, f, filepath.Join(t.Dir, "check", filepath.FromSlash(f))); err != nil {
				return fmt.Errorf("lay the check's file %s: %w", f, err)
			}
		}
		return nil
	}
	// What the agent may not change, as the fixture has it: the judge's rules (judge.go).
	r := sess.runJudged(ctx, "check", head, t.Check, slices.Concat(judgeProtected, t.Protected), t.CheckFiles, lay,
		[]string{"ARBOR_EVAL_TASK=" + t.ID}, time.Duration(t.CheckTimeout), t.Pass)
	c.Passed, c.ExitCode, c.TimedOut, c.Output, c.Error, c.Judged = r.passed, r.exitCode, r.timedOut, r.output, r.err, r.judged
	return c, r.flags
}

// layFile writes the file src at rel inside root, replacing whatever the checkout has there
// or on the way there — a link the agent committed is removed, never followed, so the check's
// files land inside root and nowhere else.
func layFile(root, rel, src string) error {
	parts := strings.Split(rel, "/")
	cur := root
	for i, part := range parts {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("bad path %q", rel)
		}
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		last := i == len(parts)-1
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return err
		case last || !fi.IsDir(): // a file, a link (even to a directory): not ours to keep
			if err := os.RemoveAll(cur); err != nil {
				return err
			}
		}
		if !last {
			if err := os.Mkdir(cur, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
		}
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(cur, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// copyTree copies the regular files and directories under from into to (which may exist). A
// .git among them is refused: the fixture's git dir is made here, and one the suite brought
// would configure what the host's git add runs (a filter driver, a hook).
func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.Name() == ".git" {
			return fmt.Errorf("%s: a fixture's files cannot hold a .git (its configuration would run commands on your machine); give a task its history as repo.bundle", p)
		}
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil // links and devices are not part of a fixture
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, fi.Mode().Perm()|0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, src); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}
