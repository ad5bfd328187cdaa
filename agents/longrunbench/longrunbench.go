// Package longrunbench measures long-horizon control for `arbor bench longrun`: what an idle
// daemon with 1,000 heartbeats scheduled costs (CPU, against the same process idle without
// them, and the scheduler's timer wake-ups against the ticks due), and how soon a heartbeat's
// tick starts its turn. Sessions run in an in-process agents.Service against the scripted
// model, whose requests are counted.
//
// Call [Run].
package longrunbench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/arborhq/arbor/agents"
	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/model/scripted"
	"github.com/arborhq/arbor/bench"
	"github.com/arborhq/arbor/workspace"
)

// Options size the run.
type Options struct {
	Heartbeats int           // scheduled on the idle daemon (default 1000)
	Window     time.Duration // the idle CPU window, and its reference's (default 10s)
	Ticks      int           // heartbeat ticks timed from due time to turn start (default 50)
	Park       time.Duration // how long a goal stays parked on its working child (default 10s)
	Logger     *slog.Logger
}

// perSession keeps each session under the agents package's per-session heartbeat limit.
const perSession = 250

// beatSessions tick at once in the latency figure, one heartbeat every second each.
const beatSessions = 5

// The parked-goal figure's lead sets a goal and waits on a worker that works for
// Options.Park (PARK, in seconds).
const script = `{"rules":[
 {"when":{"task":"^lead","last":"^lead"},"code":"await goal.set('get the answer of the worker')\nawait rlm('worker: take your time', name='worker')"},
 {"when":{"task":"^lead","last":"worker answer"},"code":"await goal.complete(evidence='the worker answered')"},
 {"when":{"task":"^worker","last":"^worker"},"code":"import time\ntime.sleep(PARK)"},
 {"when":{"task":"^worker"},"text":"worker answer: 42"}
],"default":{"text":"noted"}}`

