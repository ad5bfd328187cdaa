package kernel

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/arborhq/arbor/jsonlimit"
	"github.com/coder/websocket"
)

// wsChannels drives one kernel on a gateway over its /api/kernels/{id}/channels WebSocket, in
// Jupyter's JSON WebSocket format (the message with a "channel" field; binary frames carry
// buffers). It is a wire like [channels], and it watches the kernel: a "dead" or a
// "restarting" status Arbor did not ask for, a REST 404, or a WebSocket that drops and does not
// come back within Gateway.Reconnect all end the proc (its exited closes, waitErr says which).
//
// A dropped WebSocket is reconnected with the same session_id: Jupyter Server buffers the
// kernel's messages for a session whose socket closed and replays them on reconnect, so a cell
// running across a short drop still finishes; requests sent while it is down wait for it.
type wsChannels struct {
	c       *gatewayClient
	id      string // the gateway's kernel id
	session string
	log     *slog.Logger
	p       *proc // exited and waitErr are set through die

	// bridgeComm is the comm id the runtime sends host requests on (iopub comm_msg); onBridge
	// answers them. Both are set before the reader starts.
	bridgeComm string
	onBridge   func(w *wsChannels, req bridgeRequest)

	mu         sync.Mutex
	calls      map[string]*mailbox
	conn       *websocket.Conn // nil while reconnecting
	up         chan struct{}   // closed while conn != nil
	restarting bool            // a restart Arbor asked for: its "restarting" status is not a death
	stopping   bool            // Arbor is deleting the kernel

	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// maxWSMessage bounds one incoming WebSocket message (a cell's output arrives in them).
const maxWSMessage = 1 << 30

// dialKernel connects to kernel id's channels and starts its reader and watcher. p.exited
// closes when the kernel is gone.
func dialKernel(ctx context.Context, c *gatewayClient, id string, p *proc, log *slog.Logger, comm string, onBridge func(*wsChannels, bridgeRequest)) (*wsChannels, error) {
	w := &wsChannels{c: c, id: id, session: newID(), log: log, p: p, calls: make(map[string]*mailbox),
		up: make(chan struct{}), bridgeComm: comm, onBridge: onBridge}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	conn, err := w.dial(ctx)
	if err != nil {
		w.cancel()
		return nil, err
	}
	w.setConn(conn)
	w.wg.Add(2)
	go w.run(conn)
	go w.watch()
	return w, nil
}

func (w *wsChannels) dial(ctx context.Context) (*websocket.Conn, error) {
	h := http.Header{}
	w.c.auth(h)
	// ctx bounds the handshake: Jupyter Server answers it only once the kernel has replied
	// to its kernel_info, which under a burst of starts takes a while.
	hc := w.c.g.HTTP
	if hc == nil {
		hc = wsHTTP
	}
	conn, resp, err := websocket.Dial(ctx, w.c.wsURL(w.id, w.session), &websocket.DialOptions{HTTPHeader: h, HTTPClient: hc})
	if err != nil {
		if resp != nil {
			switch resp.StatusCode {
			case http.StatusUnauthorized, http.StatusForbidden:
				return nil, fmt.Errorf("%w (%d %s) on the kernel WebSocket at %s", ErrGatewayAuth, resp.StatusCode, http.StatusText(resp.StatusCode), w.c.g.URL)
			case http.StatusNotFound:
				return nil, fmt.Errorf("connect to kernel %s: %w", w.id, &statusError{404, "the gateway has no such kernel"})
			}
		}
		return nil, fmt.Errorf("%w: kernel WebSocket %s: %v", ErrGatewayUnreachable, w.c.wsURL(w.id, w.session), err)
	}
	conn.SetReadLimit(maxWSMessage)
	return conn, nil
}

func (w *wsChannels) setConn(conn *websocket.Conn) {
	w.mu.Lock()
	w.conn = conn
	closeOnce(w.up)
	w.mu.Unlock()
}

func (w *wsChannels) dropConn() {
	w.mu.Lock()
	if w.conn != nil {
		w.conn = nil
		w.up = make(chan struct{})
	}
	w.mu.Unlock()
}

// die ends the proc with why, once.
func (w *wsChannels) die(why error) { w.p.end(why) }

func (w *wsChannels) isDead() bool { return w.p.isExited() }

// run reads conn until it fails, then reconnects, until the kernel is dead or closed.
func (w *wsChannels) run(conn *websocket.Conn) {
	defer w.wg.Done()
	for {
		err := w.read(conn)
		conn.CloseNow()
		w.dropConn()
		if w.ctx.Err() != nil || w.isDead() {
			return
		}
		w.log.Warn("kernel gateway: WebSocket dropped; reconnecting", "kernel", w.id, "err", err)
		if conn = w.redial(err); conn == nil {
			return
		}
		w.setConn(conn)
		w.log.Info("kernel gateway: WebSocket reconnected", "kernel", w.id)
	}
}

// redial reconnects within Gateway.Reconnect, or ends the proc saying why it could not.
func (w *wsChannels) redial(dropped error) *websocket.Conn {
	window := w.c.g.reconnect()
	deadline := time.Now().Add(window)
	wait := 100 * time.Millisecond
	var last error
	for {
		ctx, cancel := context.WithTimeout(w.ctx, 15*time.Second)
		m, err := w.c.get(ctx, w.id)
		if err == nil && m.ExecutionState == "dead" {
			err = errors.New("the gateway reports it dead")
		}
		if err == nil {
			var conn *websocket.Conn
			if conn, err = w.dial(ctx); err == nil {
				cancel()
				return conn
			}
		}
		cancel()
		if w.ctx.Err() != nil {
			return nil
		}
		if isStatus(err, 404) {
			w.die(fmt.Errorf("the gateway %s no longer has kernel %s (404 after the WebSocket dropped: %v)", w.c.g.URL, w.id, dropped))
			return nil
		}
		if errors.Is(err, ErrGatewayAuth) {
			w.die(err)
			return nil
		}
		last = err
		if time.Now().After(deadline) {
			w.die(fmt.Errorf("the WebSocket to the kernel gateway %s dropped (%v) and did not come back within %v: %v", w.c.g.URL, dropped, window, last))
			return nil
		}
		select {
		case <-time.After(wait):
		case <-w.ctx.Done():
			return nil
		}
		wait = min(2*wait, time.Second)
	}
}

// watch reads the kernel's REST model every Gateway.Poll: a kernel the gateway culled or its
// operator deleted may never say so on the WebSocket.
func (w *wsChannels) watch() {
	defer w.wg.Done()
	t := time.NewTicker(w.c.g.poll())
	defer t.Stop()
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-w.p.exited:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(w.ctx, 10*time.Second)
		m, err := w.c.get(ctx, w.id)
		cancel()
		switch {
		case isStatus(err, 404):
			w.die(fmt.Errorf("the gateway %s no longer has kernel %s (404): stopped by its operator or culled", w.c.g.URL, w.id))
		case err == nil && m.ExecutionState == "dead":
			w.die(fmt.Errorf("the gateway %s reports kernel %s dead", w.c.g.URL, w.id))
		}
	}
}

