// Package tokenbench measures what a long session costs in input tokens, for
// `arbor bench tokens`: a recorded trajectory of cells (reading files, grepping, running tests,
// editing, diffing; see trajectory.go) replayed through the real turn loop — a real Service
// and Session, real kernels, the scripted model over HTTP — in a small context window, so the
// session compacts several times.
//
// Beside it, measured in the same run, is a naive full-history replay: the same trajectory's
// requests rebuilt from the session's log with the whole history and no compaction, sent
// through the same model client to a scripted model of their own. The figures are input
// tokens per request (the mean, and at the last turn), the stable-prefix fraction (the share
// of input tokens outside compactions that repeat the previous request of the conversation
// byte for byte: what a provider's prompt cache reuses, as the scripted model measures it), and
// compactions per 20% of the window consumed.
//
// Call [Run]; [Measure] runs one window and returns the raw counts.
package tokenbench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/arborhq/arbor/agents"
	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/eventlog"
	"github.com/arborhq/arbor/agents/model"
	"github.com/arborhq/arbor/agents/model/scripted"
	"github.com/arborhq/arbor/bench"
	"github.com/arborhq/arbor/workspace"
)

// Options size the run.
type Options struct {
	Turns   int   // cells of the trajectory, one model call each, then a final answer (default 200)
	Windows []int // context windows, in tokens, each a run of its own (default 8000 and 2000)
	// SkipSuite leaves out the example suite's figures (its twelve tasks run through `arbor
	// eval`'s runner).
	SkipSuite bool
	// KernelPython is the kernels' interpreter ("" finds one).
	KernelPython string
	Logger       *slog.Logger
}

// Goals of the issue, checked for each window.
const (
	goalStable      = 0.9 // stable-prefix fraction of input tokens outside compactions, at least
	goalCompactions = 1.0 // compactions per 20% of the window consumed, at most
	goalRatio       = 0.6 // input tokens per request at the last turn, against the naive replay, at most
)

// Result is one window's raw measurement.
type Result struct {
	Window, Turns int
	// Requests are the session's model calls for its task, in order (the compaction calls
	// apart): Input and Cached are the prompt and cached tokens the model reported;
	// AfterCompaction marks a request whose prefix a compaction just replaced.
	Requests []Request
	// Compactions counts compaction calls; CompactionInput their input tokens.
	Compactions     int
	CompactionInput int64
	// Naive is the naive replay's requests, one per request of the session.
	Naive []Request
	// Usage is the session's own accounting, to check against the model's counts.
	Usage agents.Usage
}

// Request is one model request's token counts.
type Request struct {
	Input, Cached   int64
	Chars           int // what Input counts, in characters
	AfterCompaction bool
}

// StableFraction is the share of input tokens outside compactions that repeat the previous
// request: Σ cached ÷ Σ input over requests no compaction just replaced.
func StableFraction(reqs []Request) float64 {
	var in, cached int64
	for _, r := range reqs {
		if r.AfterCompaction {
			continue
		}
		in += r.Input
		cached += r.Cached
	}
	if in == 0 {
		return 0
	}
	return float64(cached) / float64(in)
}

// Mean is the mean input tokens per request.
func Mean(reqs []Request) float64 {
	if len(reqs) == 0 {
		return 0
	}
	var n int64
	for _, r := range reqs {
		n += r.Input
	}
	return float64(n) / float64(len(reqs))
}

// Consumed is how many tokens the conversation grew by over the run: the naive replay's last
// request less its first (the naive replay only ever appends).
func (r *Result) Consumed() int64 {
	if len(r.Naive) == 0 {
		return 0
	}
	return r.Naive[len(r.Naive)-1].Input - r.Naive[0].Input
}

// CompactionsPer20 is compactions per 20% of the window consumed.
func (r *Result) CompactionsPer20() float64 {
	c := r.Consumed()
	if c <= 0 {
		return 0
	}
	return float64(r.Compactions) / (float64(c) / (0.2 * float64(r.Window)))
}

// Run measures each window and returns the report.
func Run(ctx context.Context, o Options) (*bench.Report, error) {
	o = o.withDefaults()
	rep := &bench.Report{Suite: "tokens"}
	for _, w := range o.Windows {
		res, err := Measure(ctx, w, o)
		if err != nil {
			return nil, fmt.Errorf("window %d: %w", w, err)
		}
		res.figures(rep)
	}
	if !o.SkipSuite {
		res, err := MeasureSuite(ctx, o)
		if err != nil {
			return nil, fmt.Errorf("example suite: %w", err)
		}
		res.figures(rep)
	}
	return rep, rep.Validate()
}

