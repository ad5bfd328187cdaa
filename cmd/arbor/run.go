package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/server"
	"github.com/arborhq/arbor/workspace"
)

func cmdRun(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	model := fs.String("model", "", "configured model name (default: the configured default)")
	profile := fs.String("profile", "", "run with this profile of arbor.json or the user config (see arbor profiles)")
	detach := fs.Bool("detach", false, "print the session id and return; the session keeps running")
	dir := fs.String("dir", ".", "a directory inside the git repository to work on")
	autonomous := fs.Bool("autonomous", false, "keep taking turns until the --until command passes or a limit ends the run")
	until := fs.String("until", "", "the end condition: a command run in the session's worktree after each turn")
	checkTimeout := fs.String("check-timeout", "", "bounds the end condition (default goals.checkTimeout, 10m)")
	maxTurns := fs.Int("max-turns", 0, fmt.Sprintf("end the run after N turns (an autonomous run given no --max-* and no --profile gets %d turns and %s)", defaultAutonomousTurns, defaultAutonomousWall))
	maxTokens := fs.Int64("max-tokens", 0, "end the run when the session and its subagents have spent N tokens")
	maxWall := fs.String("max-wall", "", "end the run after this long (e.g. 2h)")
	maxCost := fs.Float64("max-cost", 0, "end the run when the subtree has spent this many USD")
	pos, err := flags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return fmt.Errorf(`usage: arbor run "task" [--model M] [--profile P] [--detach] [--autonomous --until CMD [--max-turns N --max-tokens N --max-wall 2h --max-cost USD]]`)
	}
	var goal *server.GoalSetParams
	limits := *maxTurns != 0 || *maxTokens != 0 || *maxWall != "" || *maxCost != 0
	switch {
	case *autonomous && *until == "" && *profile == "":
		return fmt.Errorf("--autonomous needs an end condition: --until \"make test\" (a command that passes when the task is done), or a --profile that sets one")
	case !*autonomous && (*until != "" || limits || *checkTimeout != ""):
		return fmt.Errorf("--until, --check-timeout and --max-* belong to an autonomous run: add --autonomous")
	case *autonomous:
		goal = &server.GoalSetParams{Until: *until, CheckTimeout: *checkTimeout, WallBudget: *maxWall}
		for _, l := range []struct {
			name string
			bad  bool
		}{{"--max-turns", *maxTurns < 0}, {"--max-tokens", *maxTokens < 0}, {"--max-cost", *maxCost < 0}} {
			if l.bad {
				return fmt.Errorf("%s: want a limit above zero (leave it out for none)", l.name)
			}
		}
		if !limits && *profile == "" {
			// Unattended work always has a bound; the summary says which one ended it.
			n := defaultAutonomousTurns
			goal.TurnBudget, goal.WallBudget = &n, defaultAutonomousWall
			fmt.Fprintf(os.Stderr, "autonomous: no --max-* given, so at most %d turns and %s (set --max-turns, --max-tokens, --max-wall or --max-cost to choose)\n", n, defaultAutonomousWall)
		}
		if *maxTurns > 0 {
			goal.TurnBudget = maxTurns
		}
		if *maxTokens > 0 {
			goal.TokenBudget = maxTokens
		}
		if *maxCost > 0 {
			goal.CostBudget = maxCost
		}
	}
	task := pos[0]
	for _, p := range pos[1:] {
		task += " " + p
	}
	abs, err := absDir(*dir)
	if err != nil {
		return err
	}
	f := newFollower(os.Stdout, false)
	c, err := connect(ctx, true, f.notify)
	if err != nil {
		return err
	}
	defer c.Close()
	if st, err := server.DaemonStatus.Call(ctx, c, server.Empty{}); err == nil {
		for _, note := range []string{staleModelNote(st, workspace.OverridesFromEnv()), sandboxNote(st, abs), interruptedNote(st)} {
			if note != "" {
				fmt.Fprintln(os.Stderr, note)
			}
		}
	}
	s, err := server.SessionCreate.Call(ctx, c, server.SessionCreateParams{Task: task, Dir: abs, Model: *model, Goal: goal, Profile: *profile, Autonomous: *autonomous})
	if err != nil {
		return err
	}
	fmt.Printf("session %s on branch %s\n", s.ID, s.Branch)
	if g := s.Goal; g != nil && g.Until != "" {
		fmt.Printf("autonomous: until `%s` passes in its worktree\n", g.Until)
	} else if g != nil {
		fmt.Printf("goal: %s (until the model reports it met or a limit ends it)\n", firstLine(g.Objective))
	}
	if *detach {
		fmt.Printf("follow it with: arbor log %s --follow\n", s.ID[:8])
		return nil
	}
	if s.Goal == nil {
		return f.follow(ctx, c, s.ID)
	}
	f.untilGoalEnds = true
	if err := f.follow(ctx, c, s.ID); err != nil {
		return err
	}
	return runSummary(ctx, c, s.ID)
}

