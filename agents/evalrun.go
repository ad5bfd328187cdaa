package agents

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/arborhq/arbor/agents/eval"
	"github.com/arborhq/arbor/agents/harness"
	"github.com/arborhq/arbor/agents/model/scripted"
	"github.com/arborhq/arbor/sandbox"
	"github.com/arborhq/arbor/workspace"
)

// The eval runner: each task of a suite as a fresh root session of its own fixture
// repository, with the harness pinned, a goal bounded by the task's limits, and after it the
// task's hidden check on a clean checkout of the session's branch. Results go to the measured
// repository's git dir (agents/eval.Store); fixtures live in the daemon's state directory. A
// run survives a daemon restart: finished tasks are kept, the one a restart interrupted is run
// again, the rest run.

// EvalRequest asks for one eval run.
type EvalRequest struct {
	// Dir is inside the repository whose harness is measured; results go under its git dir.
	Dir string
	// Suite is a suite directory (relative to Dir), or the name of a built-in suite.
	Suite string
	Split string // "", eval.Feedback or eval.HeldOut
	Tags  []string
	// Harness is the version measured: "" = the scopes' heads now; a commit (or unique
	// abbreviation) of the workspace harness; "global:REV" or "workspace:REV"; or a proposal
	// id (the harness as that proposal would make it).
	Harness string
	// Model is a configured model; "" = the suite's scripted model if it has one, else the
	// default model.
	Model    string
	Repeat   int
	Parallel int
	Label    string
	// pins, when set (the refinement gate), are the scopes' commits to measure.
	pins map[string]string
}

// evalModelScripted is the model name of a suite's script.
const evalModelScripted = "scripted"

// evalRunner is a run in progress.
type evalRunner struct {
	run     *eval.Run
	store   *eval.Store
	suite   *eval.Suite
	ws      *Workspace
	cancel  context.CancelFunc
	done    chan struct{}
	ov      workspace.Overrides // the fixtures' overrides: the scripted model's address
	mu      sync.Mutex
	active  map[string]string // task run key → session id
	checked map[string]string // task id → why its check is unsound ("" = it ran on the fixture)
}

// evalState is the service's eval bookkeeping (under Service.mu).
type evalState struct {
	runs map[string]*evalRunner // running, by id
	// fixtures maps a fixture root to what its sessions need: the model overrides and the
	// paths their sandbox must also hide (the measured repository, the suite, the results).
	fixtures map[string]evalFixture
}

type evalFixture struct {
	ov   workspace.Overrides
	hide []string
}

// overridesFor is the overrides a workspace's configuration loads with: the service's, or an
// eval fixture's.
func (s *Service) overridesFor(root string) workspace.Overrides {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.evals.fixtures[root]; ok {
		return f.ov
	}
	return s.opts.Overrides
}

// evalHide is what an eval fixture's sandbox hides beyond its own workspace.
func (s *Service) evalHide(root string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.evals.fixtures[root].hide
}

// EvalStore opens the results store of the repository containing dir.
func (s *Service) EvalStore(dir string) (*eval.Store, *Workspace, error) {
	ws, err := s.workspaceFor(dir)
	if err != nil {
		return nil, nil, err
	}
	st, err := eval.OpenStore(filepath.Join(ws.Repo.CommonDir(), "arbor", "eval"))
	return st, ws, err
}

