// Package agents owns sessions: their tree, lifecycle, turn loop, event logs and accounting.
//
// Call [New] to make a [Service], [Service.Recover] in the background to bring back the
// sessions of known workspaces, then [Service.Create] to start a session. Sessions outlive the
// request that created them; [Service.Close] stops every kernel and closes every log.
//
// # Ownership
//
// Each session has one owner for everything that changes: its mutex, with an explicit
// reservation (holder) saying which goroutine may run a turn, take the session inactive or
// merge into its worktree. A mutex rather than a goroutine receiving commands, because most
// operations are short reads and single-field updates made from many request goroutines, and
// a command loop would make every `arbor ls` wait behind a model call; what must be one step
// (deciding, recording and applying a state change) is done under the mutex, and readers get
// copies (Info). The event log orders the delivery of records to listeners itself, and the
// kernel has its own small owner (kernelSlot) because starting one takes seconds. Lock order:
// a session before its descendants, a session before the service.
//
// Every goroutine the service starts goes through Service.spawn, which Close waits for, and
// the idle timers are stopped by Close: after Close no goroutine of the service is left
// (TestGoroutinesBackAtBaselineAfterClose).
package agents

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/eventlog"
	"github.com/arborhq/arbor/kernel"
	"github.com/arborhq/arbor/sandbox"
	"github.com/arborhq/arbor/workspace"
)

// Options configure a Service.
type Options struct {
	// StateDir holds the registry of workspaces the daemon has served and the kernel
	// manager's state (orphan registry, fork server).
	StateDir string
	// MaxKernels bounds live kernel processes; idle ones beyond it are parked (0 = 16).
	MaxKernels int
	// PlainKernels launches every kernel with `python -m ipykernel_launcher`-style start
	// instead of the fork server and warm pool (slower; for debugging).
	PlainKernels bool
	// Overrides are the daemon's flags and environment; they beat every config file.
	Overrides workspace.Overrides
	// SocketDir is the daemon's control socket directory: invisible to sandboxed code.
	SocketDir string
	Logger    *slog.Logger

	// HeartbeatClaimed, when set, runs after a heartbeat's run is claimed and before it is
	// delivered (the daemon's crash tests kill it there).
	HeartbeatClaimed func(session, heartbeat string, run int)
	// WorktreeStep, when set, runs at each step of making or reclaiming a session's worktree
	// (the daemon's crash tests kill it there): "writing" once a new session's files begin
	// to be written (at its first run slot), with the session recorded.
	WorktreeStep func(session, step string)
	// CellRan, when set, is told each model cell's kernel round trip (the kernel's own time,
	// execute request to reply, as kernel.Result.Duration), right after the kernel answers:
	// `arbor bench agents` subtracts it from a tool round trip to find the harness's overhead.
	CellRan func(session string, kernel time.Duration)

	turnHook func(s *Session, turn int) // tests: runs at the start of every turn
}

// Validate checks required fields.
func (o Options) Validate() error {
	if o.StateDir == "" {
		return errors.New("agents: Options.StateDir is empty")
	}
	return nil
}

// ErrUnknownSession means no session matches an id.
var ErrUnknownSession = errors.New("unknown session")

// ErrInvalidState means a session cannot do what was asked in its current state.
var ErrInvalidState = errors.New("invalid session state")

// Listener observes sessions. Calls happen on the appending goroutine (SessionChanged with the
// session's lock held) and must not block or call back into the Service.
type Listener interface {
	SessionChanged(Info)
	Event(session string, rec eventlog.Record)
}

// Service owns every session of the daemon.
type Service struct {
	opts   Options
	log    *slog.Logger
	ctx    context.Context // lives as long as the service; turns derive from it
	cancel context.CancelFunc
	wg     sync.WaitGroup // turn goroutines

	mu         sync.Mutex
	workspaces map[string]*Workspace // by repo root
	sessions   map[string]*Session
	listeners  map[int]Listener
	kernels    kernelStarter
	sandbox    sandbox.Status // the probe's, at New
	nextL      int
	closed     bool
	beats      *heartbeats
	evals      evalState
	deciding   map[string]chan struct{} // proposals being decided, closed when done
	regMu      sync.Mutex               // the workspace registry file
}

// New makes a Service.
func New(opts Options) (*Service, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	st := sandbox.Probe(ctx)
	pool := 0 // sandboxed kernels (the default where bwrap works) never come from the pool
	if !st.Available {
		pool = 1
		opts.Logger.Warn("sandbox unavailable: kernels run unsandboxed unless the configuration requires the sandbox", "reason", st.Reason)
	}
	var kernels kernelStarter = plainKernels{}
	if !opts.PlainKernels {
		kernels = &managedKernels{cfg: kernel.ManagerConfig{
			Python: opts.Overrides.KernelPython, StateDir: filepath.Join(opts.StateDir, "kernels"),
			MaxLive: opts.MaxKernels, PoolSize: pool, Fork: true, Logger: opts.Logger}}
	}
	svc := &Service{
		kernels: kernels, sandbox: st,
		opts: opts, log: opts.Logger, ctx: ctx, cancel: cancel,
		workspaces: map[string]*Workspace{},
		sessions:   map[string]*Session{},
		listeners:  map[int]Listener{},
	}
	svc.beats = newHeartbeats(svc)
	return svc, nil
}

// Subscribe registers l until the returned function is called.
func (s *Service) Subscribe(l Listener) (cancel func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextL
	s.nextL++
	s.listeners[id] = l
	return func() {
		s.mu.Lock()
		delete(s.listeners, id)
		s.mu.Unlock()
	}
}

