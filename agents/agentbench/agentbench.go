// Package agentbench measures the agents layer for `arbor bench agents`: spawn latency, the
// warm tool round trip, a 1,000-session tree, the disk budget, and the event log. A middleware
// in front of the scripted model timestamps every model request, so figures are taken where the
// model sees them. The disk-budget figure runs a real `arbor daemon` and drives it through
// package server's client, so its RSS is the daemon's own; the rest run the service in process.
//
// Call [Run].
package agentbench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/arborhq/arbor/agents"
	"github.com/arborhq/arbor/agents/eventlog"
	"github.com/arborhq/arbor/agents/model"
	"github.com/arborhq/arbor/agents/model/scripted"
	"github.com/arborhq/arbor/bench"
	"github.com/arborhq/arbor/gitstate"
	"github.com/arborhq/arbor/gitstate/gitbench"
	"github.com/arborhq/arbor/server"
	"github.com/arborhq/arbor/workspace"
)

// Options size the run.
type Options struct {
	Runs     int // times each measurement is repeated, each in a fresh service; medians are reported (default 5)
	Spawns   int // children spawned per run for the latency figure (default 30)
	Warm     int // warm 1+1 round trips per run (default 50)
	Sessions int // sessions in the scale figure (default 1000)
	Files    int // files in the generated repository the spawn and fork figures run in (default 20,000)
	Forks    int // forks made at once, and one after another, for the fork figure (default 50)
	// Budget is the child sessions of the disk-budget figure, made in the generated
	// repository (default 1000).
	Budget int
	// Only, when set, names the groups to run: spawn, warm, forks, scale, budget, eventlog.
	Only []string
	// Exe is the arbor binary the budget figure runs as a daemon of its own (`arbor bench`
	// passes itself).
	Exe    string
	Logger *slog.Logger
}

// The reference harness's figures, stated in the issue for its own machine. They are shown for
// context only and never divide a figure measured here.
const (
	refStated  = "reference harness, stated in the issue"
	refSpawnMs = 254
	refWarmMs  = 42
)

const script = `{"rules":[
 {"when":{"task":"^spawner","turn":1},"code":"import time, json\nts = []\nfor i in range(N):\n    ts.append(time.time())\n    await rlm(f'child {i} of spawner', name=f'c{i}')\nprint(json.dumps(ts))"},
 {"when":{"task":"^warm"},"code":"1+1"},
 {"when":{"task":"^scale","turn":1},"code":"for i in range(N):\n    await rlm(f'leaf {i} of scale', name=f'l{i}')\nprint('spawned', N)"},
 {"when":{"task":"^(leaf|child)"},"text":"done"}
],"default":{"text":"done"}}`

// recorder timestamps model requests by the conversation's first user message.
type recorder struct {
	next http.Handler
	mu   sync.Mutex
	reqs map[string][]time.Time // task → arrival of each request
	done map[string][]time.Time // task → end of each response
}

var firstUser = regexp.MustCompile(`"role":"user","content":"((?:[^"\\]|\\.)*)"`)

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	now := time.Now()
	body, _ := io.ReadAll(req.Body)
	req.Body = io.NopCloser(bytes.NewReader(body))
	task := ""
	if m := firstUser.FindSubmatch(body); m != nil {
		task = string(m[1])
	}
	r.next.ServeHTTP(w, req)
	end := time.Now()
	r.mu.Lock()
	r.reqs[task] = append(r.reqs[task], now)
	r.done[task] = append(r.done[task], end)
	r.mu.Unlock()
}

func (r *recorder) first(task string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ts := r.reqs[task]
	if len(ts) == 0 {
		return time.Time{}, false
	}
	return ts[0], true
}