func (o Options) withDefaults() Options {
	if o.Turns <= 0 {
		o.Turns = 200
	}
	if len(o.Windows) == 0 {
		o.Windows = []int{8000, 2000}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

const naiveRef = "naive full-history replay"

func (r *Result) figures(rep *bench.Report) {
	at := fmt.Sprintf("%d-token window", r.Window)
	last, naiveLast := r.Requests[r.Turns-1], r.Naive[r.Turns-1]
	rep.Add(bench.Figure{Name: at + ": input tokens per request, mean", Value: Mean(r.Requests), Unit: "tokens",
		Reference: naiveRef, RefValue: Mean(r.Naive), Note: fmt.Sprintf("%d requests", len(r.Requests))})
	ratio := float64(last.Input) / float64(naiveLast.Input)
	rep.Add(bench.Figure{Name: fmt.Sprintf("%s: input tokens per request at turn %d", at, r.Turns), Value: float64(last.Input), Unit: "tokens",
		Reference: naiveRef, RefValue: float64(naiveLast.Input), Goal: fmt.Sprintf("ratio <= %.1f", goalRatio), Note: verdict(ratio <= goalRatio)})
	stable := StableFraction(r.Requests)
	rep.Add(bench.Figure{Name: at + ": stable-prefix fraction of input tokens outside compactions", Value: stable, Unit: "",
		Reference: naiveRef, RefValue: StableFraction(r.Naive), Goal: fmt.Sprintf(">= %.1f", goalStable), Note: verdict(stable >= goalStable)})
	per := r.CompactionsPer20()
	rep.Add(bench.Figure{Name: at + ": compactions per 20% of the window consumed", Value: per, Unit: "",
		Goal: fmt.Sprintf("<= %.0f", goalCompactions),
		Note: fmt.Sprintf("%s; %d compactions as the conversation grew by %d tokens", verdict(per <= goalCompactions), r.Compactions, r.Consumed())})
	var total, naiveTotal int64
	for _, q := range r.Requests {
		total += q.Input
	}
	for _, q := range r.Naive {
		naiveTotal += q.Input
	}
	rep.Add(bench.Figure{Name: at + ": input tokens of the whole run, compaction calls included", Value: float64(total + r.CompactionInput), Unit: "tokens",
		Reference: naiveRef, RefValue: float64(naiveTotal)})
}

func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// Measure replays the trajectory in a context window of window tokens, then the naive replay
// of its requests, and returns both.
func Measure(ctx context.Context, window int, o Options) (*Result, error) {
	o = o.withDefaults()
	dir, err := os.MkdirTemp("", "arbor-tokenbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	src, err := script(o.Turns)
	if err != nil {
		return nil, err
	}
	s, err := scripted.Parse(src, "tokens trajectory")
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var seen []scripted.Request
	s.Observe(func(r scripted.Request) {
		r.Messages = nil // the log has them; keep the counts only
		mu.Lock()
		seen = append(seen, r)
		mu.Unlock()
	})
	url, closeModel, err := serve(ctx, s, o.Logger)
	if err != nil {
		return nil, err
	}
	defer closeModel()

	repo := filepath.Join(dir, "repo")
	cfg := fmt.Sprintf(`{"maxTurnSteps":%d,"models":{"scripted":{"contextWindow":%d}}}`, o.Turns+5, window)
	if err := fixture(repo, cfg); err != nil {
		return nil, err
	}
	svc, err := agents.New(agents.Options{StateDir: filepath.Join(dir, "state"), Logger: o.Logger,
		Overrides: workspace.Overrides{ModelBaseURL: url, Model: "scripted", KernelPython: o.KernelPython}})
	if err != nil {
		return nil, err
	}
	defer svc.Close(context.WithoutCancel(ctx))
	sess, err := svc.Create(ctx, agents.CreateRequest{Task: taskText, Dir: repo})
	if err != nil {
		return nil, err
	}
	info, err := settle(ctx, svc, sess)
	if err != nil {
		return nil, err
	}
	recs, err := sess.Events(0)
	if err != nil {
		return nil, err
	}
	hist, calls, err := history(recs)
	if err != nil {
		return nil, err
	}
	if len(calls) != o.Turns+1 {
		return nil, fmt.Errorf("the session made %d model calls for its task, want %d (%d cells and the answer); state %v %s",
			len(calls), o.Turns+1, o.Turns, info.State, info.Error)
	}
	mu.Lock()
	reqs := append([]scripted.Request(nil), seen...)
	mu.Unlock()
	res := &Result{Window: window, Turns: o.Turns, Usage: info.Usage}
	system := ""
	compacted := false
	for _, r := range reqs {
		if strings.HasPrefix(r.System, summaryPrefix) {
			res.Compactions++
			res.CompactionInput += int64(r.PromptTokens)
			compacted = true
			continue
		}
		if system == "" {
			system = r.System
		}
		res.Requests = append(res.Requests, Request{Input: int64(r.PromptTokens), Cached: int64(r.CachedTokens), Chars: r.Chars, AfterCompaction: compacted})
		compacted = false
	}
	if len(res.Requests) != len(calls) {
		return nil, fmt.Errorf("the model saw %d requests for the task, the log records %d replies", len(res.Requests), len(calls))
	}
	if res.Naive, err = naive(ctx, system, hist, calls, o.Logger); err != nil {
		return nil, fmt.Errorf("naive replay: %w", err)
	}
	return res, nil
}

// settle waits until the session has finished its task.
func settle(ctx context.Context, svc *agents.Service, sess *agents.Session) (agents.Info, error) {
	deadline := time.Now().Add(20 * time.Minute)
	for {
		time.Sleep(50 * time.Millisecond)
		in := svc.Info(sess)
		switch in.State {
		case agents.Failed, agents.Stopped:
			return in, fmt.Errorf("session %v: %s", in.State, in.Error)
		case agents.Idle, agents.Inactive:
			return in, nil
		}
		if ctx.Err() != nil {
			return in, ctx.Err()
		}
		if time.Now().After(deadline) {
			return in, errors.New("the session did not finish in 20 minutes")
		}
	}
}

// history rebuilds the session's whole conversation from its log, as replay does but without
// compactions, and where in it each model call of the task was made: calls[k] is how many
// messages preceded the k-th reply.
func history(recs []eventlog.Record) ([]model.Message, []int, error) {
	var msgs []model.Message
	var calls []int
	for _, r := range recs {
		p, err := event.Decode(event.Type(r.Type), r.Data)
		if err != nil {
			continue // types this replay does not need
		}
		switch d := p.(type) {
		case event.UserMessage:
			if d.Via != "inbox" {
				msgs = append(msgs, model.Message{Role: model.RoleUser, Content: d.Text})
			}
		case event.AssistantMessage:
			calls = append(calls, len(msgs))
			var tcs []model.ToolCall
			for _, c := range d.ToolCalls {
				tcs = append(tcs, model.ToolCall{ID: c.ID, Code: c.Code})
			}
			msgs = append(msgs, model.Message{Role: model.RoleAssistant, Content: d.Text, ToolCalls: tcs})
		case event.ToolFinished:
			msgs = append(msgs, model.Message{Role: model.RoleTool, ToolCallID: d.CallID, Content: d.Output})
		}
	}
	if len(calls) == 0 {
		return nil, nil, errors.New("the log records no model reply")
	}
	return msgs, calls, nil
}

// naive sends, for each model call of the session, the request it would have made with the
// whole history, to a scripted model of its own through the same client, and returns what
// that model counted.
func naive(ctx context.Context, system string, hist []model.Message, calls []int, logger *slog.Logger) ([]Request, error) {
	s, err := scripted.Parse([]byte(`{"default":{"text":"ok"}}`), "naive replay")
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var seen []scripted.Request
	s.Observe(func(r scripted.Request) {
		r.Messages = nil
		mu.Lock()
		seen = append(seen, r)
		mu.Unlock()
	})
	url, closeModel, err := serve(ctx, s, logger)
	if err != nil {
		return nil, err
	}
	defer closeModel()
	c, err := model.New(model.Config{BaseURL: url, Model: "scripted", ContextWindow: 1 << 30}, logger)
	if err != nil {
		return nil, err
	}
	defer c.CloseIdleConnections()
	var out []Request
	for _, n := range calls {
		reply, err := c.Complete(ctx, model.Request{System: system, Messages: hist[:n]}, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, Request{Input: reply.Usage.InputTokens, Cached: reply.Usage.CachedInputTokens})
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != len(out) {
		return nil, fmt.Errorf("%d requests reached the model, %d were sent", len(seen), len(out))
	}
	for i := range out {
		out[i].Chars = seen[i].Chars
	}
	return out, nil
}

// serve serves script s on a loopback port until the returned func is called (it waits for the
// server to end).
func serve(ctx context.Context, s *scripted.Script, logger *slog.Logger) (string, func(), error) {
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	url, wait, err := scripted.Serve(sctx, "", s, logger)
	if err != nil {
		stop()
		return "", nil, err
	}
	return url, func() { stop(); wait() }, nil
}
