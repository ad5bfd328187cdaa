package kernel

import (
	"bufio"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/arborhq/arbor/jsonlimit"
)

// bridge serves host requests from the kernel's embedded runtime over a Unix socket in the
// state directory (0600, inside a 0700 directory) authenticated by a random token the kernel
// gets in its environment. Framing is newline-delimited JSON; each request runs in its own
// goroutine and replies are routed by id, so many asyncio tasks can await the host at once.
// Why not a Jupyter channel: a cell that awaits a host reply keeps shell busy (a reply on shell
// would deadlock), and comms on control need ipykernel 6.17 patched; the socket is ~40× faster.
type bridge struct {
	path, token string
	host        HostHandler
	log         *slog.Logger
	ln          net.Listener

	ctx    context.Context // cancelled on close: in-flight handlers see it
	cancel context.CancelFunc

	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
	inflight chan struct{} // one per request being answered, over all connections
}

// The bridge is the kernel's one capability, and the kernel runs model-written code: what a
// hostile cell can make the daemon hold is bounded. maxBridgeLine bounds one request (a larger
// one closes the connection); past maxBridgeInflight requests being answered the bridge stops
// reading until replies go out; a kernel gets maxBridgeConns connections (the runtime needs one
// per event loop); a reply the kernel does not read within bridgeWriteTimeout closes its
// connection.
const (
	maxBridgeLine      = 4 << 20
	maxBridgeInflight  = 64
	maxBridgeConns     = 16
	bridgeWriteTimeout = 30 * time.Second
)

// bridgeMethods are the requests the runtime may send; anything else is refused before it
// reaches the host handler. They are exactly the methods of the runtime's _SURFACE table
// (arbor_runtime.py), which TestRuntimeSurface checks: a method enters both with the feature.
var bridgeMethods = map[string]bool{
	"ping":      true,
	"rlm.spawn": true, "rlm.list": true, "rlm.stop": true, "rlm.merge": true,
	"agent_message.send": true, "agent_message.list_agents": true, "agent_message.inbox": true,
	"harness.list": true, "harness.get": true, "harness.put": true, "harness.delete": true,
	"harness.search": true, "harness.history": true,
	"refine.run": true,
	"goal.set":   true, "goal.complete": true, "goal.get": true,
	"heartbeat.create": true, "heartbeat.list": true, "heartbeat.delete": true,
}

func newBridge(dir string, host HostHandler, log *slog.Logger) (*bridge, error) {
	path := filepath.Join(dir, "bridge-"+newID()[:8]+".sock")
	if len(path) > 104 {
		// sun_path is 108 bytes; a deep state dir gets a private dir under the temp dir.
		d, err := os.MkdirTemp("", "arbor-bridge-")
		if err != nil {
			return nil, fmt.Errorf("bridge socket dir: %w", err)
		}
		path = filepath.Join(d, "bridge.sock")
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on bridge socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("bridge socket mode: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &bridge{path: path, token: newID() + newID(), host: host, log: log, ln: ln,
		ctx: ctx, cancel: cancel, conns: make(map[net.Conn]struct{}), inflight: make(chan struct{}, maxBridgeInflight)}
	b.wg.Add(1)
	go b.accept()
	return b, nil
}

func (b *bridge) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		if b.ctx.Err() != nil {
			b.mu.Unlock()
			c.Close()
			return
		}
		if len(b.conns) >= maxBridgeConns {
			b.mu.Unlock()
			b.log.Warn("kernel bridge: refused a connection: too many open", "max", maxBridgeConns)
			c.Close()
			continue
		}
		b.conns[c] = struct{}{}
		b.mu.Unlock()
		b.wg.Add(1)
		go b.serve(c)
	}
}

type bridgeRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

type bridgeReply struct {
	ID     json.RawMessage `json:"id"`
	Result any             `json:"result,omitempty"`
	Error  *bridgeError    `json:"error,omitempty"`
}

type bridgeError struct {
	Message string `json:"message"`
}

