package tokenbench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/arborhq/arbor/agents"
	"github.com/arborhq/arbor/agents/eval"
	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/eventlog"
	"github.com/arborhq/arbor/agents/model"
	"github.com/arborhq/arbor/agents/model/scripted"
	"github.com/arborhq/arbor/bench"
	"github.com/arborhq/arbor/workspace"
)

// SuiteResult is the built-in example suite's measurement: each task's requests, the first of
// each session marked (no earlier request of its session can share a prefix with it).
type SuiteResult struct {
	Tasks    int
	Requests []Request // AfterCompaction marks the first request of a session
	Naive    []Request
}

// benchModel is the configured model name the suite's script is served under here, so the
// benchmark sees every request the eval's sessions make.
const benchModel = "bench-scripted"

// MeasureSuite runs every task of the built-in example suite once through `arbor eval`'s
// runner, its script served by a scripted model that records each request, and replays each
// session's requests naively beside it.
func MeasureSuite(ctx context.Context, o Options) (*SuiteResult, error) {
	o = o.withDefaults()
	dir, err := os.MkdirTemp("", "arbor-tokenbench-suite-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "suite")
	if err := eval.Extract("example", src); err != nil {
		return nil, err
	}
	s, err := scripted.Load(filepath.Join(src, "script.json"))
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	systems := map[string]string{} // first user message (the task's prompt) → system prompt
	s.Observe(func(r scripted.Request) {
		mu.Lock()
		if _, ok := systems[r.Task]; !ok {
			systems[r.Task] = r.System
		}
		mu.Unlock()
	})
	url, closeModel, err := serve(ctx, s, o.Logger)
	if err != nil {
		return nil, err
	}
	defer closeModel()
	repo := filepath.Join(dir, "repo")
	if out, err := exec.CommandContext(ctx, "git", "init", "-q", "-b", "main", repo).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("git init: %v: %s", err, out)
	}
	svc, err := agents.New(agents.Options{StateDir: filepath.Join(dir, "state"), Logger: o.Logger,
		Overrides: workspace.Overrides{ModelBaseURL: url, Model: benchModel, KernelPython: o.KernelPython}})
	if err != nil {
		return nil, err
	}
	defer svc.Close(context.WithoutCancel(ctx))
	run, err := svc.StartEval(ctx, agents.EvalRequest{Dir: repo, Suite: src, Model: benchModel, Repeat: 1, Parallel: 2})
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	if err := svc.WaitEval(wctx, run.ID); err != nil {
		return nil, err
	}
	rep, err := svc.EvalSummary(repo, run.ID)
	if err != nil {
		return nil, err
	}
	if rep.Errored > 0 || rep.Runs != len(run.Tasks) {
		return nil, fmt.Errorf("the example suite ran %d of %d tasks, %d errored", rep.Runs, len(run.Tasks), rep.Errored)
	}
	res := &SuiteResult{Tasks: rep.Runs}
	for _, r := range rep.Results {
		recs, err := eventlog.ReadFile(filepath.Join(r.Fixture, ".git", "arbor", "sessions", r.Session, "events.jsonl"))
		if err != nil {
			return nil, err
		}
		hist, calls, err := history(recs)
		if err != nil {
			return nil, err
		}
		first := true
		for _, u := range usages(recs) {
			res.Requests = append(res.Requests, Request{Input: u.InputTokens, Cached: u.CachedInputTokens, AfterCompaction: first})
			first = false
		}
		mu.Lock()
		system := systems[firstUser(hist)]
		mu.Unlock()
		naiveReqs, err := naive(ctx, system, hist, calls, o.Logger)
		if err != nil {
			return nil, err
		}
		for i := range naiveReqs {
			naiveReqs[i].AfterCompaction = i == 0
		}
		res.Naive = append(res.Naive, naiveReqs...)
	}
	return res, nil
}

func (r *SuiteResult) figures(rep *bench.Report) {
	at := fmt.Sprintf("example suite (%d tasks)", r.Tasks)
	rep.Add(bench.Figure{Name: at + ": input tokens per request, mean", Value: Mean(r.Requests), Unit: "tokens",
		Reference: naiveRef, RefValue: Mean(r.Naive), Note: fmt.Sprintf("%d requests; no task compacts", len(r.Requests))})
	stable := StableFraction(r.Requests)
	rep.Add(bench.Figure{Name: at + ": stable-prefix fraction of input tokens after each session's first request", Value: stable, Unit: "",
		Reference: naiveRef, RefValue: StableFraction(r.Naive), Goal: fmt.Sprintf(">= %.1f", goalStable), Note: verdict(stable >= goalStable)})
}

// usages are the token counts of a session's replies, in order.
func usages(recs []eventlog.Record) []event.TokenUsage {
	var out []event.TokenUsage
	for _, r := range recs {
		if p, err := event.Decode(event.Type(r.Type), r.Data); err == nil {
			if d, ok := p.(event.AssistantMessage); ok {
				out = append(out, d.Usage)
			}
		}
	}
	return out
}

func firstUser(hist []model.Message) string {
	for _, m := range hist {
		if m.Role == model.RoleUser {
			return m.Content
		}
	}
	return ""
}
