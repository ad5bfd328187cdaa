package agents

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/arborhq/arbor/agents/eval"
	"github.com/arborhq/arbor/agents/harness"
	"github.com/arborhq/arbor/agents/model/scripted"
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
	// gate says an eval gate asked: Model "" is then fallbackModel (the proposing session's), and
	// the suite's script plays the model only where the suite is a test ("test": true).
	gate          bool
	fallbackModel string
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
		return nil, RequestError(fmt.Sprintf("repeat %d: want at least 1 (each task runs that many times)", req.Repeat))
	}
	if req.Parallel == 0 {
		req.Parallel = 1
	}
	if req.Parallel < 1 || req.Parallel > 16 {
		return nil, RequestError(fmt.Sprintf("parallel %d: want 1 to 16 tasks at a time", req.Parallel))
	}
	if strings.TrimSpace(req.Suite) == "" {
		return nil, RequestError("no suite given; name a suite directory or a built-in suite (" + strings.Join(eval.BuiltinNames(), ", ") + ")")
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
	modelName, script := req.Model, false
	switch {
	case req.gate:
		script = modelName == "" && suite.Test && suite.Script != ""
		if modelName == "" && !script {
			modelName = req.fallbackModel
		}
	case modelName == "" && suite.Script != "", modelName == evalModelScripted:
		script = true
	}
	if script {
		modelName = evalModelScripted
	} else {
		cfg, err := ws.config(s.opts.Overrides)
		if err != nil {
			return nil, err
		}
		if modelName, _, err = cfg.ResolveModel(modelName); err != nil {
			var ue *workspace.UntrustedError
			if errors.As(err, &ue) {
				return nil, err // the editors ask for trust on its code
			}
			return nil, RequestError(err.Error())
		}
	}
	if script && suite.Script == "" {
		return nil, RequestError(fmt.Sprintf("suite %s has no scripted model (\"script\" in suite.json); name a configured model with --model", suite.Name))
	}
	if script {
		if _, err := scripted.Load(filepath.Join(suite.Dir, filepath.FromSlash(suite.Script))); err != nil {
			return nil, RequestError(fmt.Sprintf("suite %s: its script: %v", suite.Name, err))
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
		Tasks: tasks, Repeat: req.Repeat, Parallel: req.Parallel, Model: modelName, Script: script,
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
		return nil, fmt.Errorf("no suite %q: not a directory (from %s) and not a built-in suite (%s)", arg, dir, strings.Join(eval.BuiltinNames(), ", "))
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
			return nil, fmt.Errorf("extract the built-in suite %s: %w", arg, err)
		}
		if err := os.Rename(tmp, out); err != nil && !errors.Is(err, fs.ErrExist) {
			os.RemoveAll(tmp)
			if _, serr := os.Stat(filepath.Join(out, "suite.json")); serr != nil {
				return nil, fmt.Errorf("extract the built-in suite %s: %w", arg, err)
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
			return nil, RequestError(fmt.Sprintf("harness %q: want REV, workspace:REV or global:REV", ref))
		}
		scope, rev = sc, b
	}
	if harness.CheckProposalID(rev) == nil {
		if st, p, err := s.findProposal(ctx, ws.Root, rev); err == nil {
			if p.Scope == harness.ScopeSession {
				return nil, RequestError(fmt.Sprintf("proposal %s is for a session's own scope; eval measures the workspace and global harness", rev))
			}
			// Its edits on the scope as it is now, as applying it would make it.
			c, err := st.Preview(ctx, p)
			if err != nil {
				return nil, RequestError(fmt.Sprintf("proposal %s: %v", rev, err))
			}
			pins[string(p.Scope)] = c
			return pins, nil
		}
	}
	if !revPattern.MatchString(rev) {
		return nil, RequestError(fmt.Sprintf("harness %q is not a commit or a proposal id", ref))
	}
	st, err := s.HarnessStore(ctx, ws.Root, scope, "")
	if err != nil {
		return nil, err
	}
	commit, err := st.Resolve(ctx, rev)
	if err != nil {
		return nil, RequestError(err.Error() + "; `arbor harness history` lists the versions")
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
		return errors.New("the daemon is stopping")
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
		if run.Model == evalModelScripted && !run.Script && suite.Script != "" {
			run.Script = true // recorded before runs said so: "scripted" was the suite's script
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
	if run.Script {
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