// Run measures everything and returns the report.
func Run(ctx context.Context, o Options) (*bench.Report, error) {
	if o.Heartbeats <= 0 {
		o.Heartbeats = 1000
	}
	if o.Window <= 0 {
		o.Window = 10 * time.Second
	}
	if o.Ticks <= 0 {
		o.Ticks = 50
	}
	if o.Park <= 0 {
		o.Park = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	tmp, err := os.MkdirTemp("", "arbor-longrunbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	e, err := newEnv(ctx, tmp, o)
	if err != nil {
		return nil, err
	}
	defer e.stop()
	rep := &bench.Report{Suite: "longrun"}
	if err := e.idle(ctx, rep, o); err != nil {
		return nil, fmt.Errorf("idle heartbeats: %w", err)
	}
	if err := e.tickLatency(ctx, rep, o); err != nil {
		return nil, fmt.Errorf("tick latency: %w", err)
	}
	if err := e.parkedGoal(ctx, rep); err != nil {
		return nil, fmt.Errorf("parked goal: %w", err)
	}
	return rep, nil
}

type env struct {
	svc      *agents.Service
	repo     string
	requests atomic.Int64 // model requests served
	lead     requestClock // those of the parked-goal figure's lead session
	stop     func()
}

func newEnv(ctx context.Context, dir string, o Options) (*env, error) {
	park := strconv.FormatFloat(o.Park.Seconds(), 'f', -1, 64)
	s, err := scripted.Parse([]byte(strings.ReplaceAll(script, "PARK", park)), "longrun bench")
	if err != nil {
		return nil, err
	}
	e := &env{repo: filepath.Join(dir, "repo")}
	s.Observe(func(r scripted.Request) {
		e.requests.Add(1)
		if strings.HasPrefix(r.Task, "lead") {
			e.lead.tick()
		}
	})
	mctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	url, wait, err := scripted.Serve(mctx, "127.0.0.1:0", s, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	// Sessions go inactive soon after each turn, as an overnight daemon's do; a tick revives one.
	if err := bench.GitRepo(e.repo, `{"idleTimeout":"200ms"}`); err != nil {
		cancel()
		return nil, err
	}
	svc, err := agents.New(agents.Options{StateDir: filepath.Join(dir, "state"), Logger: o.Logger,
		Overrides: workspace.Overrides{ModelBaseURL: url, Model: "scripted"}})
	if err != nil {
		cancel()
		return nil, err
	}
	e.svc = svc
	e.stop = func() {
		svc.Close(context.WithoutCancel(ctx))
		cancel()
		wait()
	}
	return e, nil
}

// create starts n sessions and waits until each has answered its task and gone inactive.
func (e *env) create(ctx context.Context, prefix string, n int) ([]*agents.Session, error) {
	var out []*agents.Session
	for i := range n {
		s, err := e.svc.Create(ctx, agents.CreateRequest{Task: fmt.Sprintf("%s %d", prefix, i), Dir: e.repo})
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, s := range out {
		for s.State() != agents.Inactive {
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("session %s still %v", s.ID(), s.State())
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return out, nil
}

// cpu is the process's user+system CPU time.
func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuOver returns the process's CPU over a window of d as a percentage of one core.
func cpuOver(ctx context.Context, d time.Duration) (float64, error) {
	c0, t0 := cpu(), time.Now()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(d):
	}
	return 100 * float64(cpu()-c0) / float64(time.Since(t0)), nil
}

// idle measures the daemon with its sessions inactive, first without heartbeats (the
// reference), then with o.Heartbeats scheduled, none due in the window.
func (e *env) idle(ctx context.Context, rep *bench.Report, o Options) error {
	n := (o.Heartbeats + perSession - 1) / perSession
	sessions, err := e.create(ctx, "idle", n)
	if err != nil {
		return err
	}
	ref, err := cpuOver(ctx, o.Window)
	if err != nil {
		return err
	}
	// Due from an hour on, spread over the next day: nothing in the window, and the heap holds
	// 1,000 distinct due times.
	for i := range o.Heartbeats {
		every := fmt.Sprintf("%ds", 3600+i*86)
		if _, err := e.svc.CreateHeartbeat(ctx, sessions[i/perSession].ID(), agents.HeartbeatRequest{Instruction: "check in", Every: every}); err != nil {
			return err
		}
	}
	before := e.svc.HeartbeatStats()
	reqs := e.requests.Load()
	got, err := cpuOver(ctx, o.Window)
	if err != nil {
		return err
	}
	after := e.svc.HeartbeatStats()
	rep.Add(bench.Figure{Name: fmt.Sprintf("idle daemon, %d heartbeats scheduled: CPU", after.Scheduled), Value: got, Unit: "% of a core",
		Reference: "the same process idle without heartbeats", RefValue: ref, Goal: "<= 1%",
		Note: fmt.Sprintf("getrusage over %v each; %d sessions, inactive", o.Window, n)})
	rep.Add(bench.Figure{Name: "idle: scheduler timer wake-ups", Value: float64(after.Wakeups - before.Wakeups), Unit: "wake-ups",
		Reference: "ticks due in the window", RefValue: float64(after.Ticks - before.Ticks), Goal: "none before a due tick",
		Note: fmt.Sprintf("%d early; %d model requests", after.Early-before.Early, e.requests.Load()-reqs)})
	return nil
}

// tickLatency runs beatSessions sessions with a heartbeat every second each until o.Ticks
// ticks are delivered, and times each from its due time to its turn's turn_started record.
func (e *env) tickLatency(ctx context.Context, rep *bench.Report, o Options) error {
	sessions, err := e.create(ctx, "beat", beatSessions)
	if err != nil {
		return err
	}
	before := e.svc.HeartbeatStats()
	reqs := e.requests.Load()
	var hbs []agents.HeartbeatInfo
	for i, s := range sessions {
		if i > 0 { // staggered, so the sessions' ticks do not all come at once
			time.Sleep(time.Second / beatSessions)
		}
		hb, err := e.svc.CreateHeartbeat(ctx, s.ID(), agents.HeartbeatRequest{Instruction: "look at the build", Every: "1s"})
		if err != nil {
			return err
		}
		hbs = append(hbs, hb)
	}
	deadline := time.Now().Add(time.Duration(o.Ticks/beatSessions+30) * time.Second)
	for {
		n := 0
		for _, s := range sessions {
			refs, _, err := deliveries(s)
			if err != nil {
				return err
			}
			n += len(refs)
		}
		if n >= o.Ticks {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d ticks delivered", n, o.Ticks)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var delivered int
	for _, hb := range hbs {
		d, err := e.svc.DeleteHeartbeat(ctx, hb.ID)
		if err != nil {
			return err
		}
		delivered += d.Delivered
	}
	after := e.svc.HeartbeatStats()
	time.Sleep(500 * time.Millisecond) // the last turns end
	var lat []time.Duration
	coalesced := 0
	for i, s := range sessions {
		refs, starts, err := deliveries(s)
		if err != nil {
			return err
		}
		for j, r := range refs {
			if r.Count != 1 {
				coalesced++
				continue
			}
			if starts[j].IsZero() {
				continue // its turn had not started when the heartbeat was deleted
			}
			dueAt := hbs[i].Created.Add(time.Duration(r.Run) * time.Second)
			lat = append(lat, starts[j].Sub(dueAt))
		}
	}
	if len(lat) == 0 {
		return fmt.Errorf("no tick was timed")
	}
	p50, p99 := bench.Ms(bench.Percentile(lat, 50)), bench.Ms(bench.Percentile(lat, 99))
	rep.Add(bench.Figure{Name: "heartbeat tick: due time → turn_started p50", Value: p50, Unit: "ms", Goal: "<= 20 ms",
		Note: fmt.Sprintf("%d ticks of %d sessions, each every 1s, inactive between ticks; the turn_started record's time; %d coalesced ones left out", len(lat), beatSessions, coalesced)})
	rep.Add(bench.Figure{Name: "heartbeat tick p99", Value: p99, Unit: "ms"})
	rep.Add(bench.Figure{Name: "ticking: scheduler timer wake-ups", Value: float64(after.Wakeups - before.Wakeups), Unit: "wake-ups",
		Reference: "ticks due", RefValue: float64(after.Ticks - before.Ticks), Goal: "<= ticks due, none early",
		Note: fmt.Sprintf("%d early, %d re-arms (heartbeats created and deleted), %d heartbeats in the heap", after.Early-before.Early, after.Rearms-before.Rearms, after.Scheduled+len(hbs))})
	rep.Add(bench.Figure{Name: "ticking: model requests", Value: float64(e.requests.Load() - reqs), Unit: "requests",
		Reference: "heartbeat deliveries", RefValue: float64(delivered), Goal: "one per delivery"})
	return nil
}

// deliveries returns a session's heartbeat deliveries and, for each, the time its turn started
// (zero when none has yet).
func deliveries(s *agents.Session) ([]event.HeartbeatRef, []time.Time, error) {
	recs, err := s.Events(0)
	if err != nil {
		return nil, nil, err
	}
	var refs []event.HeartbeatRef
	var starts []time.Time
	waiting := -1 // the first delivery whose turn has not started yet
	for _, r := range recs {
		switch event.Type(r.Type) {
		case event.TypeMessageQueued:
			var q event.MessageQueued
			if json.Unmarshal(r.Data, &q) == nil && q.Heartbeat != nil {
				refs = append(refs, *q.Heartbeat)
				starts = append(starts, time.Time{})
				if waiting < 0 {
					waiting = len(refs) - 1
				}
			}
		case event.TypeTurnStarted:
			if waiting >= 0 {
				for k := waiting; k < len(refs); k++ {
					starts[k] = r.TS
				}
				waiting = -1
			}
		}
	}
	return refs, starts, nil
}