// The bounds of an autonomous run given none.
const (
	defaultAutonomousTurns = 50
	defaultAutonomousWall  = "4h"
)

// runSummary prints how an autonomous run ended; exit status 1 unless its end condition passed.
func runSummary(ctx context.Context, c *server.Client, id string) error {
	res, err := server.GoalGet.Call(ctx, c, server.GoalRef{Session: id})
	if err != nil {
		return err
	}
	g := res.Goal
	if g == nil {
		fmt.Println("the run's goal was cleared")
		return exitCode(1)
	}
	fmt.Printf("run %s: %s — %s\n", strings.ReplaceAll(g.Status, "_", " "), abbrev(id, 8), g.Reason)
	fmt.Printf("  %d turns, %s; end condition checked %d times\n", g.Turns, spendText(g.Spent), g.Checks)
	fmt.Printf("  verified: %s; the model claimed success: %s\n", yesNo(g.Verified), yesNo(g.Claimed))
	if !g.Verified {
		return exitCode(1)
	}
	return nil
}

// staleModelNote says when this shell's ARBOR_MODEL_* settings differ from those the running
// daemon started with: the daemon keeps its own until it stops, which surprises whoever just
// exported new ones.
func staleModelNote(st *server.DaemonStatusResult, mine workspace.Overrides) string {
	var theirs, ours []string
	for _, v := range []struct{ name, mine, daemon string }{
		{"ARBOR_MODEL_BASE_URL", mine.ModelBaseURL, st.ModelBaseURL},
		{"ARBOR_MODEL", mine.Model, st.Model},
		{"ARBOR_API_KEY_ENV", mine.APIKeyEnv, st.APIKeyEnv},
	} {
		if v.mine != "" && v.mine != v.daemon {
			theirs = append(theirs, fmt.Sprintf("%s=%q", v.name, v.daemon))
			ours = append(ours, fmt.Sprintf("%s=%q", v.name, v.mine))
		}
	}
	if len(ours) == 0 {
		return ""
	}
	return fmt.Sprintf("arbor: note: the running daemon (pid %d) uses the model settings it started with (%s), not this shell's (%s); "+
		"run `arbor daemon stop` and the next command starts one with yours", st.PID, strings.Join(theirs, " "), strings.Join(ours, " "))
}

// sandboxNote warns when the session's kernel will run unsandboxed: the repository's
// configuration turned the sandbox off, or bubblewrap cannot work where the daemon runs. A
// configuration that requires it fails the kernel's start instead, with the reason.
func sandboxNote(st *server.DaemonStatusResult, dir string) string {
	mode := workspace.SandboxAuto
	if root, err := workspace.FindRoot(dir); err == nil {
		if cfg, err := workspace.Load(root, workspace.Overrides{}); err == nil {
			mode = cfg.Sandbox
		}
	}
	switch {
	case mode == workspace.SandboxOff:
		return `arbor: warning: "sandbox": "off" in the configuration: kernels run unsandboxed, and model-written code has your user's full access`
	case mode != workspace.SandboxBwrap && !st.Sandbox.Available:
		return "arbor: warning: kernels run unsandboxed, and model-written code has your user's full access: " + st.Sandbox.Reason
	}
	return ""
}

