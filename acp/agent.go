package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/coder/acp-go-sdk"
	"go.lsp.dev/jsonrpc2"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/server"
)

// ProtocolVersion is the one ACP version Arbor speaks.
const ProtocolVersion = sdk.ProtocolVersionNumber

// DialFunc connects to the daemon (starting it when needed) and initializes the connection;
// onNotify receives every daemon notification, in order, on the connection's reader.
type DialFunc func(ctx context.Context, onNotify func(method string, params json.RawMessage)) (*server.Client, error)

// Options configure an Agent.
type Options struct {
	Dial     DialFunc
	StateDir string // where modes and recorded MCP servers are kept (acp/ under it)
	Version  string // Arbor's version, for initialize
	Logger   *slog.Logger
	// OutboxHook, when set, sees the outbox's pending count after each push (benchmarks).
	OutboxHook func(pending int)
}

// Agent is one ACP connection's agent: it implements the SDK's Agent interfaces.
type Agent struct {
	opts  Options
	log   *slog.Logger
	conn  *sdk.AgentSideConnection // see peer
	ready chan struct{}
	out   *outbox
	state *stateFile

	dmu    sync.Mutex
	daemon *server.Client

	applies atomic.Int64 // numbers the apply tool calls, so each is its own

	mu       sync.Mutex
	caps     sdk.ClientCapabilities
	sessions map[string]*session       // the ACP sessions of this connection, by id
	tree     map[string]server.Session // every session the daemon told of, by id
}