// Run measures everything and returns the report.
func Run(ctx context.Context, o Options) (*bench.Report, error) {
	if o.Runs <= 0 {
		o.Runs = 5
	}
	if o.Spawns <= 0 {
		o.Spawns = 30
	}
	if o.Warm <= 0 {
		o.Warm = 50
	}
	if o.Sessions <= 0 {
		o.Sessions = 1000
	}
	if o.Files <= 0 {
		o.Files = 20000
	}
	if o.Forks <= 0 {
		o.Forks = 50
	}
	if o.Budget <= 0 {
		o.Budget = 1000
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	tmp, err := os.MkdirTemp("", "arbor-agentbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	rep := &bench.Report{Suite: "agents"}
	// One generated repository for the run; each measurement works in a clone of it.
	fixture, err := gitbench.Fixture(ctx, filepath.Join(tmp, "fixture"), o.Files)
	if err != nil {
		return nil, fmt.Errorf("agents bench: %w", err)
	}

	var spawn, warm, over [2][]float64 // p50s and p99s, one per run
	var floor []float64
	for i := range o.Runs {
		if !o.runs("spawn") {
			break
		}
		dir := filepath.Join(tmp, fmt.Sprint("spawn-", i))
		p50, p99, err := spawnLatency(ctx, dir, fixture, o)
		os.RemoveAll(dir) // gigabytes of worktrees
		if err != nil {
			return nil, fmt.Errorf("spawn latency: %w", err)
		}
		spawn[0], spawn[1] = append(spawn[0], p50), append(spawn[1], p99)
	}
	if len(spawn[0]) > 0 {
		v, sp := bench.Median(spawn[0])
		rep.Add(bench.Figure{Name: fmt.Sprintf("spawn (%d-file repository): await rlm() → child's first model request p50", o.Files), Value: v, Spread: sp, Unit: "ms",
			Stated: refSpawnMs, StatedBy: refStated, Goal: "<= 100 ms",
			Note: fmt.Sprintf("%d children a run; the first model call waits for neither a kernel nor the worktree's files", o.Spawns)})
		v, sp = bench.Median(spawn[1])
		rep.Add(bench.Figure{Name: "spawn p99", Value: v, Spread: sp, Unit: "ms"})
	}
	for i := range o.Runs {
		if !o.runs("warm") {
			break
		}
		w, err := warmRoundTrip(ctx, filepath.Join(tmp, fmt.Sprint("warm-", i)), o)
		if err != nil {
			return nil, fmt.Errorf("warm round trip: %w", err)
		}
		floor = append(floor, w.floorP50)
		warm[0], warm[1] = append(warm[0], w.p50), append(warm[1], w.p99)
		over[0], over[1] = append(over[0], w.overP50), append(over[1], w.overP99)
	}
	if len(warm[0]) > 0 {
		v, sp := bench.Median(warm[0])
		rep.Add(bench.Figure{Name: "warm tool round trip (1+1): tool call → next model request p50", Value: v, Spread: sp, Unit: "ms",
			Stated: refWarmMs, StatedBy: refStated, Goal: "<= 15 ms", Note: fmt.Sprintf("%d round trips a run", o.Warm)})
		v, sp = bench.Median(warm[1])
		rep.Add(bench.Figure{Name: "warm tool round trip p99", Value: v, Spread: sp, Unit: "ms"})
		v, sp = bench.Median(over[0])
		fl, _ := bench.Median(floor)
		rep.Add(bench.Figure{Name: "harness overhead per tool round trip (the round trip minus the kernel's own) p50", Value: v, Spread: sp, Unit: "ms",
			Reference: "of it, the HTTP client alone: a bare model call minus the server's time", RefValue: fl, Goal: "<= 1 ms",
			Note: "the kernel's time is its execute request → reply, measured by the kernel client"})
		v, sp = bench.Median(over[1])
		rep.Add(bench.Figure{Name: "harness overhead p99", Value: v, Spread: sp, Unit: "ms", Goal: "<= 15 ms"})
	}

	if o.runs("forks") {
		var reg [3][]float64       // at once, one after another, one after another on a quiet machine
		var full [2][]float64      // at once, one after another
		forkRuns := min(o.Runs, 2) // each makes 3×Forks worktrees of the whole repository
		for i := range forkRuns {
			dir := filepath.Join(tmp, fmt.Sprint("fork-", i))
			f, err := forkRegistration(ctx, dir, fixture, o)
			os.RemoveAll(dir)
			if err != nil {
				return nil, fmt.Errorf("forks: %w", err)
			}
			reg[0], reg[1], reg[2] = append(reg[0], f.regTogether), append(reg[1], f.regOneByOne), append(reg[2], f.regQuiet)
			full[0], full[1] = append(full[0], f.fullTogether), append(full[1], f.fullOneByOne)
		}
		v, sp := bench.Median(reg[0])
		rs, _ := bench.Median(reg[1])
		rep.Add(bench.Figure{Name: fmt.Sprintf("%d forks at once (%d-file repository), until all returned", o.Forks, o.Files), Value: v, Spread: sp, Unit: "ms",
			Reference: fmt.Sprintf("the sum of %d forks one after another, each as the last returned", o.Forks), RefValue: rs, Goal: "ratio <= 0.6",
			Note: fmt.Sprintf("%d runs; a fork returns registered, its files written in the background (its first cell waits for them), so both sides register while earlier forks' files are written", forkRuns)})
		rs, _ = bench.Median(reg[2])
		rep.Add(bench.Figure{Name: fmt.Sprintf("%d forks at once (%d-file repository), until all returned, against a quiet machine", o.Forks, o.Files), Value: v, Spread: sp, Unit: "ms",
			Reference: fmt.Sprintf("the sum of %d forks one after another, each once the last one's files were in", o.Forks), RefValue: rs,
			Note: "the reference registers with no files being written; the forks at once register while the first ones' files are written"})
		v, sp = bench.Median(full[0])
		rs, _ = bench.Median(full[1])
		rep.Add(bench.Figure{Name: fmt.Sprintf("%d forks at once (%d-file repository), until all files written", o.Forks, o.Files), Value: v, Spread: sp, Unit: "ms",
			Reference: fmt.Sprintf("the sum of %d forks one after another, each until its files were written", o.Forks), RefValue: rs,
			Note: "creating the files is CPU-bound in the kernel, and one fork's write already keeps most of the cores busy"})
	}

	if o.runs("scale") {
		var walls, peaks, perSession []float64
		for i := range o.Runs {
			wall, peak, per, err := scale(ctx, filepath.Join(tmp, fmt.Sprint("scale-", i)), o)
			if err != nil {
				return nil, fmt.Errorf("scale: %w", err)
			}
			walls, peaks, perSession = append(walls, wall.Seconds()), append(peaks, peak), append(perSession, per)
		}
		v, sp := bench.Median(walls)
		rep.Add(bench.Figure{Name: fmt.Sprintf("scale: %d child sessions (8 running at once) wall time", o.Sessions), Value: v, Spread: sp, Unit: "s"})
		v, sp = bench.Median(peaks)
		rep.Add(bench.Figure{Name: "scale: daemon peak RSS (excluding kernels)", Value: v, Spread: sp, Unit: "MB", Goal: "<= 200 MB",
			Note: "the process's RSS, so later runs start from what earlier ones left"})
		v, sp = bench.Median(perSession)
		rep.Add(bench.Figure{Name: "scale: RSS per inactive session", Value: v, Spread: sp, Unit: "KB", Goal: "<= 100 KB"})
	}

	if o.runs("budget") {
		dir := filepath.Join(tmp, "budget")
		r, err := budget(ctx, dir, fixture, o)
		os.RemoveAll(dir)
		if err != nil {
			return nil, fmt.Errorf("disk budget: %w", err)
		}
		_, one := bench.Median([]float64{r.peakMB}) // one run: a thousand children take minutes
		rep.Add(bench.Figure{Name: fmt.Sprintf("disk budget: %d children (%d-file repository), peak worktree disk", o.Budget, o.Files), Value: r.peakMB, Spread: one, Unit: "MB",
			Reference: fmt.Sprintf("the worktrees.diskBudget (%d worktrees)", r.budgetTrees), RefValue: r.budgetMB,
			Note: fmt.Sprintf("one worktree is %.1f MB; without the budget the children's worktrees would take %.0f MB; %d released, wall %.0f s",
				r.treeMB, r.treeMB*float64(o.Budget), r.released, r.wall.Seconds())})
		_, one = bench.Median([]float64{r.peakRSS})
		rep.Add(bench.Figure{Name: "disk budget: daemon peak RSS (its VmHWM; kernels are processes of their own)", Value: r.peakRSS, Spread: one, Unit: "MB", Goal: "<= 200 MB",
			Note: fmt.Sprintf("an arbor daemon process holding %d sessions", o.Budget+1)})
	}
	if !o.runs("eventlog") {
		return rep, nil
	}

	ev, err := eventlog.Bench(ctx, filepath.Join(tmp, "eventlog"), o.Runs)
	if err != nil {
		return nil, fmt.Errorf("event log: %w", err)
	}
	rep.Figures = append(rep.Figures, ev.Figures...)
	return rep, nil
}

// runs reports whether the group is to run.
func (o Options) runs(group string) bool { return len(o.Only) == 0 || slices.Contains(o.Only, group) }

type env struct {
	svc  *agents.Service
	rec  *recorder
	repo string
	url  string // the scripted model's base URL
	stop func()

	mu    sync.Mutex
	cells []time.Duration // each model cell's kernel round trip, in the order they ran
}

func (e *env) cellTimes() []time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.cells)
}

