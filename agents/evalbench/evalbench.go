// Package evalbench measures `arbor eval` for `arbor bench eval`: what one task run costs — its
// fixture, sandbox, session and judged checks — beside a bare `git clone` of the same fixture
// and its check run as many times, in the same run; and the wall time of an eval gate that
// measures a proposal on the example suite's held-out slice, 6 tasks × 3 repeats per side,
// beside as many bare clones and checks. Sessions run in an in-process agents.Service on the
// example suite's scripted model, so the figures are Arbor's overhead and not a model's.
//
// Call [Run].
package evalbench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/arborhq/arbor/agents"
	"github.com/arborhq/arbor/agents/eval"
	"github.com/arborhq/arbor/agents/harness"
	"github.com/arborhq/arbor/agents/model/scripted"
	"github.com/arborhq/arbor/bench"
	"github.com/arborhq/arbor/workspace"
)

// Options size the run.
type Options struct {
	Repeat int      // the gate's runs per task and side (default 3)
	Tags   []string // the slice of the held-out split measured (default: all of it, 6 tasks)
	Logger *slog.Logger
}

// checkRuns is how many times a task run runs its check: once on the fixture as given (it
// must fail there, or the check is unsound) and once, judged, on the agent's work.
const checkRuns = 2

// The proposing session's model: it writes one workspace note, which waits for review.
const script = `{"rules":[
 {"when":{"task":"^propose"},"code":"p = await harness.notes.create('careful', 'careful', body='Check edge cases (empty input, boundaries) before you finish. EVAL-CAREFUL', scope='workspace')\nprint(p['status'])"},
 {"when":{"task":"^propose"},"text":"proposed"}
],"default":{"text":"ok"}}`