// Serve runs the agent on one ACP connection (the editor's stdio) until the client goes away.
// Sessions keep running in the daemon after it returns.
func Serve(ctx context.Context, opts Options, in io.Reader, out io.Writer) error {
	a := New(opts)
	// The connection reads (and may call the agent) as soon as it exists: everything that
	// uses it waits for peer() to be ready.
	a.out = newOutbox(func(ctx context.Context, n sdk.SessionNotification) error {
		return a.peer().SessionUpdate(ctx, n)
	}, opts.OutboxHook)
	// The SDK logs through slog's default logger (its SetLogger would race with the reader it
	// has already started): the caller sets that (cmd/arbor does, to stderr).
	lw := &lockedWriter{w: out}
	a.conn = sdk.NewAgentSideConnection(a, lw, newLineGuard(in, lw, a.log))
	close(a.ready)
	defer a.close()
	select {
	case <-a.conn.Done():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// New makes an agent; Serve connects it. Tests use New with their own connection.
func New(opts Options) *Agent {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return &Agent{opts: opts, log: log, state: openState(opts.StateDir, log), ready: make(chan struct{}),
		sessions: map[string]*session{}, tree: map[string]server.Session{}}
}

// peer is the connection to the client, once Serve made it.
func (a *Agent) peer() *sdk.AgentSideConnection {
	<-a.ready
	return a.conn
}

func (a *Agent) close() {
	a.out.close()
	a.dmu.Lock()
	d := a.daemon
	a.daemon = nil
	a.dmu.Unlock()
	if d != nil {
		d.Close()
	}
}

// client returns the daemon connection, dialling (and reattaching this connection's
// sessions) when there is none or the last one closed: a daemon that restarted is found again.
func (a *Agent) client(ctx context.Context) (*server.Client, error) {
	a.dmu.Lock()
	defer a.dmu.Unlock()
	if d := a.daemon; d != nil {
		select {
		case <-d.Done():
			a.daemon = nil
		default:
			return d, nil
		}
	}
	d, err := a.opts.Dial(ctx, a.onDaemon)
	if err != nil {
		return nil, reqErr(sdk.NewInternalError(nil).Code, "cannot reach the arbor daemon: "+err.Error())
	}
	a.daemon = d
	a.mu.Lock()
	var again []*session
	for _, s := range a.sessions {
		again = append(again, s)
	}
	a.mu.Unlock()
	for _, s := range again {
		s.mu.Lock()
		since := s.lastSeq + 1
		s.mu.Unlock()
		if _, err := server.SessionAttach.Call(ctx, d, server.AttachParams{ID: s.id, SinceSeq: since}); err != nil {
			a.log.Warn("reattach after the daemon came back", "session", s.id, "err", err)
		}
	}
	go a.watch(d)
	return d, nil
}

// watch fails the prompts waiting on a daemon connection that ended.
func (a *Agent) watch(d *server.Client) {
	<-d.Done()
	a.mu.Lock()
	var ss []*session
	for _, s := range a.sessions {
		ss = append(ss, s)
	}
	a.mu.Unlock()
	for _, s := range ss {
		s.daemonGone()
	}
}

// onDaemon handles one daemon notification, on the daemon connection's reader: it must not
// call the daemon (that would wait on itself) and must not block on the client.
func (a *Agent) onDaemon(method string, params json.RawMessage) {
	defer a.recoverLog("daemon notification " + method)
	switch method {
	case server.NotifyEvent:
		var ev server.Event
		if err := json.Unmarshal(params, &ev); err != nil {
			a.log.Warn("undecodable event from the daemon", "err", err)
			return
		}
		if s := a.session(ev.Session); s != nil {
			s.onEvent(ev)
		}
	case server.NotifySessionTree:
		var p server.SessionTreeParams
		if err := json.Unmarshal(params, &p); err != nil {
			return
		}
		a.mu.Lock()
		if p.Full {
			a.tree = map[string]server.Session{}
		}
		changed := map[string]bool{}
		for _, s := range p.Sessions {
			a.tree[s.ID] = s
			changed[s.ID] = true
			if s.Parent != "" {
				changed[s.Parent] = true
			}
		}
		var touched []*session
		for id := range changed {
			if s := a.sessions[id]; s != nil {
				touched = append(touched, s)
			}
		}
		a.mu.Unlock()
		for _, s := range touched {
			s.treeChanged()
		}
	case server.NotifyFellBehind:
		var p server.FellBehindParams
		if json.Unmarshal(params, &p) != nil {
			return
		}
		if s := a.session(p.Session); s != nil {
			go s.reattach()
		}
	}
}

func (a *Agent) session(id string) *session {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sessions[id]
}

// treeOf is the session's subtree as the daemon last described it, root first.
func (a *Agent) treeOf(id string) []server.Session {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []server.Session
	var walk func(id string, depth int)
	walk = func(id string, depth int) {
		s, ok := a.tree[id]
		if !ok || depth > 64 {
			return
		}
		out = append(out, s)
		for _, c := range s.Children {
			walk(c, depth+1)
		}
	}
	walk(id, 0)
	return out
}

func (a *Agent) recoverLog(what string) {
	if p := recover(); p != nil {
		a.log.Error("panic in arbor acp", "in", what, "panic", p, "stack", string(debug.Stack()))
	}
}

// guard turns a panic in a request handler into an internal error answer: the connection and
// its other sessions go on.
func guard(a *Agent, what string, err *error) {
	if p := recover(); p != nil {
		a.log.Error("panic in arbor acp", "in", what, "panic", p, "stack", string(debug.Stack()))
		*err = reqErr(-32603, fmt.Sprintf("internal error in arbor acp (%v) while handling %s; it was logged", p, what))
	}
}

// Initialize negotiates the protocol version and says what Arbor does.
func (a *Agent) Initialize(ctx context.Context, p sdk.InitializeRequest) (_ sdk.InitializeResponse, err error) {
	defer guard(a, "initialize", &err)
	if p.ProtocolVersion < 1 {
		return sdk.InitializeResponse{}, &sdk.RequestError{Code: -32602,
			Message: fmt.Sprintf("ACP protocol version %d is not spoken here: Arbor speaks version %d", p.ProtocolVersion, ProtocolVersion),
			Data:    map[string]any{"supported": []int{ProtocolVersion}}}
	}
	a.mu.Lock()
	a.caps = p.ClientCapabilities
	a.mu.Unlock()
	// A newer client is answered with the version Arbor speaks (the protocol's negotiation):
	// it decides whether it can talk that one.
	return sdk.InitializeResponse{
		ProtocolVersion: ProtocolVersion,
		AgentInfo:       &sdk.Implementation{Name: "arbor", Title: sdk.Ptr("Arbor"), Version: a.opts.Version},
		AgentCapabilities: sdk.AgentCapabilities{
			LoadSession:        true,
			PromptCapabilities: sdk.PromptCapabilities{EmbeddedContext: true},
			SessionCapabilities: sdk.SessionCapabilities{
				List: &sdk.SessionListCapabilities{}, Resume: &sdk.SessionResumeCapabilities{},
				Fork: &sdk.SessionForkCapabilities{},
			},
			Meta: map[string]any{"arbor": map[string]any{
				"tree": true, "modes": []string{modeReview, modeBranch, modeApply},
				"fork": "session/fork takes _meta.arbor.atSeq: any event's seq (every update's _meta.arbor.seq)",
			}},
		},
		AuthMethods: []sdk.AuthMethod{},
	}, nil
}

// Authenticate is not needed: the daemon is the user's own, reached over a private socket.
func (a *Agent) Authenticate(ctx context.Context, p sdk.AuthenticateRequest) (sdk.AuthenticateResponse, error) {
	return sdk.AuthenticateResponse{}, nil
}

// NewSession opens a root session in the repository containing cwd.
func (a *Agent) NewSession(ctx context.Context, p sdk.NewSessionRequest) (_ sdk.NewSessionResponse, err error) {
	defer guard(a, "session/new", &err)
	if err := checkCwd(p.Cwd); err != nil {
		return sdk.NewSessionResponse{}, err
	}
	d, err := a.client(ctx)
	if err != nil {
		return sdk.NewSessionResponse{}, err
	}
	info, err := server.SessionCreate.Call(ctx, d, server.SessionCreateParams{Dir: p.Cwd, Open: true})
	if err != nil {
		return sdk.NewSessionResponse{}, daemonErr("session/new", err)
	}
	declined := mcpNames(p.McpServers)
	a.state.set(info.ID, func(st *sessionState) { st.Mode = modeReview; st.MCPServers = declined })
	s, err := a.open(ctx, d, *info, p.Cwd, info.LastSeq+1, false)
	if err != nil {
		return sdk.NewSessionResponse{}, err
	}
	meta := map[string]any{"branch": info.Branch, "worktree": info.Worktree}
	if len(declined) > 0 {
		s.mu.Lock()
		s.notice = mcpNotice(declined)
		s.mu.Unlock()
		meta["mcpServersDeclined"] = declined
		meta["mcpServersNote"] = mcpNotice(declined)
	}
	return sdk.NewSessionResponse{SessionId: sdk.SessionId(info.ID), Modes: a.modes(info.ID),
		Models: a.models(ctx, d, p.Cwd, info.Model), Meta: map[string]any{"arbor": meta}}, nil
}

// LoadSession replays the session's whole history as updates, then goes on live.
func (a *Agent) LoadSession(ctx context.Context, p sdk.LoadSessionRequest) (_ sdk.LoadSessionResponse, err error) {
	defer guard(a, "session/load", &err)
	info, d, err := a.lookup(ctx, string(p.SessionId))
	if err != nil {
		return sdk.LoadSessionResponse{}, err
	}
	if s := a.session(info.ID); s != nil {
		s.mu.Lock()
		busy := s.turn != nil
		s.mu.Unlock()
		if busy {
			return sdk.LoadSessionResponse{}, reqErr(-32602, fmt.Sprintf("session/load: session %s runs a prompt of this connection; it is loaded already", short(info.ID)))
		}
	}
	// A fork's log starts at the fork: the conversation before it is its source's, up to the
	// event it was forked at (and so on for a fork of a fork), replayed first.
	if err := a.replayAncestry(ctx, d, info); err != nil {
		return sdk.LoadSessionResponse{}, err
	}
	s, err := a.open(ctx, d, info, cmpOr(p.Cwd, info.Workspace), 1, true)
	if err != nil {
		return sdk.LoadSessionResponse{}, err
	}
	if err := s.waitReplayed(ctx); err != nil {
		return sdk.LoadSessionResponse{}, err
	}
	if err := a.out.flush(ctx); err != nil {
		return sdk.LoadSessionResponse{}, err
	}
	return sdk.LoadSessionResponse{Modes: a.modes(info.ID), Models: a.models(ctx, d, info.Workspace, info.Model)}, nil
}

// replayAncestry sends, as updates of fork, the history its log does not hold: its source's
// events up to the fork point, after the source's own ancestry. Their _meta.arbor names the
// session they are in (source) and their seq there — a fork point for session/fork of it.
func (a *Agent) replayAncestry(ctx context.Context, d *server.Client, fork server.Session) error {
	type span struct {
		id   string
		upTo uint64
	}
	var chain []span
	for cur := fork; cur.ForkOf != ""; {
		if len(chain) > 64 {
			break
		}
		chain = append(chain, span{cur.ForkOf, cur.ForkSeq})
		src, err := server.SessionGet.Call(ctx, d, server.SessionRef{ID: cur.ForkOf})
		if err != nil {
			a.log.Warn("the source of a fork is gone; its history before the fork is not replayed", "fork", fork.ID, "source", cur.ForkOf, "err", err)
			break
		}
		cur = *src
	}
	if len(chain) == 0 {
		return nil
	}
	tr := newSession(a, fork, "") // translation state of its own: the fork's starts afresh
	tr.replaying = true
	for i := len(chain) - 1; i >= 0; i-- {
		sp := chain[i]
		for since := uint64(1); since <= sp.upTo; {
			res, err := server.SessionLog.Call(ctx, d, server.LogParams{ID: sp.id, SinceSeq: since, Limit: 500})
			if err != nil {
				return daemonErr("session/load", err)
			}
			if len(res.Events) == 0 {
				break
			}
			for _, ev := range res.Events {
				if ev.Seq > sp.upTo {
					break
				}
				since = ev.Seq + 1
				if ev.Type == string(event.TypeSubagentSpawned) || ev.Type == string(event.TypeSessionCreated) {
					continue // the source's children and description are not the fork's
				}
				tr.mu.Lock()
				updates := tr.translate(ev)
				tr.mu.Unlock()
				meta := map[string]any{"arbor": map[string]any{"session": fork.ID, "source": sp.id, "seq": ev.Seq, "event": ev.Type}}
				for _, u := range updates {
					a.out.push(sdk.SessionNotification{SessionId: sdk.SessionId(fork.ID), Update: u, Meta: meta})
				}
			}
			if res.Events[len(res.Events)-1].Seq >= sp.upTo {
				break
			}
		}
	}
	return nil
}

// ResumeSession goes on with a session without replaying its history.
func (a *Agent) ResumeSession(ctx context.Context, p sdk.ResumeSessionRequest) (_ sdk.ResumeSessionResponse, err error) {
	defer guard(a, "session/resume", &err)
	info, d, err := a.lookup(ctx, string(p.SessionId))
	if err != nil {
		return sdk.ResumeSessionResponse{}, err
	}
	if _, err := a.open(ctx, d, info, cmpOr(p.Cwd, info.Workspace), info.LastSeq+1, false); err != nil {
		return sdk.ResumeSessionResponse{}, err
	}
	return sdk.ResumeSessionResponse{Modes: a.modes(info.ID), Models: a.models(ctx, d, info.Workspace, info.Model)}, nil
}

// UnstableForkSession forks a session at _meta.arbor.atSeq (any event) or at its latest
// checkpoint: a new session on a new branch with the history up to there.
func (a *Agent) UnstableForkSession(ctx context.Context, p sdk.UnstableForkSessionRequest) (_ sdk.UnstableForkSessionResponse, err error) {
	defer guard(a, "session/fork", &err)
	src, d, err := a.lookup(ctx, string(p.SessionId))
	if err != nil {
		return sdk.UnstableForkSessionResponse{}, err
	}
	var at uint64
	if m, ok := p.Meta["arbor"].(map[string]any); ok {
		switch v := m["atSeq"].(type) {
		case float64:
			if v < 1 || v != float64(uint64(v)) {
				return sdk.UnstableForkSessionResponse{}, reqErr(-32602, fmt.Sprintf("session/fork: _meta.arbor.atSeq %v is not an event seq (a whole number from 1)", v))
			}
			at = uint64(v)
		case nil:
		default:
			return sdk.UnstableForkSessionResponse{}, reqErr(-32602, fmt.Sprintf("session/fork: _meta.arbor.atSeq must be a number, got %T", v))
		}
	}
	info, err := server.SessionFork.Call(ctx, d, server.ForkParams{ID: src.ID, AtSeq: at})
	if err != nil {
		return sdk.UnstableForkSessionResponse{}, daemonErr("session/fork", err)
	}
	mode := a.state.get(src.ID).Mode
	a.state.set(info.ID, func(st *sessionState) { st.Mode = mode })
	if _, err := a.open(ctx, d, *info, cmpOr(p.Cwd, info.Workspace), info.LastSeq+1, false); err != nil {
		return sdk.UnstableForkSessionResponse{}, err
	}
	var models *sdk.UnstableSessionModelState
	if m := a.models(ctx, d, info.Workspace, info.Model); m != nil {
		models = &sdk.UnstableSessionModelState{CurrentModelId: sdk.UnstableModelId(m.CurrentModelId)}
		for _, x := range m.AvailableModels {
			models.AvailableModels = append(models.AvailableModels, sdk.UnstableModelInfo{ModelId: sdk.UnstableModelId(x.ModelId), Name: x.Name, Description: x.Description})
		}
	}
	return sdk.UnstableForkSessionResponse{SessionId: sdk.SessionId(info.ID), Modes: a.modes(info.ID), Models: models,
		Meta: map[string]any{"arbor": map[string]any{"forkOf": src.ID, "forkSeq": info.ForkSeq, "branch": info.Branch}}}, nil
}

const listPage = 100

// ListSessions lists the sessions of the cwd's repository (or every one), newest first, a
// page at a time.
func (a *Agent) ListSessions(ctx context.Context, p sdk.ListSessionsRequest) (_ sdk.ListSessionsResponse, err error) {
	defer guard(a, "session/list", &err)
	dir := ""
	if p.Cwd != nil {
		if err := checkCwd(*p.Cwd); err != nil {
			return sdk.ListSessionsResponse{}, err
		}
		dir = *p.Cwd
	}
	start := 0
	if p.Cursor != nil {
		n, err := strconv.Atoi(*p.Cursor)
		if err != nil || n < 0 {
			return sdk.ListSessionsResponse{}, reqErr(-32602, fmt.Sprintf("session/list: cursor %q is not one this agent gave", *p.Cursor))
		}
		start = n
	}
	d, err := a.client(ctx)
	if err != nil {
		return sdk.ListSessionsResponse{}, err
	}
	res, err := server.Sessions.Call(ctx, d, server.SessionsParams{Dir: dir})
	if err != nil {
		return sdk.ListSessionsResponse{}, daemonErr("session/list", err)
	}
	all := res.Sessions
	sort.SliceStable(all, func(i, j int) bool { return all[i].Created.After(all[j].Created) })
	out := sdk.ListSessionsResponse{Sessions: []sdk.SessionInfo{}}
	for i := start; i < len(all) && i < start+listPage; i++ {
		s := all[i]
		out.Sessions = append(out.Sessions, sdk.SessionInfo{
			SessionId: sdk.SessionId(s.ID), Cwd: s.Workspace, Title: sdk.Ptr(title(s)),
			UpdatedAt: sdk.Ptr(s.Created.UTC().Format(time.RFC3339)),
			Meta: map[string]any{"arbor": map[string]any{"state": s.State, "branch": s.Branch, "parent": s.Parent,
				"forkOf": s.ForkOf, "discarded": s.Discarded}},
		})
	}
	if start+listPage < len(all) {
		out.NextCursor = sdk.Ptr(strconv.Itoa(start + listPage))
	}
	return out, nil
}

// CloseSession is not offered (sessions outlive the connection); detach happens on exit.
func (a *Agent) CloseSession(ctx context.Context, p sdk.CloseSessionRequest) (sdk.CloseSessionResponse, error) {
	return sdk.CloseSessionResponse{}, sdk.NewMethodNotFound("session/close")
}

// SetSessionConfigOption: Arbor offers no config options (models and modes have their methods).
func (a *Agent) SetSessionConfigOption(ctx context.Context, p sdk.SetSessionConfigOptionRequest) (sdk.SetSessionConfigOptionResponse, error) {
	return sdk.SetSessionConfigOptionResponse{}, reqErr(-32602, "session/set_config_option: Arbor has no config options; use session/set_mode and session/set_model")
}

// SetSessionMode sets what may leave the session's branch (see the package doc).
func (a *Agent) SetSessionMode(ctx context.Context, p sdk.SetSessionModeRequest) (_ sdk.SetSessionModeResponse, err error) {
	defer guard(a, "session/set_mode", &err)
	mode := string(p.ModeId)
	if !validMode(mode) {
		return sdk.SetSessionModeResponse{}, reqErr(-32602, fmt.Sprintf("session/set_mode: no mode %q; the modes are %s, %s and %s", mode, modeReview, modeBranch, modeApply))
	}
	s := a.session(string(p.SessionId))
	if s == nil {
		return sdk.SetSessionModeResponse{}, reqErr(-32002, fmt.Sprintf("session/set_mode: session %q is not open on this connection; session/load or session/resume it first", p.SessionId))
	}
	a.state.set(s.id, func(st *sessionState) { st.Mode = mode })
	return sdk.SetSessionModeResponse{}, nil
}

// UnstableSetSessionModel switches the model the session's turns call.
func (a *Agent) UnstableSetSessionModel(ctx context.Context, p sdk.UnstableSetSessionModelRequest) (_ sdk.UnstableSetSessionModelResponse, err error) {
	defer guard(a, "session/set_model", &err)
	d, err := a.client(ctx)
	if err != nil {
		return sdk.UnstableSetSessionModelResponse{}, err
	}
	if _, err := server.SessionSetModel.Call(ctx, d, server.SetModelParams{ID: string(p.SessionId), Model: string(p.ModelId)}); err != nil {
		return sdk.UnstableSetSessionModelResponse{}, daemonErr("session/set_model", err)
	}
	return sdk.UnstableSetSessionModelResponse{}, nil
}

// lookup finds a session in the daemon.
func (a *Agent) lookup(ctx context.Context, id string) (server.Session, *server.Client, error) {
	if strings.TrimSpace(id) == "" {
		return server.Session{}, nil, reqErr(-32602, "no sessionId given")
	}
	d, err := a.client(ctx)
	if err != nil {
		return server.Session{}, nil, err
	}
	info, err := server.SessionGet.Call(ctx, d, server.SessionRef{ID: id})
	if err != nil {
		return server.Session{}, nil, daemonErr("session "+id, err)
	}
	return *info, d, nil
}

// open registers the ACP session and attaches to its events from since (1 = its whole
// history, replayed).
func (a *Agent) open(ctx context.Context, d *server.Client, info server.Session, cwd string, since uint64, replay bool) (*session, error) {
	a.mu.Lock()
	s := a.sessions[info.ID]
	if s == nil {
		s = newSession(a, info, cwd)
		a.sessions[info.ID] = s
	}
	a.tree[info.ID] = info
	a.mu.Unlock()
	s.mu.Lock()
	s.replaying = replay
	if replay {
		s.reset()
	}
	if since > 0 {
		s.lastSeq = since - 1
	}
	// Replayed events arrive while the attach is answered: the replay runs at least to the
	// seq the session had before it, and to the attach's own once that is known.
	s.replayTo = info.LastSeq
	s.mu.Unlock()
	res, err := server.SessionAttach.Call(ctx, d, server.AttachParams{ID: info.ID, SinceSeq: since})
	if err != nil {
		return nil, daemonErr("attach "+info.ID, err)
	}
	s.mu.Lock()
	s.replayTo = max(s.replayTo, res.Session.LastSeq)
	if s.replaying && s.lastSeq >= s.replayTo {
		s.replaying = false
		close(s.replayed)
	}
	s.mu.Unlock()
	return s, nil
}

func (a *Agent) modes(id string) *sdk.SessionModeState {
	st := a.state.get(id)
	m := &sdk.SessionModeState{CurrentModeId: sdk.SessionModeId(st.Mode)}
	for _, x := range modeList {
		m.AvailableModes = append(m.AvailableModes, sdk.SessionMode{Id: sdk.SessionModeId(x.id), Name: x.name, Description: sdk.Ptr(x.desc)})
	}
	return m
}

func (a *Agent) models(ctx context.Context, d *server.Client, dir, current string) *sdk.SessionModelState {
	res, err := server.Models.Call(ctx, d, server.ModelsParams{Dir: dir})
	if err != nil {
		a.log.Warn("list models", "dir", dir, "err", err)
		return nil
	}
	m := &sdk.SessionModelState{CurrentModelId: sdk.ModelId(current), AvailableModels: []sdk.ModelInfo{}}
	for _, x := range res.Models {
		m.AvailableModels = append(m.AvailableModels, sdk.ModelInfo{ModelId: sdk.ModelId(x.Name), Name: x.Name, Description: sdk.Ptr(x.Model)})
	}
	return m
}

func (a *Agent) clientCaps() sdk.ClientCapabilities {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.caps
}

// checkCwd refuses a cwd that is not an absolute path to a directory, naming it.
func checkCwd(cwd string) error {
	if cwd == "" {
		return reqErr(-32602, "no cwd given: name the directory of the project (inside a git repository)")
	}
	if !filepath.IsAbs(cwd) {
		return reqErr(-32602, fmt.Sprintf("cwd %q is not an absolute path", cwd))
	}
	if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
		return reqErr(-32602, fmt.Sprintf("cwd %s is not a directory", cwd))
	}
	return nil
}

// title is what a session list shows: its name and what it is for.
func title(s server.Session) string {
	t := firstLine(s.Task)
	if t == "" {
		t = "(no prompt yet)"
	}
	if s.Name != "" {
		t = s.Name + ": " + t
	}
	return t
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(line); len(r) > 100 {
		line = string(r[:99]) + "…"
	}
	return line
}

func mcpNames(servers []sdk.McpServer) []string {
	var out []string
	for _, m := range servers {
		switch {
		case m.Stdio != nil:
			out = append(out, m.Stdio.Name)
		case m.Http != nil:
			out = append(out, m.Http.Name)
		case m.Sse != nil:
			out = append(out, m.Sse.Name)
		case m.Acp != nil:
			out = append(out, m.Acp.Name)
		default:
			out = append(out, "(unnamed)")
		}
	}
	return out
}

func mcpNotice(names []string) string {
	return fmt.Sprintf("[arbor] MCP servers were declined (%s): Arbor's agent works through one tool, its Python kernel, and does not connect MCP servers. Their names are recorded with the session.", strings.Join(names, ", "))
}

func reqErr(code int, msg string) *sdk.RequestError {
	return &sdk.RequestError{Code: code, Message: msg}
}

// daemonErr carries a daemon error's message to the client, with an ACP code: an unknown
// session is "resource not found", invalid params stay invalid params.
func daemonErr(what string, err error) error {
	var re *sdk.RequestError
	if errors.As(err, &re) {
		return re
	}
	var je *jsonrpc2.Error
	if errors.As(err, &je) {
		code := -32603
		switch je.Code {
		case server.CodeUnknownSession:
			code = -32002
		case jsonrpc2.InvalidParams:
			code = -32602
		}
		return &sdk.RequestError{Code: code, Message: je.Message, Data: map[string]any{"arborCode": je.Code, "data": je.Data}}
	}
	return reqErr(-32603, what+": "+err.Error())
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