// wsMessage is one message in Jupyter's JSON WebSocket format.
type wsMessage struct {
	Header   header          `json:"header"`
	Parent   json.RawMessage `json:"parent_header"`
	Metadata json.RawMessage `json:"metadata"`
	Content  json.RawMessage `json:"content"`
	Buffers  []any           `json:"buffers"`
	Channel  string          `json:"channel"`
}

func (w *wsChannels) read(conn *websocket.Conn) error {
	for {
		typ, data, err := conn.Read(w.ctx)
		if err != nil {
			return err
		}
		var bufs [][]byte
		if typ == websocket.MessageBinary {
			if data, bufs, err = splitBinary(data); err != nil {
				w.log.Warn("kernel gateway: dropped a binary message", "err", err)
				continue
			}
		}
		if err := jsonlimit.Check(data, jsonlimit.MaxDepth); err != nil {
			w.log.Warn("kernel gateway: dropped a message", "err", err)
			continue
		}
		var wm wsMessage
		if err := json.Unmarshal(data, &wm); err != nil || wm.Header.MsgType == "" {
			w.log.Warn("kernel gateway: dropped a message that is not a Jupyter message", "err", err)
			continue
		}
		m := &message{Header: wm.Header, Metadata: wm.Metadata, Content: wm.Content, Buffers: bufs}
		if len(wm.Parent) > 0 {
			_ = json.Unmarshal(wm.Parent, &m.Parent)
		}
		if wm.Channel == "iopub" && w.special(m) {
			continue
		}
		w.mu.Lock()
		b := w.calls[m.Parent.MsgID]
		w.mu.Unlock()
		if b != nil {
			b.put(m)
		}
	}
}

