package agents

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/eventlog"
	"github.com/arborhq/arbor/agents/model"
	"github.com/arborhq/arbor/kernel"
	"github.com/arborhq/arbor/workspace"
)

// Meta is what a session is, fixed at creation and recorded as its first event.
type Meta = event.SessionCreated

// Info is a snapshot of a session for clients.
type Info struct {
	Meta
	State    State
	Error    string
	LastSeq  uint64
	Usage    Usage
	Total    Usage
	Children []string
	Depth    int
}

// pendingMsg is a message waiting for delivery at the recipient's next model call or turn.
type pendingMsg struct {
	Seq  uint64 `json:"seq"` // of its message_queued record
	From string `json:"from"`
	Text string `json:"text"`
	Mode string `json:"mode"`
}

// Session is one agent: a kernel, a branch and worktree, an event log. Its mutex guards the
// mutable fields; the turn goroutine is the only one that talks to the model and kernel.
type Session struct {
	svc  *Service
	ws   *Workspace
	meta Meta
	cfg  workspace.Config
	log  *eventlog.Log
	dir  string // sessions/<id>

	mu         sync.Mutex
	state      State
	errMsg     string
	usage      Usage
	children   []string
	pending    []pendingMsg
	turnActive bool
	turn       int
	cancelTurn context.CancelFunc
	conv       []model.Message
	head       string // latest checkpoint commit (or the base)
	toldParent bool   // this turn sent a message to the parent
	lastAnswer string // the final text of the latest turn
	idleTimer  *time.Timer
	rate       rateLimiter
	reserved   map[string]bool // child names being created

	watch *workspace.Watcher // changes in the worktree since the last checkpoint; nil = scan

	amu sync.Mutex // orders appends with their delivery to listeners: clients see seq order
	smu sync.Mutex // makes a state change's check, record and apply one step
	// unrecorded is true while the current state's record failed to be written (guarded by mu)
	unrecorded bool
	nmu        sync.Mutex // orders snapshots with their delivery: a stale snapshot never follows a newer one

	kmu    sync.Mutex // guards kern; held while starting one
	kern   *kernel.Kernel
	live   atomic.Bool // kern != nil, readable without waiting for a kernel start
	client *model.Client
}

// ID returns the session id.
func (s *Session) ID() string { return s.meta.ID }

// Meta returns the fixed description of the session.
func (s *Session) Meta() Meta { return s.meta }

// snapshot is taken between state changes (under smu): a state change records first and
// applies after, and a snapshot in between would pair the new record's seq with the old state.
func (s *Session) snapshot() Info {
	s.smu.Lock()
	defer s.smu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	return Info{Meta: s.meta, State: s.state, Error: s.errMsg, LastSeq: s.log.LastSeq(),
		Usage: s.usage, Children: append([]string(nil), s.children...)}
}

func (s *Session) usageNow() Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usage
}

func (s *Session) childIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.children...)
}

func (s *Session) hasKernel() bool { return s.live.Load() }

// busy reports whether a turn is running or about to.
func (s *Session) busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.turnActive
}

// append writes one event durably, then tells listeners. Durable writes outlive the request
// or turn that caused them.
func (s *Session) append(ctx context.Context, p event.Payload) (eventlog.Record, error) {
	typ := p.EventType()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	s.amu.Lock()
	defer s.amu.Unlock()
	rec, err := s.log.Append(ctx, string(typ), p)
	if err != nil {
		s.svc.log.Error("append event", "session", s.meta.ID, "type", typ, "err", err)
		return rec, fmt.Errorf("session %s: record %s: %w", s.meta.ID, typ, err)
	}
	s.svc.eachListener(func(l Listener) { l.Event(s.meta.ID, rec) })
	return rec, nil
}

