package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/arborhq/arbor/agents"
	"github.com/arborhq/arbor/agents/eventlog"
	"go.lsp.dev/jsonrpc2"
)

// queueLen bounds the notifications waiting for one client. A client that falls further
// behind loses events for the sessions it attached and gets arbor/fellBehind to reattach.
const queueLen = 4096

type outMsg struct {
	method  string
	params  any
	session string // for events: whose
}

// conn is one client connection's state.
type conn struct {
	srv *Server
	rpc jsonrpc2.Conn
	log *slog.Logger
	out chan outMsg

	attachMu sync.Mutex // serialises arbor/session.attach on this connection

	budget *budget // requests in flight and their bytes

	mu            sync.Mutex
	initStarted   bool // an initialize request was read
	initialized   bool
	shutdown      bool
	rootDir       string
	caps          clientCaps
	attached      map[string]bool
	replaying     map[string][]eventlog.Record       // live events held back while a replay is queued
	behind        map[string]uint64                  // session → last seq queued before events were dropped
	late          []outMsg                           // tree and progress messages held while the queue was full
	progress      map[string]string                  // session → progress token
	progressBegun map[string]chan struct{}           // token → closed once its begin was sent (or failed)
	progressOpen  map[string]bool                    // tokens whose begin was queued: only they get an end
	inflight      map[jsonrpc2.ID]context.CancelFunc // cancellable requests being served
	unsubscribe   func()
	requests      sync.WaitGroup  // handlers in flight
	closing       bool            // set once the connection ends: no new background work
	life          context.Context // cancelled when the connection ends
	background    sync.WaitGroup  // progress reports in flight
}

type clientCaps struct {
	WorkDoneProgress bool
}

func (srv *Server) serveConn(ctx context.Context, nc net.Conn) {
	c := &conn{
		srv: srv, log: srv.log, out: make(chan outMsg, max(srv.opts.EventQueue, 1)),
		attached: map[string]bool{}, replaying: map[string][]eventlog.Record{}, behind: map[string]uint64{}, progress: map[string]string{}, progressBegun: map[string]chan struct{}{}, progressOpen: map[string]bool{},
		inflight: map[jsonrpc2.ID]context.CancelFunc{},
		budget:   newBudget(srv.opts.MaxInFlight, srv.opts.MaxInFlightBytes),
	}
	st := newStream(nc)
	st.writeTimeout = srv.opts.WriteTimeout
	st.gate, st.pace = srv.frames, srv.pace
	c.rpc = jsonrpc2.NewConn(st)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.life = ctx
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); c.writeLoop(ctx) }()
	c.rpc.Go(ctx, c.handle)
	c.unsubscribe = srv.agents.Subscribe(c)
	select {
	case <-c.rpc.Done():
	case <-ctx.Done():
		c.rpc.Close()
		<-c.rpc.Done()
	}
	c.unsubscribe()
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	cancel()
	wg.Wait()
	c.requests.Wait()
	c.background.Wait()
}

// writeLoop sends queued notifications in order.
func (c *conn) writeLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-c.out:
			if err := c.rpc.Notify(ctx, m.method, m.params); err != nil {
				return
			}
			c.flushBehind(ctx)
		}
	}
}

func (c *conn) flushBehind(ctx context.Context) {
	c.mu.Lock()
	if len(c.behind) == 0 && len(c.late) == 0 || len(c.out) > cap(c.out)/2 {
		c.mu.Unlock()
		return
	}
	if !c.flushLateLocked() {
		c.mu.Unlock()
		return
	}
	behind := c.behind
	c.behind = map[string]uint64{}
	c.mu.Unlock()
	for sess, seq := range behind {
		c.rpc.Notify(ctx, NotifyFellBehind, &FellBehindParams{Session: sess, LastSeq: seq})
	}
}

// enqueue never blocks: a full queue detaches the session's events and marks it behind.
func (c *conn) enqueue(m outMsg, seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.enqueueLocked(m, seq)
}

func (c *conn) enqueueLocked(m outMsg, seq uint64) {
	if m.session == "" && len(c.late) > 0 {
		c.holdLocked(m) // behind held tree and progress messages, never before them
		return
	}
	select {
	case c.out <- m:
	default:
		if m.session == "" {
			c.holdLocked(m)
			return
		}
		delete(c.attached, m.session)
		if _, ok := c.behind[m.session]; !ok {
			c.behind[m.session] = seq - 1
		}
	}
}

// flushLateLocked moves held tree and progress messages to the back of the queue, after what
// was queued before them, so a progress end never overtakes its begin. It reports whether all
// of them fit.
func (c *conn) flushLateLocked() bool {
	late := c.late
	c.late = nil
	for i, m := range late {
		select {
		case c.out <- m:
		default:
			c.late = append(c.late, late[i:]...)
			return false
		}
	}
	return true
}

// holdLocked keeps a tree or progress message the full queue could not take; flushBehind
// queues it once there is room. Session deltas are coalesced (the newest of a session wins, a
// full tree replaces them all), so what is held stays as small as the tree.
func (c *conn) holdLocked(m outMsg) {
	if p, ok := m.params.(*SessionTreeParams); ok {
		if p.Full {
			kept := c.late[:0]
			for _, h := range c.late {
				if _, tree := h.params.(*SessionTreeParams); !tree {
					kept = append(kept, h)
				}
			}
			c.late = append(kept, m)
			return
		}
		if len(p.Sessions) == 1 {
			for i, h := range c.late {
				if hp, ok := h.params.(*SessionTreeParams); ok && !hp.Full && len(hp.Sessions) == 1 && hp.Sessions[0].ID == p.Sessions[0].ID {
					c.late = append(c.late[:i], c.late[i+1:]...)
					break
				}
			}
		}
	}
	c.late = append(c.late, m)
}

func eventMsg(session string, rec eventlog.Record) outMsg {
	return outMsg{method: NotifyEvent, session: session, params: &Event{
		Session: session, Seq: rec.Seq, TS: rec.TS, Type: rec.Type, Data: rec.Data}}
}

// Event implements agents.Listener. Events of a session whose replay is being queued wait, so
// a client always sees a session's events in seq order.
func (c *conn) Event(session string, rec eventlog.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if held, ok := c.replaying[session]; ok {
		c.replaying[session] = append(held, rec)
		return
	}
	if c.attached[session] {
		c.enqueueLocked(eventMsg(session, rec), rec.Seq)
	}
}

// SessionChanged implements agents.Listener.
func (c *conn) SessionChanged(info agents.Info) {
	c.mu.Lock()
	ready := c.initialized
	c.mu.Unlock()
	if !ready {
		return
	}
	c.enqueue(outMsg{method: NotifySessionTree, params: &SessionTreeParams{Sessions: []Session{toSession(info)}}}, 0)
	c.progressFor(info)
}

// call sends a server→client request; used for progress creation.
func (c *conn) call(ctx context.Context, method string, params, result any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := c.rpc.Call(ctx, method, params, result)
	return err
}

func decode[T any](raw json.RawMessage) (T, error) {
	var v T
	// No params, null, and an empty array (what Neovim sends for an empty Lua table) all mean
	// "no params".
	if t := strings.TrimSpace(string(raw)); t == "" || t == "null" || t == "[]" {
		return v, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, errInvalidParams{fmt.Sprintf("invalid params: %v", err)}
	}
	return v, nil
}