// special handles the iopub messages that are not for a request: the server's own status
// notices and the runtime's host requests. It reports whether m was one.
func (w *wsChannels) special(m *message) bool {
	switch m.Header.MsgType {
	case "status":
		if m.Parent.MsgID != "" {
			return false
		}
		var c struct {
			State string `json:"execution_state"`
		}
		_ = json.Unmarshal(m.Content, &c)
		switch c.State {
		case "dead":
			w.die(fmt.Errorf("the gateway %s reports kernel %s dead", w.c.g.URL, w.id))
		case "restarting":
			w.mu.Lock()
			ours := w.restarting
			w.mu.Unlock()
			if !ours {
				w.die(fmt.Errorf("the kernel process on the gateway %s died and the gateway restarted it empty", w.c.g.URL))
			}
		}
		return false
	case "shutdown_reply":
		// ipykernel broadcasts its shutdown on iopub: the gateway is stopping the kernel
		// (its server shuts down, its operator deleted it) unless Arbor asked.
		var c struct {
			Restart bool `json:"restart"`
		}
		_ = json.Unmarshal(m.Content, &c)
		w.mu.Lock()
		ours := w.restarting || w.stopping
		w.mu.Unlock()
		if !ours && !c.Restart {
			w.die(fmt.Errorf("the gateway %s shut kernel %s down (its server is stopping, or its operator deleted the kernel)", w.c.g.URL, w.id))
		}
		return true
	case "comm_msg":
		var c struct {
			CommID string          `json:"comm_id"`
			Data   json.RawMessage `json:"data"`
		}
		if json.Unmarshal(m.Content, &c) != nil || c.CommID != w.bridgeComm || w.bridgeComm == "" {
			return false
		}
		req, err := parseRequest(c.Data)
		if err != nil {
			w.log.Warn("kernel gateway: dropped a malformed host request", "err", err)
			return true
		}
		if w.onBridge != nil {
			w.onBridge(w, req)
		}
		return true
	}
	return false
}

// splitBinary decodes Jupyter's binary WebSocket frame: a big-endian uint32 count n, n uint32
// offsets, then the JSON message (at the first offset) and its buffers.
func splitBinary(b []byte) ([]byte, [][]byte, error) {
	if len(b) < 4 {
		return nil, nil, errors.New("short binary frame")
	}
	n := int(binary.BigEndian.Uint32(b))
	if n < 1 || n > 1<<16 || len(b) < 4+4*n {
		return nil, nil, fmt.Errorf("binary frame with %d parts in %d bytes", n, len(b))
	}
	offs := make([]int, n+1)
	for i := 0; i < n; i++ {
		offs[i] = int(binary.BigEndian.Uint32(b[4+4*i:]))
	}
	offs[n] = len(b)
	for i := 0; i < n; i++ {
		if offs[i] < 4+4*n || offs[i] > offs[i+1] || offs[i+1] > len(b) {
			return nil, nil, errors.New("binary frame with bad offsets")
		}
	}
	var bufs [][]byte
	for i := 1; i < n; i++ {
		bufs = append(bufs, b[offs[i]:offs[i+1]])
	}
	return b[offs[0]:offs[1]], bufs, nil
}

func (w *wsChannels) register(msgID string) *mailbox {
	b := newMailbox()
	w.mu.Lock()
	w.calls[msgID] = b
	w.mu.Unlock()
	return b
}

func (w *wsChannels) unregister(msgID string) {
	w.mu.Lock()
	delete(w.calls, msgID)
	w.mu.Unlock()
}

func (w *wsChannels) sessionID() string { return w.session }

func (w *wsChannels) request(n chanName, msgType string, content any) (header, *mailbox, error) {
	h := newHeader(w.session, msgType)
	b := w.register(h.MsgID)
	if err := w.send(n, h, content); err != nil {
		w.unregister(h.MsgID)
		return h, nil, err
	}
	return h, b, nil
}

// send writes one message, waiting (within Gateway.Reconnect) for a WebSocket that is
// reconnecting.
func (w *wsChannels) send(n chanName, h header, content any) error {
	cb, err := json.Marshal(content)
	if err != nil {
		return fmt.Errorf("encode %s content: %w", h.MsgType, err)
	}
	b, err := json.Marshal(wsMessage{Header: h, Parent: json.RawMessage("{}"), Metadata: json.RawMessage("{}"),
		Content: cb, Buffers: []any{}, Channel: n.String()})
	if err != nil {
		return err
	}
	t := time.NewTimer(w.c.g.reconnect())
	defer t.Stop()
	for {
		w.mu.Lock()
		conn, up := w.conn, w.up
		w.mu.Unlock()
		if conn != nil {
			ctx, cancel := context.WithTimeout(w.ctx, 30*time.Second)
			err := conn.Write(ctx, websocket.MessageText, b)
			cancel()
			if err != nil {
				return fmt.Errorf("send %s to the kernel gateway: %w", h.MsgType, err)
			}
			return nil
		}
		select {
		case <-up:
		case <-w.p.exited:
			return fmt.Errorf("send %s: %w", h.MsgType, ErrDead)
		case <-w.ctx.Done():
			return fmt.Errorf("send %s: %w", h.MsgType, ErrDead)
		case <-t.C:
			return fmt.Errorf("send %s: the WebSocket to the kernel gateway %s is down", h.MsgType, w.c.g.URL)
		}
	}
}

// close closes the WebSocket and waits for the reader and the watcher.
func (w *wsChannels) close() {
	w.cancel()
	w.mu.Lock()
	if w.conn != nil {
		w.conn.Close(websocket.StatusNormalClosure, "")
	}
	w.mu.Unlock()
	w.wg.Wait()
}