// Run measures everything and returns the report.
func Run(ctx context.Context, o Options) (*bench.Report, error) {
	if o.Repeat <= 0 {
		o.Repeat = 3
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	tmp, err := os.MkdirTemp("", "arbor-evalbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	suite := filepath.Join(tmp, "suite")
	if err := eval.ExtractAsTest("example", suite); err != nil {
		return nil, err
	}
	s, err := eval.Load(suite)
	if err != nil {
		return nil, err
	}
	tasks, err := s.Select(eval.HeldOut, o.Tags)
	if err != nil {
		return nil, err
	}
	sc, err := scripted.Parse([]byte(script), "eval bench")
	if err != nil {
		return nil, err
	}
	mctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	url, wait, err := scripted.Serve(mctx, "127.0.0.1:0", sc, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	defer func() { cancel(); wait() }()
	repo := filepath.Join(tmp, "repo")
	if err := bench.GitRepo(repo, ""); err != nil {
		return nil, err
	}
	gate := map[string]any{"harness": map[string]any{"workspace": map[string]any{"policy": "review",
		"eval": map[string]any{"suite": suite, "split": eval.HeldOut, "tags": o.Tags, "repeat": o.Repeat}}}}
	userConfig := filepath.Join(tmp, "config.json")
	data, _ := json.Marshal(gate)
	if err := os.WriteFile(userConfig, data, 0o600); err != nil {
		return nil, err
	}
	svc, err := agents.New(agents.Options{StateDir: filepath.Join(tmp, "state"), Logger: o.Logger,
		Overrides: workspace.Overrides{ModelBaseURL: url, Model: "scripted", UserConfig: userConfig}})
	if err != nil {
		return nil, err
	}
	defer svc.Close(context.WithoutCancel(ctx))

	// The floor: per task, a clone of its fixture and its check, run as a task run runs it.
	var floor []time.Duration
	for _, id := range tasks {
		d, err := bareTask(ctx, filepath.Join(tmp, "bare", id), s.Tasks[id])
		if err != nil {
			return nil, fmt.Errorf("bare clone and check of %s: %w", id, err)
		}
		floor = append(floor, d)
	}
	floorMs, floorSpread := bench.MedianMs(floor)
	rep := &bench.Report{Suite: "eval"}

	run, err := svc.StartEval(ctx, agents.EvalRequest{Dir: repo, Suite: suite, Split: eval.HeldOut, Tags: o.Tags, Repeat: 1, Parallel: 1})
	if err != nil {
		return nil, err
	}
	if err := svc.WaitEval(ctx, run.ID); err != nil {
		return nil, err
	}
	sum, err := svc.EvalSummary(repo, run.ID)
	if err != nil {
		return nil, err
	}
	var walls []time.Duration
	for _, r := range sum.Results {
		if r.Status == eval.Errored {
			return nil, fmt.Errorf("task %s errored: %s", r.Task, r.Error)
		}
		walls = append(walls, time.Duration(r.WallMs)*time.Millisecond)
	}
	ms, spread := bench.MedianMs(walls)
	rep.Add(bench.Figure{Name: "eval task run (fixture, sandbox, session, judged checks): wall p50", Value: ms, Unit: "ms", Spread: spread,
		Reference: fmt.Sprintf("git clone + check ×%d of the same tasks", checkRuns), RefValue: floorMs,
		Note: fmt.Sprintf("%d held-out tasks of the example suite on its scripted model; the floor's spread %s", len(walls), spreadText(floorSpread))})

	// The gate: a proposal accepted by the user under a workspace eval gate.
	sess, err := svc.Create(ctx, agents.CreateRequest{Task: "propose a note", Dir: repo})
	if err != nil {
		return nil, err
	}
	p, err := pendingProposal(ctx, svc, repo, sess)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	q, err := svc.AcceptProposal(ctx, repo, p)
	took := time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("the gated accept: %w", err)
	}
	n := len(tasks) * o.Repeat * 2
	var sumFloor time.Duration
	for _, d := range floor {
		sumFloor += d
	}
	rep.Add(bench.Figure{Name: fmt.Sprintf("eval gate, %d tasks × %d repeats × 2 sides: wall", len(tasks), o.Repeat), Value: float64(took.Milliseconds()), Unit: "ms",
		Reference: fmt.Sprintf("%d bare clones and checks, one after another", n), RefValue: float64((sumFloor * time.Duration(o.Repeat*2)).Milliseconds()),
		Note: fmt.Sprintf("the proposal was %s (%s)", q.Status, firstClause(q.Observed))})
	return rep, nil
}

// pendingProposal waits for the session's workspace proposal and returns its id.
func pendingProposal(ctx context.Context, svc *agents.Service, repo string, sess *agents.Session) (string, error) {
	st, err := svc.HarnessStore(ctx, repo, harness.ScopeWorkspace, "")
	if err != nil {
		return "", err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		ps, err := st.Proposals(ctx, harness.Pending)
		if err != nil {
			return "", err
		}
		if len(ps) > 0 {
			return ps[0].ID, nil
		}
		if st := sess.State(); st == agents.Failed {
			return "", fmt.Errorf("the proposing session failed")
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return "", fmt.Errorf("no proposal from session %s within 2 minutes", sess.ID())
}

// bareTask times what a task run's work would be without Arbor: clone the fixture (a repository
// made of the task's repo/ files beforehand, not timed), put the check's files in, and run the
// check command checkRuns times.
func bareTask(ctx context.Context, dir string, t *eval.Task) (time.Duration, error) {
	src := filepath.Join(dir, "src")
	if err := os.CopyFS(src, os.DirFS(filepath.Join(t.Dir, "repo"))); err != nil {
		return 0, err
	}
	if err := bench.GitRepo(src, ""); err != nil {
		return 0, err
	}
	clone := filepath.Join(dir, "clone")
	start := time.Now()
	if out, err := exec.CommandContext(ctx, "git", "clone", "-q", src, clone).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("git clone: %v %s", err, out)
	}
	if err := os.CopyFS(clone, os.DirFS(filepath.Join(t.Dir, "check"))); err != nil {
		return 0, err
	}
	for range checkRuns {
		c := exec.CommandContext(ctx, "sh", "-c", t.Check)
		c.Dir = clone
		c.Env = append(os.Environ(), "PATH=/usr/bin:/bin")
		c.Run() // the fixture as given fails its check: the time is what counts
	}
	return time.Since(start), nil
}

func spreadText(s *bench.Spread) string {
	if s == nil {
		return "unknown"
	}
	return fmt.Sprintf("%.0f–%.0f ms over %d", s.Min, s.Max, s.Runs)
}

// firstClause is what the gate decided, from its observed effect.
func firstClause(observed string) string {
	if _, after, ok := strings.Cut(observed, " — "); ok {
		return after
	}
	return observed
}
