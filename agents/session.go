package agents

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/eventlog"
	"github.com/arborhq/arbor/agents/model"
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
	Goal     *Goal // nil without one; Spent is not filled in here (see Service.GoalOf)
	// Discarded is set once the session was discarded; Archived is the ref keeping its work
	// then (refs/arbor/archive/…), empty when another branch held it or it was forced.
	Discarded bool
	Archived  string
	// WorktreeReleased is set while the session's worktree is given up under arbor.json's
	// "worktrees" bounds (its work on its branch; checked out again at its next use).
	WorktreeReleased bool
	// WorktreeQueued is set while a child's worktree waits to be written until the child
	// first gets a run slot (it is queued behind maxRunning): its branch exists, its files not.
	WorktreeQueued bool
	// WorktreeWriting is set while a new session's files are being written in the background
	// (its first cell waits for them; its branch can be read and diffed meanwhile).
	WorktreeWriting bool
}

// pendingMsg is a message waiting for delivery at the recipient's next model call or turn.
type pendingMsg struct {
	Seq  uint64 `json:"seq"` // of its message_queued record
	From string `json:"from"`
	Text string `json:"text"`
	Mode string `json:"mode"`
}

// holder says who holds a session's reservation: the one goroutine allowed to run a turn,
// take it inactive or merge into its worktree. The zero value is free.
type holder int

const (
	free        holder = iota
	turnHolder         // the turn goroutine (runTurns), from enqueue or recovery until it settles
	idleHolder         // goInactive, snapshotting and stopping the kernel
	mergeHolder        // a user's merge of a child into this session's worktree
)

// Session is one agent: a kernel, a branch and worktree, an event log.
//
// One mutex, mu, owns everything about the session that changes: lifecycle state, the
// conversation, pending messages, accounting, and the reservation (who may run a turn). A
// state change is decided, recorded and applied while mu is held, so no reader ever sees a
// state without its record, and stopped stays final. Announcements are taken and delivered
// under mu too, so listeners receive a session's snapshots in the order they were taken;
// the lock order is a session before its descendants (subtree totals) and before the
// service's lock. Event delivery is ordered by the log itself ([eventlog.Options.OnDurable]).
// The kernel has its own owner, [kernelSlot], because starting one takes seconds and must
// not hold up readers of the session.
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
	unrecorded bool // the current state's record failed to be written (a full disk)
	usage      Usage
	children   []string
	pending    []pendingMsg
	holder     holder
	turn       int
	lastCell   int // the execution count of the latest cell: new kernels continue from it
	cancelTurn context.CancelFunc
	conv       []model.Message
	head       string           // latest checkpoint commit (or the base)
	archived   *event.Discarded // the session's discarded event, once it has one (shown in Info)
	reviewMu   sync.Mutex       // held by an accept or reject of the session (see Review)
	toldParent bool             // this turn sent a message to the parent
	lastAnswer string           // the final text of the latest turn
	idleTimer  *time.Timer
	rate       rateLimiter
	reserved   map[string]bool    // child names being created
	watch      *workspace.Watcher // changes in the worktree since the last checkpoint; nil = scan
	// cellCheckpoint is closed when the checkpoint after the last cell, which runs while the
	// model is asked what next, is done; nil when none runs (see checkpointCell).
	cellCheckpoint chan struct{}
	wt             *worktreeGate // the worktree being written; nil once it was made before the session
	// released: the worktree was given up under arbor.json's bounds (reclaim.go); wtMu
	// orders releasing and restoring it. inactiveSince orders who gives it up first.
	released      bool
	wtMu          sync.Mutex
	inactiveSince time.Time

	kernel kernelSlot
	// client calls model, the configured model turns use: meta.Model until the user switches
	// it (a model_changed record). Both under mu: a switch lands while a turn runs.
	client *model.Client
	model  string
	title  string // an open session's name: its first user message's first line (under mu)

	goal         *goalState // nil without a goal (under mu)
	inbound      int64      // messages delivered from others than the goal loop and heartbeats (a goal's progress)
	interruptWhy string     // why the running turn was cancelled without a stop (see interrupt)

	harness turnHarness // the harness as of the current turn's start (under mu)
	// refineMu runs one refine of the session at a time; lastAutoRefine (under mu) is when
	// the last one started or ended, for the policy's cooldown, and refineRunning whether one
	// the policy started is under way.
	refineMu       sync.Mutex
	lastAutoRefine time.Time
	refineRunning  bool

	redactOnce sync.Once
	redactFn   func(string) string
}