// setState records a state change and announces the new snapshot. The record is durable
// before the state is visible in memory, so whoever sees the new state also finds its record
// in the log. Changes are serialised: stopped is final, and no record of a refused change (a
// turn going running or idle after a stop) ever follows it in the log.
//
// When the record cannot be written (a full disk) the state still changes in memory — a stop
// must stop the work — and the error is returned; setting the same state again retries the
// record.
func (s *Session) setState(ctx context.Context, st State, reason string) error {
	_, err := s.setStateIf(ctx, nil, st, reason)
	return err
}

// setStateIf is setState when the current state is one of from (any state when from is nil),
// decided under the same lock as the change. It reports whether it changed the state.
func (s *Session) setStateIf(ctx context.Context, from []State, st State, reason string) (bool, error) {
	s.smu.Lock()
	changed, err := s.changeStateLocked(ctx, from, st, reason)
	s.smu.Unlock()
	if changed {
		s.announce()
	}
	return changed, err
}

// changeStateLocked decides, records and applies a state change; the caller holds smu and
// announces when it reports a change.
func (s *Session) changeStateLocked(ctx context.Context, from []State, st State, reason string) (bool, error) {
	s.mu.Lock()
	cur, unrecorded, errMsg := s.state, s.unrecorded, s.errMsg
	s.mu.Unlock()
	retry := cur == st && unrecorded
	same := cur == st && (st != Failed || reason == errMsg) && !retry
	final := cur == Stopped && !retry // stopped is final: a late idle or inactive never undoes it
	if same || final || (from != nil && !slices.Contains(from, cur)) {
		return false, nil
	}
	_, err := s.append(ctx, event.StateChanged{State: st, Reason: reason})
	s.mu.Lock()
	s.state = st
	s.unrecorded = err != nil
	if st == Failed {
		s.errMsg = reason
	} else {
		s.errMsg = ""
	}
	s.mu.Unlock()
	return true, err
}

// startTurn records that turn n runs — the state running and turn_started, as one step with
// respect to Stop — and reports false, recording nothing, if the session was stopped.
func (s *Session) startTurn(ctx context.Context, n int) bool {
	s.smu.Lock()
	s.mu.Lock()
	stopped := s.state == Stopped
	s.mu.Unlock()
	if stopped {
		s.smu.Unlock()
		return false
	}
	changed, _ := s.changeStateLocked(ctx, nil, Running, "")
	s.append(ctx, event.TurnStarted{Turn: n})
	s.smu.Unlock()
	if changed {
		s.announce()
	}
	return true
}

// announce tells listeners the session's current snapshot. Taking the snapshot and delivering
// it under one lock keeps concurrent announcements (a turn going idle, a stop) in the order
// their snapshots were taken, so the last one a client receives is the newest.
func (s *Session) announce() {
	s.nmu.Lock()
	info := s.svc.info(s)
	s.svc.eachListener(func(l Listener) { l.SessionChanged(info) })
	s.nmu.Unlock()
	if s.meta.Parent != "" {
		if p, err := s.svc.Get(s.meta.Parent); err == nil {
			p.announce() // the parent's total changed too
		}
	}
}

// Events returns the session's records with seq >= from.
func (s *Session) Events(from uint64) ([]eventlog.Record, error) { return s.log.Records(from) }

// State returns the current state.
func (s *Session) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// shutdown ends the kernel and closes the log; used when the daemon stops.
func (s *Session) shutdown(ctx context.Context) error {
	s.stopKernel(ctx)
	s.mu.Lock()
	w := s.watch
	s.watch = nil
	s.mu.Unlock()
	if w != nil {
		w.Close()
	}
	return s.log.Close()
}

func (s *Session) stopKernel(ctx context.Context) {
	s.kmu.Lock()
	k := s.kern
	s.kern = nil
	s.live.Store(false)
	s.kmu.Unlock()
	if k != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := k.Close(ctx); err != nil {
			s.svc.log.Warn("close kernel", "session", s.meta.ID, "err", err)
		}
	}
}

func (s *Session) artifactsDir() string { return filepath.Join(s.dir, "artifacts") }