func (s *Service) eachListener(f func(Listener)) {
	s.mu.Lock()
	ls := make([]Listener, 0, len(s.listeners))
	for _, l := range s.listeners {
		ls = append(ls, l)
	}
	s.mu.Unlock()
	for _, l := range ls {
		f(l)
	}
}

// Get resolves an id or a unique prefix of at least 4 characters. A session is known only
// once its first state is recorded: before that it may still be undone.
func (s *Service) Get(id string) (*Session, error) {
	sess, err := s.lookup(id)
	if err != nil {
		return nil, err
	}
	if sess.State() == event.Unknown {
		return nil, fmt.Errorf("%w %q: it is still being created; try again in a moment", ErrUnknownSession, id)
	}
	return sess, nil
}

func (s *Service) lookup(id string) (*Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess, ok := s.sessions[id]; ok {
		return sess, nil
	}
	if len(id) < 4 {
		return nil, fmt.Errorf("%w %q: give at least 4 characters of the id (see `arbor ls`)", ErrUnknownSession, id)
	}
	var found *Session
	for sid, sess := range s.sessions {
		if strings.HasPrefix(sid, id) {
			if found != nil {
				return nil, fmt.Errorf("%w %q: the prefix matches several sessions; give more characters", ErrUnknownSession, id)
			}
			found = sess
		}
	}
	if found == nil {
		return nil, fmt.Errorf("%w %q (see `arbor ls`)", ErrUnknownSession, id)
	}
	return found, nil
}

// List returns sessions, parents before children, optionally only those of the repository
// containing dir.
func (s *Service) List(dir string) ([]Info, error) {
	root := ""
	if dir != "" {
		r, err := workspace.FindRoot(dir)
		if err != nil {
			return nil, err
		}
		root = r
	}
	s.mu.Lock()
	all := make([]*Session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		if root == "" || sess.ws.Root == root {
			all = append(all, sess)
		}
	}
	s.mu.Unlock()
	infos := make([]Info, 0, len(all))
	for _, sess := range all {
		if in := s.info(sess); in.State != event.Unknown { // not yet created: not shown
			infos = append(infos, in)
		}
	}
	sort.Slice(infos, func(i, j int) bool {
		if infos[i].Depth != infos[j].Depth {
			return infos[i].Depth < infos[j].Depth
		}
		return infos[i].Created.Before(infos[j].Created)
	})
	return infos, nil
}

// Overrides returns the settings the service was started with from flags and environment.
func (s *Service) Overrides() workspace.Overrides { return s.opts.Overrides }

// Info returns a snapshot of one session with its subtree totals.
func (s *Service) Info(sess *Session) Info { return s.info(sess) }

func (s *Service) info(sess *Session) Info {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	return s.infoLocked(sess)
}

// infoLocked is info for a caller holding sess.mu; it takes the locks of sess's descendants
// (a session's lock is taken before its descendants').
func (s *Service) infoLocked(sess *Session) Info {
	in := sess.snapshotLocked()
	in.Total = in.Usage
	for _, c := range in.Children {
		s.mu.Lock()
		cs := s.sessions[c]
		s.mu.Unlock()
		if cs != nil {
			in.Total = in.Total.Add(s.total(cs))
		}
	}
	d := 0
	for p := in.Parent; p != ""; d++ {
		s.mu.Lock()
		ps := s.sessions[p]
		s.mu.Unlock()
		if ps == nil {
			break
		}
		p = ps.meta.Parent
	}
	in.Depth = d
	return in
}

// total rolls usage up over every descendant: delegation is never free compute.
func (s *Service) total(sess *Session) Usage {
	u := sess.usageNow()
	for _, c := range sess.childIDs() {
		s.mu.Lock()
		cs := s.sessions[c]
		s.mu.Unlock()
		if cs != nil {
			u = u.Add(s.total(cs))
		}
	}
	return u
}

// Live counts sessions with a running kernel or a turn under way.
func (s *Service) Live() int {
	n := 0
	for _, sess := range s.all() {
		if sess.hasKernel() || sess.busy() {
			n++
		}
	}
	return n
}

// Count is the number of known sessions.
func (s *Service) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// Workspaces lists the repository roots the service has opened.
func (s *Service) Workspaces() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for r := range s.workspaces {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// Close stops every turn and kernel and closes the logs. Sessions stay on disk and come back
// with Recover.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true // from here on spawn starts nothing: wg.Wait below cannot miss one
	all := make([]*Session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		all = append(all, sess)
	}
	s.mu.Unlock()
	s.beats.close() // no tick is reported after this
	s.cancel()
	s.wg.Wait()
	// Again after the wait: an eval task that finished meanwhile dropped its sessions (and
	// closed them).
	s.mu.Lock()
	all = all[:0]
	for _, sess := range s.sessions {
		all = append(all, sess)
	}
	s.mu.Unlock()
	// After the wait: a turn that ended meanwhile may have armed its timer (which could no
	// longer spawn anything, but would stay armed).
	for _, sess := range all {
		sess.stopIdleTimer()
	}
	var errs []error
	for _, sess := range all {
		errs = append(errs, sess.shutdown(ctx))
	}
	if c, ok := s.kernels.(interface{ Close() error }); ok {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// spawn runs f in a goroutine of the service, which Close waits for; it reports false, and
// runs nothing, once Close has begun.
func (s *Service) spawn(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
	return true
}

// all returns the sessions; callers take session locks only after s.mu is released (lock
// order: a session's locks may be held while taking s.mu, never the reverse).
func (s *Service) all() []*Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		out = append(out, sess)
	}
	return out
}

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