// follower prints a session's events until it settles.
type follower struct {
	w       *os.File
	json    bool
	events  chan server.Event
	behind  chan struct{}
	lastSeq uint64 // the follow loop's
	// untilGoalEnds follows past idle states to the end of the session's goal (an
	// autonomous run backs off and parks between its turns).
	untilGoalEnds bool

	mu   sync.Mutex
	next uint64 // the seq notify hands on next
}

func newFollower(w *os.File, asJSON bool) *follower {
	return &follower{w: w, json: asJSON, events: make(chan server.Event, followQueue()), behind: make(chan struct{}, 1), next: 1}
}

// defaultFollowQueue is how many events a follower holds before it falls behind and catches up
// from the log (followQueue; the tests' binary can make it smaller).
const defaultFollowQueue = 1024

// notify runs on the connection's reader and must never block it: a Call waiting for its
// reply would wait forever behind an event that cannot be handed on. It passes events on
// strictly in seq order; a gap (a live event ahead of the replay) or a full queue drops the
// event and asks the follow loop to reattach from the first missing seq.
func (f *follower) notify(method string, params json.RawMessage) {
	switch method {
	case server.NotifyEvent:
		var e server.Event
		if json.Unmarshal(params, &e) != nil {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if e.Seq < f.next {
			return // replay and live overlap
		}
		if e.Seq == f.next {
			select {
			case f.events <- e:
				f.next++
				return
			default:
			}
		}
		f.fellBehind()
	case server.NotifyFellBehind:
		f.fellBehind()
	}
}

func (f *follower) fellBehind() {
	select {
	case f.behind <- struct{}{}:
	default:
	}
}

// follow attaches and prints until the session is idle, failed, stopped or inactive. Exit
// status 1 when it failed.
func (f *follower) follow(ctx context.Context, c *server.Client, id string) error {
	if _, err := server.SessionAttach.Call(ctx, c, server.AttachParams{ID: id}); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.Done():
			return fmt.Errorf("the daemon closed the connection")
		case <-f.behind:
			f.mu.Lock()
			since := f.next
			f.mu.Unlock()
			if _, err := server.SessionAttach.Call(ctx, c, server.AttachParams{ID: id, SinceSeq: since}); err != nil {
				return err
			}
		case e := <-f.events:
			if e.Seq <= f.lastSeq {
				continue // replay and live may overlap
			}
			f.lastSeq = e.Seq
			printEvent(f.w, e, f.json)
			if f.untilGoalEnds {
				if goalEnded(e) {
					return nil
				}
				if st, err := event.As[event.StateChanged](event.Type(e.Type), e.Data); err == nil && st.State == event.Stopped {
					return nil
				}
				continue
			}
			if event.Type(e.Type) != event.TypeStateChanged {
				continue
			}
			if done, err := f.settledAfter(ctx, c, id, e); done || err != nil {
				return err
			}
		}
	}
}

// settledAfter reports whether the session has settled with e as its last state change; it
// prints the events that followed e, and returns exitCode(1) for a failed session.
func (f *follower) settledAfter(ctx context.Context, c *server.Client, id string, e server.Event) (bool, error) {
	st, err := event.As[event.StateChanged](event.Type(e.Type), e.Data)
	if err != nil || !settled(st.State) {
		return false, nil
	}
	lr, err := server.SessionLog.Call(ctx, c, server.LogParams{ID: id, SinceSeq: e.Seq + 1})
	if err != nil {
		return false, err
	}
	for _, later := range lr.Events {
		if event.Type(later.Type) == event.TypeStateChanged {
			return false, nil
		}
	}
	for _, later := range lr.Events {
		if later.Seq > f.lastSeq {
			f.lastSeq = later.Seq
			printEvent(f.w, later, f.json)
		}
	}
	if st.State == event.Failed {
		return true, exitCode(1)
	}
	return true, nil
}

// goalEnded reports whether e ends the session's goal: complete, stalled, out of budget or
// cleared (a pause is not an end: a resume continues the run).
func goalEnded(e server.Event) bool {
	g, err := event.As[event.GoalChanged](event.Type(e.Type), e.Data)
	return err == nil && g.Status != "active" && g.Status != "paused"
}

func settled(state event.State) bool {
	switch state {
	case event.Idle, event.Failed, event.Stopped, event.Inactive:
		return true
	}
	return false
}