// StartEval checks a request, records the run and starts it; it returns at once.
func (s *Service) StartEval(ctx context.Context, req EvalRequest) (*eval.Run, error) {
	if req.Repeat < 1 {
		return nil, RequestError(fmt.Sprintf("eval: repeat %d: want at least 1 (each task runs that many times)", req.Repeat))
	}
	if req.Parallel == 0 {
		req.Parallel = 1
	}
	if req.Parallel < 1 || req.Parallel > 16 {
		return nil, RequestError(fmt.Sprintf("eval: parallel %d: want 1 to 16 tasks at a time", req.Parallel))
	}
	if strings.TrimSpace(req.Suite) == "" {
		return nil, RequestError("eval: no suite given; name a suite directory or a built-in suite (" + strings.Join(eval.BuiltinNames(), ", ") + ")")
	}
	store, ws, err := s.EvalStore(req.Dir)
	if err != nil {
		return nil, err
	}
	suite, err := s.loadSuite(ws, req.Dir, req.Suite)
	if err != nil {
		return nil, RequestError(err.Error())
	}
	tasks, err := suite.Select(req.Split, req.Tags)
	if err != nil {
		return nil, RequestError(err.Error())
	}
	pins := req.pins
	if pins == nil {
		if pins, err = s.evalPins(ctx, ws, req.Harness); err != nil {
			return nil, err
		}
	}
	modelName := req.Model
	if modelName == "" && suite.Script != "" {
		modelName = evalModelScripted
	}
	if modelName != evalModelScripted {
		cfg, err := ws.config(s.opts.Overrides)
		if err != nil {
			return nil, err
		}
		if modelName, _, err = cfg.ResolveModel(modelName); err != nil {
			return nil, RequestError("eval: " + err.Error())
		}
	} else if suite.Script == "" {
		return nil, RequestError(fmt.Sprintf("eval: suite %s has no scripted model (\"script\" in suite.json); name a configured model with --model", suite.Name))
	}
	if modelName == evalModelScripted {
		if _, err := scripted.Load(filepath.Join(suite.Dir, filepath.FromSlash(suite.Script))); err != nil {
			return nil, RequestError(fmt.Sprintf("eval: suite %s: its script: %v", suite.Name, err))
		}
	}
	hash, err := hashDir(suite.Dir)
	if err != nil {
		return nil, err
	}
	sb := "bwrap"
	if !s.sandbox.Available {
		sb = "none: " + s.sandbox.Reason + " — the agent could read the suite's hidden checks and your repository"
	}
	run := &eval.Run{
		Sandbox: sb,
		ID:      time.Now().UTC().Format("20060102-150405") + "-" + newID()[:6], Repo: ws.Root,
		Suite: suite.Name, SuiteDir: suite.Dir, SuiteHash: hash, Split: req.Split, Tags: req.Tags,
		Tasks: tasks, Repeat: req.Repeat, Parallel: req.Parallel, Model: modelName,
		HarnessRef: req.Harness, Harness: pins, Label: req.Label, Status: eval.RunRunning,
		Created: time.Now().UTC(),
	}
	if err := store.Save(run); err != nil {
		return nil, err
	}
	if err := s.indexEval(run.ID, store.Dir()); err != nil {
		return nil, err
	}
	if err := s.launchEval(run, store, suite, ws); err != nil {
		return nil, err
	}
	return run, nil
}

// loadSuite loads the suite named by arg: a directory (relative to dir), or a built-in suite,
// extracted once per version into the results directory.
func (s *Service) loadSuite(ws *Workspace, dir, arg string) (*eval.Suite, error) {
	p := arg
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		return eval.Load(p)
	}
	fsys, ok := eval.Builtin(arg)
	if !ok {
		return nil, fmt.Errorf("eval: no suite %q: not a directory (from %s) and not a built-in suite (%s)", arg, dir, strings.Join(eval.BuiltinNames(), ", "))
	}
	h, err := hashFS(fsys)
	if err != nil {
		return nil, err
	}
	out := filepath.Join(s.opts.StateDir, "eval", "suites", arg+"-"+h[:12])
	if _, err := os.Stat(filepath.Join(out, "suite.json")); err != nil {
		tmp := out + ".tmp-" + newID()[:6]
		if err := eval.Extract(arg, tmp); err != nil {
			os.RemoveAll(tmp)
			return nil, fmt.Errorf("eval: extract the built-in suite %s: %w", arg, err)
		}
		if err := os.Rename(tmp, out); err != nil && !errors.Is(err, fs.ErrExist) {
			os.RemoveAll(tmp)
			if _, serr := os.Stat(filepath.Join(out, "suite.json")); serr != nil {
				return nil, fmt.Errorf("eval: extract the built-in suite %s: %w", arg, err)
			}
		}
		os.RemoveAll(tmp)
	}
	return eval.Load(out)
}

var revPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/^~-]*$`)

// evalPins resolves what a run measures to a commit per shared scope. The session scope is not
// pinned: it is each task's own, empty at the start, and the agent's notes to itself apply as
// in any session.
func (s *Service) evalPins(ctx context.Context, ws *Workspace, ref string) (map[string]string, error) {
	pins := map[string]string{}
	for _, sc := range []harness.Scope{harness.ScopeWorkspace, harness.ScopeGlobal} {
		st, err := s.HarnessStore(ctx, ws.Root, sc, "")
		if err != nil {
			return nil, err
		}
		head, err := st.Head(ctx)
		if err != nil {
			return nil, err
		}
		pins[string(sc)] = head
	}
	if ref == "" {
		return pins, nil
	}
	scope, rev := harness.ScopeWorkspace, ref
	if a, b, ok := strings.Cut(ref, ":"); ok {
		sc, err := harness.ParseScope(a)
		if err != nil || sc == harness.ScopeSession {
			return nil, RequestError(fmt.Sprintf("eval: harness %q: want REV, workspace:REV or global:REV", ref))
		}
		scope, rev = sc, b
	}
	if harness.CheckProposalID(rev) == nil {
		if st, p, err := s.findProposal(ctx, ws.Root, rev); err == nil {
			if p.Scope == harness.ScopeSession {
				return nil, RequestError(fmt.Sprintf("eval: proposal %s is for a session's own scope; eval measures the workspace and global harness", rev))
			}
			// Its edits on the scope as it is now, as applying it would make it.
			c, err := st.Preview(ctx, p)
			if err != nil {
				return nil, RequestError(fmt.Sprintf("eval: proposal %s: %v", rev, err))
			}
			pins[string(p.Scope)] = c
			return pins, nil
		}
	}
	if !revPattern.MatchString(rev) {
		return nil, RequestError(fmt.Sprintf("eval: harness %q is not a commit or a proposal id", ref))
	}
	st, err := s.HarnessStore(ctx, ws.Root, scope, "")
	if err != nil {
		return nil, err
	}
	commit, err := st.Resolve(ctx, rev)
	if err != nil {
		return nil, RequestError("eval: " + err.Error() + "; `arbor harness history` lists the versions")
	}
	pins[string(scope)] = commit
	return pins, nil
}

// indexEval notes a running run in the state directory, so a restart finds it.
func (s *Service) indexEval(id, storeDir string) error {
	dir := filepath.Join(s.opts.StateDir, "eval", "running")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, id), []byte(storeDir))
}

func (s *Service) unindexEval(id string) {
	os.Remove(filepath.Join(s.opts.StateDir, "eval", "running", id))
}

func (s *Service) launchEval(run *eval.Run, store *eval.Store, suite *eval.Suite, ws *Workspace) error {
	ctx, cancel := context.WithCancel(s.ctx)
	er := &evalRunner{run: run, store: store, suite: suite, ws: ws, cancel: cancel,
		done: make(chan struct{}), active: map[string]string{}, checked: map[string]string{}}
	s.mu.Lock()
	if s.evals.runs == nil {
		s.evals.runs = map[string]*evalRunner{}
		s.evals.fixtures = map[string]evalFixture{}
	}
	s.evals.runs[run.ID] = er
	s.mu.Unlock()
	if !s.spawn(func() { s.runEval(ctx, er) }) {
		cancel()
		return errors.New("eval: the daemon is stopping")
	}
	return nil
}

// resumeEvals goes on with the runs a previous daemon left running.
func (s *Service) resumeEvals(ctx context.Context) {
	dir := filepath.Join(s.opts.StateDir, "eval", "running")
	des, _ := os.ReadDir(dir)
	for _, d := range des {
		b, err := os.ReadFile(filepath.Join(dir, d.Name()))
		if err != nil {
			continue
		}
		store, err := eval.OpenStore(string(b))
		if err != nil {
			s.log.Warn("eval: resume", "run", d.Name(), "err", err)
			continue
		}
		run, err := store.Load(d.Name())
		if err != nil || run.Status != eval.RunRunning {
			s.unindexEval(d.Name())
			continue
		}
		ws, err := s.workspaceFor(run.Repo)
		if err != nil {
			s.log.Warn("eval: resume: the repository is gone; the run ends", "run", run.ID, "err", err)
			run.Status, run.Ended = eval.RunStopped, time.Now().UTC()
			store.Save(run)
			s.unindexEval(run.ID)
			continue
		}
		suite, err := eval.Load(run.SuiteDir)
		if err != nil {
			s.log.Warn("eval: resume: the suite is gone; the run ends", "run", run.ID, "err", err)
			run.Status, run.Ended = eval.RunStopped, time.Now().UTC()
			store.Save(run)
			s.unindexEval(run.ID)
			continue
		}
		s.log.Info("eval: resuming a run the daemon left", "run", run.ID)
		if err := s.launchEval(run, store, suite, ws); err != nil {
			s.log.Warn("eval: resume", "run", run.ID, "err", err)
		}
	}
}

// StopEval stops a running run: the task runs in flight are stopped and recorded as errored,
// the rest are not run.
func (s *Service) StopEval(dir, id string) (*eval.Run, error) {
	store, _, err := s.EvalStore(dir)
	if err != nil {
		return nil, err
	}
	run, err := store.Load(id)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	er := s.evals.runs[run.ID]
	s.mu.Unlock()
	if er == nil {
		return run, nil
	}
	er.mu.Lock()
	er.run.Status = eval.RunStopped
	er.mu.Unlock()
	er.cancel()
	<-er.done
	return store.Load(run.ID)
}

// WaitEval waits until run id has ended (or ctx).
func (s *Service) WaitEval(ctx context.Context, id string) error {
	s.mu.Lock()
	er := s.evals.runs[id]
	s.mu.Unlock()
	if er == nil {
		return nil
	}
	select {
	case <-er.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// EvalRunning reports whether run id is in progress in this daemon.
func (s *Service) EvalRunning(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.evals.runs[id] != nil
}

type evalJob struct {
	task   *eval.Task
	repeat int
}

func (s *Service) runEval(ctx context.Context, er *evalRunner) {
	run := er.run
	defer func() {
		s.mu.Lock()
		delete(s.evals.runs, run.ID)
		s.mu.Unlock()
		close(er.done)
	}()
	ov := s.opts.Overrides
	if run.Model == evalModelScripted {
		sc, err := scripted.Load(filepath.Join(er.suite.Dir, filepath.FromSlash(er.suite.Script)))
		if err != nil {
			s.finishEval(er, fmt.Sprintf("the suite's script: %v", err))
			return
		}
		sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		url, wait, err := scripted.Serve(sctx, "127.0.0.1:0", sc, s.log)
		if err != nil {
			stop()
			s.finishEval(er, fmt.Sprintf("start the suite's scripted model: %v", err))
			return
		}
		defer func() { stop(); wait() }()
		ov.ModelBaseURL, ov.Model = url, evalModelScripted
	}
	er.ov = ov
	done, err := er.store.Results(run.ID)
	if err != nil {
		s.finishEval(er, err.Error())
		return
	}
	have := map[string]bool{}
	for _, r := range done {
		have[eval.Key(r.Task, r.Repeat)] = true
	}
	// A task run a restart cut short: its session is stopped and it runs again.
	started, _ := er.store.StartedRuns(run.ID)
	for k, st := range started {
		if have[k] {
			continue
		}
		if sess, err := s.Get(st.Session); err == nil {
			s.Stop(ctx, sess.meta.ID)
			s.dropWorkspace(sess.ws.Root)
		}
		s.log.Info("eval: a task run the restart interrupted runs again", "run", run.ID, "task", k)
	}
	var jobs []evalJob
	for k := 1; k <= run.Repeat; k++ {
		for _, id := range run.Tasks {
			if t := er.suite.Tasks[id]; t != nil && !have[eval.Key(id, k)] {
				jobs = append(jobs, evalJob{t, k})
			}
		}
	}
	ch := make(chan evalJob)
	var wg sync.WaitGroup
	for i := 0; i < run.Parallel; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				r, ok := s.evalTask(ctx, er, j.task, j.repeat)
				if !ok {
					continue // the run was stopped or the daemon is stopping: nothing to record
				}
				if err := er.store.Append(run.ID, r); err != nil {
					s.log.Error("eval: record a result", "run", run.ID, "task", j.task.ID, "err", err)
				}
			}
		}()
	}
feed:
	for _, j := range jobs {
		select {
		case ch <- j:
		case <-ctx.Done():
			break feed
		}
	}
	close(ch)
	wg.Wait()
	if ctx.Err() != nil && s.ctx.Err() != nil {
		return // the daemon is stopping: the run resumes at its next start
	}
	s.finishEval(er, "")
}

func (s *Service) finishEval(er *evalRunner, why string) {
	er.mu.Lock()
	if er.run.Status == eval.RunRunning {
		er.run.Status = eval.RunDone
	}
	if why != "" {
		er.run.Status = eval.RunStopped
		er.run.Label = strings.TrimSpace(er.run.Label + " (ended: " + why + ")")
	}
	er.run.Ended = time.Now().UTC()
	run := *er.run
	er.mu.Unlock()
	if err := er.store.Save(&run); err != nil {
		s.log.Error("eval: save the run", "run", run.ID, "err", err)
	}
	s.unindexEval(run.ID)
}

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
	if err := s.makeFixture(ctx, er, t, fixture); err != nil {
		if ctx.Err() != nil {
			return r, false
		}
		return errored("the fixture did not set up: %v", err)
	}
	s.mu.Lock()
	// Hidden besides: the measured repository, the suite, the results, and every other
	// fixture (other tasks', earlier repeats' solutions and logs) with the extracted suites.
	s.evals.fixtures[fixture] = evalFixture{ov: er.ov, hide: []string{run.Repo, er.suite.Dir, er.store.Dir(), filepath.Join(s.opts.StateDir, "eval")}}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.evals.fixtures, fixture)
		s.mu.Unlock()
	}()
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
		CostUSD: in.Total.CostUSD, ModelCalls: in.Total.ModelCalls, CachedInputTokens: in.Total.CachedInputTokens}
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
	c := s.evalCheck(ctx, sess, t, head)
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
	c := s.evalCheck(ctx, sess, t, sess.meta.BaseCommit)
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
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir, "-c", "user.name=arbor eval", "-c", "user.email=eval@arbor.invalid", "-c", "commit.gpgsign=false"}, args...)...)
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
		sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(sctx, "sh", "-c", t.Setup)
		cmd.Dir = dir
		// The environment kernels get (no API keys), and a child left holding the output does
		// not hold the task: the wait ends 5 s after the shell does.
		cmd.Env = sandbox.Env(nil, nil)
		cmd.WaitDelay = 5 * time.Second
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("setup %q: %v: %s", t.Setup, err, tail(strings.TrimSpace(string(out)), 2000))
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

// evalCheck runs the task's hidden check on a clean checkout of head with the check's files
// laid over it, in the session's sandbox, bounded by the check's timeout.
func (s *Service) evalCheck(ctx context.Context, sess *Session, t *eval.Task, head string) *eval.Check {
	c := &eval.Check{Command: t.Check, Commit: head}
	start := time.Now()
	defer func() { c.DurationMs = time.Since(start).Milliseconds() }()
	dir := filepath.Join(sess.dir, "check")
	os.RemoveAll(dir)
	if out, err := sess.gitMain(ctx, "worktree", "add", "--detach", "--quiet", dir, head); err != nil {
		c.Error = fmt.Sprintf("clean checkout of %s: %v: %s", short(head), err, out)
		return c
	}
	defer func() {
		sess.gitMain(context.WithoutCancel(ctx), "worktree", "remove", "--force", dir)
		os.RemoveAll(dir)
	}()
	for _, f := range t.CheckFiles {
		if err := layFile(dir, f, filepath.Join(t.Dir, "check", filepath.FromSlash(f))); err != nil {
			c.Error = "lay the check's file " + f + ": " + err.Error()
			return c
		}
	}
	cctx, cancel := context.WithTimeout(ctx, time.Duration(t.CheckTimeout))
	defer cancel()
	res := sess.runCommand(cctx, dir, t.Check, []string{"ARBOR_EVAL_TASK=" + t.ID})
	c.Passed, c.ExitCode, c.TimedOut, c.Output, c.Error = res.passed, res.exitCode, res.timedOut, res.output, res.err
	return c
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

// copyTree copies the regular files and directories under from into to (which may exist).
func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
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

// hashDir hashes every file's path and content under dir.
func hashDir(dir string) (string, error) {
	return hashFS(os.DirFS(dir))
}

func hashFS(fsys fs.FS) (string, error) {
	var paths []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			paths = append(paths, p)
		}
		return err
	})
	if err != nil {
		return "", err
	}
	sort.Strings(paths)
	h := sha256.New()
	for _, p := range paths {
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// dropWorkspace forgets a finished eval fixture: its stopped sessions and its place in the
// workspace registry (the fixture stays on disk, its branch for a look).
func (s *Service) dropWorkspace(root string) {
	s.mu.Lock()
	var of []*Session
	for _, sess := range s.sessions {
		if sess.ws.Root == root {
			of = append(of, sess)
		}
	}
	s.mu.Unlock()
	var gone []*Session
	for _, sess := range of { // a session's lock is taken without the service's (lock order)
		if sess.State() == Stopped {
			gone = append(gone, sess)
		}
	}
	s.mu.Lock()
	for _, sess := range gone {
		delete(s.sessions, sess.meta.ID)
	}
	delete(s.workspaces, root)
	s.mu.Unlock()
	for _, sess := range gone {
		// A stopped turn may still be writing its last records: its log closes once the
		// turn let go of the session.
		for i := 0; i < 200; i++ {
			sess.mu.Lock()
			h := sess.holder
			sess.mu.Unlock()
			if h == free {
				break
			}
			time.Sleep(25 * time.Millisecond)
		}
		sess.stopIdleTimer()
		sess.shutdown(context.Background()) // its file watch and log with it
	}
	if err := s.unregister(root); err != nil {
		s.log.Warn("eval: forget a fixture", "root", root, "err", err)
	}
}

// EvalSummary reports run id of the repository containing dir.
func (s *Service) EvalSummary(dir, id string) (*eval.Report, error) {
	store, _, err := s.EvalStore(dir)
	if err != nil {
		return nil, err
	}
	run, err := store.Load(id)
	if err != nil {
		return nil, RequestError(err.Error())
	}
	rs, err := store.Results(run.ID)
	if err != nil {
		return nil, err
	}
	return eval.Summarize(run, rs), nil
}

// EvalRuns lists the runs of the repository containing dir, oldest first.
func (s *Service) EvalRuns(dir string) ([]*eval.Run, error) {
	store, _, err := s.EvalStore(dir)
	if err != nil {
		return nil, err
	}
	return store.List()
}

// EvalCompare pairs runs a and b of the repository containing dir.
func (s *Service) EvalCompare(dir, a, b string) (*eval.Comparison, error) {
	sa, err := s.EvalSummary(dir, a)
	if err != nil {
		return nil, err
	}
	sb, err := s.EvalSummary(dir, b)
	if err != nil {
		return nil, err
	}
	return eval.Compare(sa, sb), nil
}