func newEnv(ctx context.Context, dir string, n int, arborJSON string, o Options) (*env, error) {
	repo := filepath.Join(dir, "repo")
	if err := bench.GitRepo(repo, arborJSON); err != nil {
		return nil, err
	}
	return serve(ctx, dir, repo, n, o)
}

// newEnvIn is newEnv in a clone of the generated repository at fixture.
func newEnvIn(ctx context.Context, dir, fixture string, n int, o Options) (*env, error) {
	repo := filepath.Join(dir, "repo")
	if err := gitbench.Clone(ctx, fixture, repo); err != nil {
		return nil, err
	}
	return serve(ctx, dir, repo, n, o)
}

func serve(ctx context.Context, dir, repo string, n int, o Options) (*env, error) {
	s, err := scripted.Parse([]byte(strings.ReplaceAll(script, "range(N)", fmt.Sprintf("range(%d)", n))), "agents bench")
	if err != nil {
		return nil, err
	}
	rec := &recorder{next: s.Handler(), reqs: map[string][]time.Time{}, done: map[string][]time.Time{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: rec}
	go srv.Serve(ln)
	e := &env{rec: rec, repo: repo, url: "http://" + ln.Addr().String() + "/v1"}
	svc, err := agents.New(agents.Options{StateDir: filepath.Join(dir, "state"), Logger: o.Logger,
		Overrides: workspace.Overrides{ModelBaseURL: e.url, Model: "scripted"},
		CellRan: func(_ string, d time.Duration) {
			e.mu.Lock()
			e.cells = append(e.cells, d)
			e.mu.Unlock()
		}})
	if err != nil {
		return nil, err
	}
	e.svc = svc
	e.stop = func() {
		svc.Close(context.WithoutCancel(ctx))
		srv.Close()
	}
	return e, nil
}

func (e *env) waitQuiet(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		infos, _ := e.svc.List("")
		busy := 0
		for _, in := range infos {
			if in.State == agents.Running || in.State == agents.Admitted {
				busy++
			}
		}
		if busy == 0 && len(infos) > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("sessions still running after %v", limit)
}

// spawnLatency runs one spawner of o.Spawns children in a fresh service and returns the p50
// and p99, in ms, from each await rlm() to that child's first model request.
func spawnLatency(ctx context.Context, dir, fixture string, o Options) (p50, p99 float64, err error) {
	e, err := newEnvIn(ctx, dir, fixture, o.Spawns, o)
	if err != nil {
		return 0, 0, err
	}
	defer e.stop()
	root, err := e.svc.Create(ctx, agents.CreateRequest{Task: "spawner", Dir: e.repo})
	if err != nil {
		return 0, 0, err
	}
	if err := e.waitQuiet(ctx, 5*time.Minute); err != nil {
		return 0, 0, err
	}
	recs, err := root.Events(0)
	if err != nil {
		return 0, 0, err
	}
	var ts []float64
	for _, r := range recs {
		if r.Type == "tool_finished" {
			var d struct{ Output string }
			json.Unmarshal(r.Data, &d)
			if err := json.Unmarshal([]byte(strings.TrimSpace(d.Output)), &ts); err != nil {
				return 0, 0, fmt.Errorf("spawner output %q: %w", d.Output, err)
			}
		}
	}
	var lat []time.Duration
	for i, t0 := range ts {
		first, ok := e.rec.first(fmt.Sprintf("child %d of spawner", i))
		if !ok {
			return 0, 0, fmt.Errorf("child %d made no model request", i)
		}
		sec, frac := int64(t0), t0-float64(int64(t0))
		lat = append(lat, first.Sub(time.Unix(sec, int64(frac*1e9))))
	}
	if len(lat) == 0 {
		return 0, 0, fmt.Errorf("the spawner reported no spawns")
	}
	return bench.Ms(bench.Percentile(lat, 50)), bench.Ms(bench.Percentile(lat, 99)), nil
}

// warmFigures are one run's tool round trips (a tool call's response → the next model request)
// and the harness's share of them (the round trip minus the kernel's own), in ms.
type warmFigures struct{ p50, p99, overP50, overP99, floorP50 float64 }

// warmRoundTrip runs o.Warm tool calls of 1+1 in one session of a fresh service.
func warmRoundTrip(ctx context.Context, dir string, o Options) (w warmFigures, err error) {
	e, err := newEnv(ctx, dir, 0, fmt.Sprintf(`{"maxTurnSteps":%d}`, o.Warm+1), o)
	if err != nil {
		return w, err
	}
	defer e.stop()
	task := "warm round trips"
	if _, err := e.svc.Create(ctx, agents.CreateRequest{Task: task, Dir: e.repo}); err != nil {
		return w, err
	}
	if err := e.waitQuiet(ctx, 5*time.Minute); err != nil {
		return w, err
	}
	e.rec.mu.Lock()
	reqs, done := e.rec.reqs[task], e.rec.done[task]
	e.rec.mu.Unlock()
	cells := e.cellTimes()
	var rt, over []time.Duration
	for i := 2; i < len(reqs); i++ { // skip the first: it waited for the kernel to boot
		d := reqs[i].Sub(done[i-1])
		rt = append(rt, d)
		if i-1 < len(cells) {
			over = append(over, d-cells[i-1])
		}
	}
	if len(rt) == 0 || len(over) == 0 {
		return w, fmt.Errorf("no round trips recorded")
	}
	floor, err := clientFloor(ctx, e, o.Warm)
	if err != nil {
		return w, err
	}
	return warmFigures{
		p50: bench.Ms(bench.Percentile(rt, 50)), p99: bench.Ms(bench.Percentile(rt, 99)),
		overP50: bench.Ms(bench.Percentile(over, 50)), overP99: bench.Ms(bench.Percentile(over, 99)),
		floorP50: bench.Ms(bench.Percentile(floor, 50)),
	}, nil
}

// clientFloor makes n bare model calls, the same request shape as a session's, through the
// same model client to the same server, and returns for each the call's time minus the
// server's: what the HTTP client and the loopback connection alone add to a tool round trip
// (part of the harness overhead, and the floor of any harness that speaks HTTP to its model).
func clientFloor(ctx context.Context, e *env, n int) ([]time.Duration, error) {
	c, err := model.New(model.Config{BaseURL: e.url, Model: "scripted"}, nil)
	if err != nil {
		return nil, err
	}
	defer c.CloseIdleConnections()
	task := "warm bare calls"
	var took []time.Duration
	for range n + 1 {
		start := time.Now()
		if _, err := c.Complete(ctx, model.Request{System: "bench", Messages: []model.Message{{Role: model.RoleUser, Content: task}}}, nil); err != nil {
			return nil, fmt.Errorf("bare model call: %w", err)
		}
		took = append(took, time.Since(start))
	}
	e.rec.mu.Lock()
	reqs, done := e.rec.reqs[task], e.rec.done[task]
	e.rec.mu.Unlock()
	var floor []time.Duration
	for i := 1; i < len(took) && i < len(reqs); i++ { // the first call dialled
		floor = append(floor, took[i]-done[i].Sub(reqs[i]))
	}
	if len(floor) == 0 {
		return nil, fmt.Errorf("no bare model calls recorded")
	}
	return floor, nil
}

// scale spawns o.Sessions children in a fresh service and returns the wall time until all are
// inactive, the process's peak RSS in MB, and the RSS each inactive session holds in KB.
func scale(ctx context.Context, dir string, o Options) (wall time.Duration, peak, perSession float64, err error) {
	e, err := newEnv(ctx, dir, o.Sessions, `{"idleTimeout":"100ms","maxRunning":8,"maxDepth":2}`, o)
	if err != nil {
		return 0, 0, 0, err
	}
	defer e.stop()
	runtime.GC()
	before := rssMB()
	peak = before
	start := time.Now()
	if _, err := e.svc.Create(ctx, agents.CreateRequest{Task: "scale out", Dir: e.repo}); err != nil {
		return 0, 0, 0, err
	}
	deadline := time.Now().Add(30 * time.Minute)
	for {
		peak = max(peak, rssMB())
		infos, _ := e.svc.List("")
		inactive := 0
		for _, in := range infos {
			if in.State == agents.Inactive {
				inactive++
			}
		}
		if len(infos) == o.Sessions+1 && inactive >= o.Sessions {
			break
		}
		if time.Now().After(deadline) {
			return 0, 0, 0, fmt.Errorf("%d sessions, %d inactive after 30 min", len(infos), inactive)
		}
		time.Sleep(50 * time.Millisecond)
	}
	wall = time.Since(start)
	runtime.GC()
	after := rssMB()
	return wall, peak, (after - before) * 1024 / float64(o.Sessions), nil
}

func rssMB() float64 { return statusMB(os.Getpid(), "VmRSS:") }

type budgetResult struct {
	peakMB, budgetMB, treeMB float64
	budgetTrees, released    int
	peakRSS                  float64
	wall                     time.Duration
}

// budgetTrees is the disk budget of the budget figure, in worktrees of the repository: room
// for the 8 children running at once, their parent and one being released.
const budgetTrees = 10

// budget spawns o.Budget children in a clone of the generated repository with
// worktrees.diskBudget set to budgetTrees worktrees and idleTimeout short, so finished children
// go inactive and give their worktrees up. The sessions live in a real `arbor daemon` (o.Exe),
// a process of its own, so its RSS is the daemon's alone (its peak is the kernel's VmHWM); the
// worktrees' disk (allocated blocks) is sampled until every child is inactive.
func budget(ctx context.Context, dir, fixture string, o Options) (r budgetResult, err error) {
	repo := filepath.Join(dir, "repo")
	if err := gitbench.Clone(ctx, fixture, repo); err != nil {
		return r, err
	}
	g, err := gitstate.Open(repo, nil)
	if err != nil {
		return r, err
	}
	_, head, err := g.Head(ctx)
	if err == nil {
		var size int64
		if size, err = g.TreeSize(ctx, head); err == nil {
			r.treeMB = float64(size) / 1e6
		}
	}
	g.Close()
	if err != nil {
		return r, err
	}
	r.budgetTrees = budgetTrees
	r.budgetMB = r.treeMB * budgetTrees
	cfg := fmt.Sprintf(`{"idleTimeout":"200ms","maxRunning":8,"maxDepth":2,"worktrees":{"diskBudget":"%dKB"}}`, int64(r.budgetMB*1000))
	os.WriteFile(filepath.Join(repo, "arbor.json"), []byte(cfg), 0o644)
	for _, args := range [][]string{{"add", "arbor.json"}, {"-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "bounds"}} {
		c := exec.CommandContext(ctx, "git", args...)
		c.Dir = repo
		if out, err := c.CombinedOutput(); err != nil {
			return r, fmt.Errorf("git %v: %v %s", args, err, out)
		}
	}
	s, err := scripted.Parse([]byte(strings.ReplaceAll(script, "range(N)", fmt.Sprintf("range(%d)", o.Budget))), "agents bench")
	if err != nil {
		return r, err
	}
	mctx, stopModel := context.WithCancel(ctx)
	url, waitModel, err := scripted.Serve(mctx, "", s, nil)
	if err != nil {
		stopModel()
		return r, err
	}
	defer func() { stopModel(); waitModel() }() // after the daemon stopped (deferred below)
	d, err := startDaemon(ctx, o.Exe, dir, url)
	if err != nil {
		return r, err
	}
	defer d.stop()
	// The worktrees and their git admin dirs (index and all), what TreeSize estimates.
	wts, admin := filepath.Join(repo, ".git", "arbor", "worktrees"), filepath.Join(repo, ".git", "worktrees")
	disk := func() float64 { return float64(diskUse(wts)+diskUse(admin)) / 1e6 }
	start := time.Now()
	if _, err := server.SessionCreate.Call(ctx, d.c, server.SessionCreateParams{Task: "scale out", Dir: repo}); err != nil {
		return r, err
	}
	deadline := time.Now().Add(2 * time.Hour)
	for ; ; time.Sleep(500 * time.Millisecond) {
		r.peakMB = max(r.peakMB, disk())
		res, err := server.Sessions.Call(ctx, d.c, server.SessionsParams{})
		if err != nil {
			return r, fmt.Errorf("list sessions: %w", err)
		}
		inactive, released := 0, 0
		for _, in := range res.Sessions {
			if in.State == agents.Inactive {
				inactive++
			}
			if in.WorktreeReleased {
				released++
			}
		}
		if len(res.Sessions) == o.Budget+1 && inactive >= o.Budget {
			r.released = released
			break
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("%d sessions, %d inactive after 2 h", len(res.Sessions), inactive)
		}
	}
	r.wall = time.Since(start)
	r.peakMB = max(r.peakMB, disk())
	r.peakRSS = statusMB(d.proc.Pid, "VmHWM:")
	return r, nil
}

// daemonProc is an `arbor daemon` the bench started, with a client connected to it.
type daemonProc struct {
	proc *os.Process
	c    *server.Client
	stop func()
}

// startDaemon starts exe (the arbor binary) as a daemon with its own socket, state and config
// under dir, on the scripted model at url, and connects to it.
func startDaemon(ctx context.Context, exe, dir, url string) (*daemonProc, error) {
	if exe == "" {
		return nil, errors.New("no arbor binary to run the daemon (Options.Exe)")
	}
	home := filepath.Join(dir, "home")
	run := filepath.Join(dir, "run")
	for _, d := range []string{home, run} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	sock := filepath.Join(run, "arbor.sock")
	cmd := exec.Command(exe, "daemon", "--socket", sock, "--idle-timeout", "0")
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"XDG_STATE_HOME="+filepath.Join(home, ".state"), "XDG_DATA_HOME="+filepath.Join(home, ".data"),
		"XDG_RUNTIME_DIR="+run, "ARBOR_STATE_DIR=", "ARBOR_SOCKET="+sock,
		"ARBOR_MODEL_BASE_URL="+url, "ARBOR_MODEL=scripted")
	logf, err := os.Create(filepath.Join(dir, "daemon.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s daemon: %w", exe, err)
	}
	d := &daemonProc{proc: cmd.Process}
	d.stop = func() {
		if d.c != nil {
			d.c.Close()
		}
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		logf.Close()
	}
	var nc net.Conn
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if nc, err = server.Dial(ctx, server.DialOptions{Socket: sock}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			d.stop()
			log, _ := os.ReadFile(filepath.Join(dir, "daemon.log"))
			return nil, fmt.Errorf("the daemon did not listen on %s within 20 s: %v\n%s", sock, err, log)
		}
	}
	d.c = server.NewClient(ctx, nc, nil)
	if err := d.c.Call(ctx, "initialize", map[string]any{"processId": os.Getpid(), "capabilities": map[string]any{}}, nil); err != nil {
		d.stop()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	return d, nil
}

// statusMB is a /proc/PID/status field in kB (VmRSS:, VmHWM:), in MB.
func statusMB(pid int, field string) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.Atoi(strings.Fields(rest)[0])
			return float64(kb) / 1024
		}
	}
	return 0
}

// diskUse is the disk allocated to the files under dir (st_blocks), what du reports.
func diskUse(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a worktree removed while we walk it
		}
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}