// redactor returns the session's secret redaction (see newRedactor), built on first use.
func (s *Session) redactor() func(string) string {
	s.redactOnce.Do(func() { s.redactFn = newRedactor(s.cfg) })
	return s.redactFn
}

// ID returns the session id.
func (s *Session) ID() string { return s.meta.ID }

// Meta returns the fixed description of the session.
func (s *Session) Meta() Meta { return s.meta }

// modelClient returns the model client turns call and its configured name; a nil client is
// resolved again at the next turn.
func (s *Session) modelClient() (*model.Client, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.client, s.model
}

// task is what the session is for: its task, or an open session's first message.
func (s *Session) task() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.taskLocked()
}

func (s *Session) taskLocked() string {
	if s.meta.Task != "" {
		return s.meta.Task
	}
	return s.title
}

// noteTitle names an open session after its first user message (mu held).
func (s *Session) noteTitle(from, text string) {
	if !s.meta.Open || s.title != "" || from != "user" {
		return
	}
	line, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	if r := []rune(line); len(r) > 100 {
		line = string(r[:99]) + "…"
	}
	s.title = line
}

// snapshotLocked copies the session's own fields; the caller holds mu.
func (s *Session) snapshotLocked() Info {
	in := Info{Meta: s.meta, State: s.state, Error: s.errMsg, LastSeq: s.log.LastSeq(),
		Usage: s.usage, Children: append([]string(nil), s.children...)}
	in.Task, in.Model = s.taskLocked(), s.model
	if s.archived != nil {
		in.Discarded, in.Archived = true, s.archived.Archived
	}
	in.WorktreeReleased = s.released
	in.WorktreeQueued = s.wt != nil && s.wt.queued()
	in.WorktreeWriting = s.wt != nil && s.wt.writing()
	if s.goal != nil {
		g := s.goal.Goal
		g.LastCheck = nil
		in.Goal = &g
	}
	return in
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

func (s *Session) hasKernel() bool { return s.kernel.live() }

// busy reports whether the session is reserved: a turn running or about to, or a merge or
// the move to inactive under way.
func (s *Session) busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holder != free
}

// append writes one event durably; the log tells listeners (deliver), in seq order, before
// it returns. Durable writes outlive the request or turn that caused them.
func (s *Session) append(ctx context.Context, p event.Payload) (eventlog.Record, error) {
	typ := p.EventType()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	rec, err := s.log.Append(ctx, string(typ), p)
	if err != nil {
		s.svc.log.Error("append event", "session", s.meta.ID, "type", typ, "err", err)
		return rec, fmt.Errorf("session %s: record %s: %w", s.meta.ID, typ, err)
	}
	return rec, nil
}

// appendWritten records events with one write and returns once they are in the file, while
// their fsync goes on (eventlog.Log.Write): for a cell's start and result, which acknowledge
// nothing to anyone, so the tool loop waits for no fsync. A crash of the daemon loses none of
// them; a failed fsync fails the next record (the log's failure is sticky).
func (s *Session) appendWritten(ctx context.Context, ps ...event.Payload) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	entries := make([]eventlog.Entry, len(ps))
	for i, p := range ps {
		entries[i] = eventlog.Entry{Type: string(p.EventType()), Data: p}
	}
	if _, err := s.log.Write(ctx, entries...); err != nil {
		s.svc.log.Error("append events", "session", s.meta.ID, "type", ps[0].EventType(), "err", err)
		return fmt.Errorf("session %s: record %s: %w", s.meta.ID, ps[0].EventType(), err)
	}
	return nil
}