func (b *bridge) serve(c net.Conn) {
	defer b.wg.Done()
	var reqs sync.WaitGroup
	defer func() {
		c.Close()
		reqs.Wait()
		b.mu.Lock()
		delete(b.conns, c)
		b.mu.Unlock()
	}()
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 0, 64<<10), maxBridgeLine)
	if !sc.Scan() {
		return
	}
	var hello struct {
		Token string `json:"token"`
	}
	if err := jsonlimit.Check(sc.Bytes(), jsonlimit.MaxDepth); err != nil || json.Unmarshal(sc.Bytes(), &hello) != nil ||
		subtle.ConstantTimeCompare([]byte(hello.Token), []byte(b.token)) != 1 {
		b.log.Warn("kernel bridge: refused a connection with a bad token")
		c.SetWriteDeadline(time.Now().Add(bridgeWriteTimeout))
		c.Write([]byte(`{"id":null,"error":{"message":"the Arbor bridge refused this connection: bad token"}}` + "\n"))
		// Read on until the client hangs up (or a moment passes): closing with its request
		// unread would make its write fail (EPIPE) before it reads why it was refused.
		if uc, ok := c.(*net.UnixConn); ok {
			uc.CloseWrite()
		}
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		io.Copy(io.Discard, io.LimitReader(c, 1<<20))
		return
	}
	var wmu sync.Mutex
	write := func(r bridgeReply) {
		line, err := json.Marshal(r)
		if err != nil {
			line, _ = json.Marshal(bridgeReply{ID: r.ID, Error: &bridgeError{Message: "encode result: " + err.Error()}})
		}
		wmu.Lock()
		defer wmu.Unlock()
		c.SetWriteDeadline(time.Now().Add(bridgeWriteTimeout))
		if _, err := c.Write(append(line, '\n')); err != nil {
			b.log.Warn("kernel bridge: write reply; closing the connection", "err", err)
			c.Close()
		}
	}
	for sc.Scan() {
		req, err := parseRequest(sc.Bytes())
		var deep *jsonlimit.DepthError
		switch {
		case err != nil && req.ID != nil:
			write(bridgeReply{ID: req.ID, Error: &bridgeError{Message: err.Error()}})
			continue
		case errors.As(err, &deep):
			// No id to answer: a reply without one tells the runtime why, and it gives up this
			// connection.
			b.log.Warn("kernel bridge: refused a request", "err", err)
			write(bridgeReply{ID: json.RawMessage("null"), Error: &bridgeError{Message: "request refused: " + err.Error()}})
			continue
		case err != nil:
			b.log.Warn("kernel bridge: dropped a malformed request", "err", err)
			continue
		}
		select {
		case b.inflight <- struct{}{}: // full: stop reading until replies drain
		case <-b.ctx.Done():
			return
		}
		reqs.Add(1)
		go func() {
			defer func() { <-b.inflight; reqs.Done() }()
			res, err := b.handle(req)
			if err != nil {
				write(bridgeReply{ID: req.ID, Error: &bridgeError{Message: err.Error()}})
				return
			}
			if res == nil {
				res = json.RawMessage("null")
			}
			write(bridgeReply{ID: req.ID, Result: res})
		}()
	}
	if err := sc.Err(); err != nil && !errors.Is(err, net.ErrClosed) {
		b.log.Warn("kernel bridge: connection closed", "err", err)
	}
}

// parseRequest decodes one request line; a request needs an id to be answered at all. A line
// nested past jsonlimit.MaxDepth is refused before it is decoded, with its id when
// encoding/json's own scanner (bounded, and no recursion for an ignored value) finds one.
func parseRequest(line []byte) (bridgeRequest, error) {
	var req bridgeRequest
	if err := jsonlimit.Check(line, jsonlimit.MaxDepth); err != nil {
		var probe struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(line, &probe) == nil && len(probe.ID) > 0 && string(probe.ID) != "null" && len(probe.ID) <= 64 {
			req.ID = probe.ID
		}
		return req, fmt.Errorf("request refused: %w", err)
	}
	if err := json.Unmarshal(line, &req); err != nil {
		return req, err
	}
	if len(req.ID) == 0 || string(req.ID) == "null" {
		return req, errors.New("request without an id")
	}
	return req, nil
}

func (b *bridge) handle(req bridgeRequest) (any, error) { return answerHost(b.ctx, b.host, req) }

// answerHost answers one host request: "ping" itself, the other methods of bridgeMethods by
// host, anything else refused.
func answerHost(ctx context.Context, host HostHandler, req bridgeRequest) (any, error) {
	if !bridgeMethods[req.Method] {
		return nil, fmt.Errorf("unknown Arbor method %q", req.Method)
	}
	params := req.Params
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage("{}")
	}
	if !strings.HasPrefix(strings.TrimSpace(string(params)), "{") {
		return nil, fmt.Errorf("%s: params must be a JSON object", req.Method)
	}
	if req.Method == "ping" {
		var p struct {
			Payload json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, fmt.Errorf("ping: %w", err)
		}
		if p.Payload == nil {
			return json.RawMessage("null"), nil
		}
		return p.Payload, nil
	}
	return host.HandleHost(ctx, req.Method, params)
}

// close stops accepting, cancels in-flight handlers, closes connections and waits for every
// goroutine.
func (b *bridge) close() {
	b.mu.Lock()
	b.cancel()
	b.ln.Close()
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
	os.Remove(b.path)
	if strings.HasPrefix(filepath.Base(filepath.Dir(b.path)), "arbor-bridge-") {
		os.Remove(filepath.Dir(b.path))
	}
}
