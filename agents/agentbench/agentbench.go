// Package agentbench measures the agents layer for `arbor bench agents`: spawn latency, the
// warm tool round trip, a 1,000-session tree, and the event log. A middleware in front of the
// scripted model timestamps every model request, so figures are taken where the model sees
// them.
//
// Call [Run].
package agentbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/arborhq/arbor/agents"
	"github.com/arborhq/arbor/agents/eventlog"
	"github.com/arborhq/arbor/agents/model/scripted"
	"github.com/arborhq/arbor/bench"
	"github.com/arborhq/arbor/workspace"
)

// Options size the run.
type Options struct {
	Spawns   int // children spawned for the latency figure (default 30)
	Warm     int // warm 1+1 round trips (default 50)
	Sessions int // sessions in the scale figure (default 1000)
	Logger   *slog.Logger
}

// Stated figures of the reference harness on this kind of machine (from the issue).
const (
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
	if o.Spawns <= 0 {
		o.Spawns = 30
	}
	if o.Warm <= 0 {
		o.Warm = 50
	}
	if o.Sessions <= 0 {
		o.Sessions = 1000
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

	if err := spawnLatency(ctx, tmp, o, rep); err != nil {
		return nil, fmt.Errorf("spawn latency: %w", err)
	}
	if err := warmRoundTrip(ctx, tmp, o, rep); err != nil {
		return nil, fmt.Errorf("warm round trip: %w", err)
	}
	if err := scale(ctx, tmp, o, rep); err != nil {
		return nil, fmt.Errorf("scale: %w", err)
	}
	ev, err := eventlog.Bench(ctx, filepath.Join(tmp, "eventlog"))
	if err != nil {
		return nil, fmt.Errorf("event log: %w", err)
	}
	rep.Figures = append(rep.Figures, ev.Figures...)
	return rep, nil
}

type env struct {
	svc  *agents.Service
	rec  *recorder
	repo string
	stop func()
}

func newEnv(ctx context.Context, dir string, n int, arborJSON string, o Options) (*env, error) {
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
	repo := filepath.Join(dir, "repo")
	if err := gitRepo(repo, arborJSON); err != nil {
		return nil, err
	}
	svc, err := agents.New(agents.Options{StateDir: filepath.Join(dir, "state"), Logger: o.Logger,
		Overrides: workspace.Overrides{ModelBaseURL: "http://" + ln.Addr().String() + "/v1", Model: "scripted"}})
	if err != nil {
		return nil, err
	}
	return &env{svc: svc, rec: rec, repo: repo, stop: func() {
		svc.Close(context.WithoutCancel(ctx))
		srv.Close()
	}}, nil
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

func spawnLatency(ctx context.Context, dir string, o Options, rep *bench.Report) error {
	e, err := newEnv(ctx, filepath.Join(dir, "spawn"), o.Spawns, "", o)
	if err != nil {
		return err
	}
	defer e.stop()
	root, err := e.svc.Create(ctx, agents.CreateRequest{Task: "spawner", Dir: e.repo})
	if err != nil {
		return err
	}
	if err := e.waitQuiet(ctx, 5*time.Minute); err != nil {
		return err
	}
	recs, err := root.Events(0)
	if err != nil {
		return err
	}
	var ts []float64
	for _, r := range recs {
		if r.Type == "tool_finished" {
			var d struct{ Output string }
			json.Unmarshal(r.Data, &d)
			if err := json.Unmarshal([]byte(strings.TrimSpace(d.Output)), &ts); err != nil {
				return fmt.Errorf("spawner output %q: %w", d.Output, err)
			}
		}
	}
	var lat []time.Duration
	for i, t0 := range ts {
		first, ok := e.rec.first(fmt.Sprintf("child %d of spawner", i))
		if !ok {
			return fmt.Errorf("child %d made no model request", i)
		}
		sec, frac := int64(t0), t0-float64(int64(t0))
		lat = append(lat, first.Sub(time.Unix(sec, int64(frac*1e9))))
	}
	p50, p99 := bench.Percentile(lat, 50), bench.Percentile(lat, 99)
	rep.Add(bench.Figure{Name: "spawn: await rlm() → child's first model request p50", Value: bench.Ms(p50), Unit: "ms",
		Reference: "reference harness, stated", RefValue: refSpawnMs, Goal: "<= 100 ms",
		Note: "kernels warm in the background; the first model call does not wait for one"})
	rep.Add(bench.Figure{Name: "spawn p99", Value: bench.Ms(p99), Unit: "ms"})
	return nil
}

func warmRoundTrip(ctx context.Context, dir string, o Options, rep *bench.Report) error {
	e, err := newEnv(ctx, filepath.Join(dir, "warm"), 0, fmt.Sprintf(`{"maxTurnSteps":%d}`, o.Warm+1), o)
	if err != nil {
		return err
	}
	defer e.stop()
	task := "warm round trips"
	if _, err := e.svc.Create(ctx, agents.CreateRequest{Task: task, Dir: e.repo}); err != nil {
		return err
	}
	if err := e.waitQuiet(ctx, 5*time.Minute); err != nil {
		return err
	}
	e.rec.mu.Lock()
	reqs, done := e.rec.reqs[task], e.rec.done[task]
	e.rec.mu.Unlock()
	var rt []time.Duration
	for i := 2; i < len(reqs); i++ { // skip the first: it waited for the kernel to boot
		rt = append(rt, reqs[i].Sub(done[i-1]))
	}
	if len(rt) == 0 {
		return fmt.Errorf("no round trips recorded")
	}
	rep.Add(bench.Figure{Name: "warm tool round trip (1+1): tool call → next model request p50", Value: bench.Ms(bench.Percentile(rt, 50)), Unit: "ms",
		Reference: "reference harness, stated", RefValue: refWarmMs, Goal: "<= 15 ms"})
	rep.Add(bench.Figure{Name: "warm tool round trip p99", Value: bench.Ms(bench.Percentile(rt, 99)), Unit: "ms"})
	return nil
}

func scale(ctx context.Context, dir string, o Options, rep *bench.Report) error {
	e, err := newEnv(ctx, filepath.Join(dir, "scale"), o.Sessions, `{"idleTimeout":"100ms","maxRunning":8,"maxDepth":2}`, o)
	if err != nil {
		return err
	}
	defer e.stop()
	runtime.GC()
	before := rssMB()
	peak := before
	start := time.Now()
	if _, err := e.svc.Create(ctx, agents.CreateRequest{Task: "scale out", Dir: e.repo}); err != nil {
		return err
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
			return fmt.Errorf("%d sessions, %d inactive after 30 min", len(infos), inactive)
		}
		time.Sleep(50 * time.Millisecond)
	}
	wall := time.Since(start)
	runtime.GC()
	after := rssMB()
	rep.Add(bench.Figure{Name: fmt.Sprintf("scale: %d child sessions (8 running at once) wall time", o.Sessions), Value: wall.Seconds(), Unit: "s"})
	rep.Add(bench.Figure{Name: "scale: daemon peak RSS (excluding kernels)", Value: peak, Unit: "MB", Goal: "<= 200 MB"})
	rep.Add(bench.Figure{Name: "scale: RSS per inactive session", Value: (after - before) * 1024 / float64(o.Sessions), Unit: "KB", Goal: "<= 100 KB"})
	return nil
}

func rssMB() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.Fields(rest)[0])
			return float64(kb) / 1024
		}
	}
	return 0
}

func gitRepo(dir, arborJSON string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	os.WriteFile(filepath.Join(dir, "README.md"), []byte("bench\n"), 0o644)
	if arborJSON != "" {
		os.WriteFile(filepath.Join(dir, "arbor.json"), []byte(arborJSON), 0o644)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "init"}} {
		c := exec.Command("git", args...)
		c.Dir = dir
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("git %v: %v %s", args, err, out)
		}
	}
	return nil
}