// publish is the log's OnDurable: it tells listeners of new records, in seq order.
func (s *Session) publish(recs []eventlog.Record) {
	for _, rec := range recs {
		s.svc.eachListener(func(l Listener) { l.Event(s.meta.ID, rec) })
	}
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
	changed, err := func() (bool, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.changeStateLocked(ctx, from, st, reason)
	}()
	if changed {
		s.announce()
	}
	return changed, err
}

// changeStateLocked decides, records and applies a state change; the caller holds mu and
// announces when it reports a change.
func (s *Session) changeStateLocked(ctx context.Context, from []State, st State, reason string) (bool, error) {
	cur := s.state
	retry := cur == st && s.unrecorded
	same := cur == st && (st != Failed || reason == s.errMsg) && !retry
	final := cur == Stopped && !retry // stopped is final: a late idle or inactive never undoes it
	if same || final || (from != nil && !slices.Contains(from, cur)) {
		return false, nil
	}
	_, err := s.append(ctx, event.StateChanged{State: st, Reason: reason})
	s.state = st
	if st == Inactive || st == Stopped {
		s.inactiveSince = time.Now()
		if s.cfg.Worktrees.Bounded() {
			s.svc.spawn(func() { s.svc.reclaimWorktrees(s.ws) })
		}
	}
	s.unrecorded = err != nil
	if st == Failed {
		s.errMsg = reason
	} else {
		s.errMsg = ""
	}
	return true, err
}

// startTurn records that turn n runs — the state running and turn_started, as one step with
// respect to Stop — and reports false, recording nothing, if the session was stopped.
func (s *Session) startTurn(ctx context.Context, n int) bool {
	started, changed := func() (bool, bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.state == Stopped {
			return false, false
		}
		changed, _ := s.changeStateLocked(ctx, nil, Running, "")
		s.append(ctx, event.TurnStarted{Turn: n})
		return true, changed
	}()
	if changed {
		s.announce()
	}
	return started
}

// announce tells listeners the session's current snapshot, then its parent's (whose total
// changed too). Taking the snapshot and delivering it under mu keeps concurrent
// announcements (a turn going idle, a stop) in the order their snapshots were taken, so the
// last one a client receives is the newest.
func (s *Session) announce() {
	func() {
		s.mu.Lock()
		defer s.mu.Unlock() // a panicking listener must not leave the session locked
		info := s.svc.infoLocked(s)
		s.svc.eachListener(func(l Listener) { l.SessionChanged(info) })
	}()
	if s.meta.Parent != "" {
		if p, err := s.svc.Get(s.meta.Parent); err == nil {
			p.announce()
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

// shutdown ends the kernel, stops the idle timer and closes the log; used when the daemon
// stops, after every goroutine of the session has returned.
func (s *Session) shutdown(ctx context.Context) error {
	s.stopKernel(ctx)
	s.mu.Lock()
	w := s.watch
	s.watch = nil
	s.mu.Unlock()
	if w != nil {
		w.Close()
	}
	if c, _ := s.modelClient(); c != nil {
		c.CloseIdleConnections() // kept-alive connections hold goroutines of their own
	}
	return s.log.Close()
}

// stopIdleTimer disarms the move to inactive.
func (s *Session) stopIdleTimer() {
	s.mu.Lock()
	if s.idleTimer != nil {
		s.idleTimer.Stop()
		s.idleTimer = nil
	}
	if s.goal != nil {
		s.goal.stopTimers() // the daemon is stopping: recovery re-arms them from the log
	}
	s.mu.Unlock()
}

func (s *Session) stopKernel(ctx context.Context) {
	if k := s.kernel.take(); k != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := k.Close(ctx); err != nil {
			s.svc.log.Warn("close kernel", "session", s.meta.ID, "err", err)
		}
	}
}

func (s *Session) artifactsDir() string { return filepath.Join(s.dir, "artifacts") }
