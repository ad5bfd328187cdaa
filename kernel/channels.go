package kernel

import (
	"context"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
)

// chanName names the channel a request goes out on.
type chanName int

const (
	shellChan chanName = iota + 1
	controlChan
)

func (c chanName) String() string {
	switch c {
	case shellChan:
		return "shell"
	case controlChan:
		return "control"
	}
	return fmt.Sprintf("chanName(%d)", int(c))
}

// wire is how a Kernel talks to one kernel process: over ZeroMQ sockets ([channels]) for a
// local kernel, or over a Jupyter Server's kernel WebSocket ([wsChannels]) for a kernel on a
// gateway. Replies and iopub messages are routed to the request's mailbox by parent msg_id.
type wire interface {
	// request registers a mailbox for the reply and sends msgType on c.
	request(c chanName, msgType string, content any) (header, *mailbox, error)
	// send sends a request whose replies nobody waits for.
	send(c chanName, h header, content any) error
	unregister(msgID string)
	sessionID() string
	close()
}

// channels owns the zmq4 sockets to one kernel process and routes incoming messages to the
// waiting request by parent msg_id. zmq4's Recv has no deadline, so each socket has exactly one
// reader goroutine; callers time out with select on their mailbox instead.
type channels struct {
	log     *slog.Logger
	signer  signer
	session string

	shell, control, iopub zmq4.Socket

	mu     sync.Mutex
	calls  map[string]*mailbox // by request msg_id
	sendMu sync.Mutex          // zmq4 sockets are not safe for concurrent Send

	wg sync.WaitGroup
}

// mailbox collects every message whose parent is one request. The reader goroutines append and
// never block, so a slow consumer cannot stall the kernel's iopub stream for other requests.
type mailbox struct {
	mu     sync.Mutex
	msgs   []*message
	notify chan struct{}
}

func newMailbox() *mailbox { return &mailbox{notify: make(chan struct{}, 1)} }

func (b *mailbox) put(m *message) {
	b.mu.Lock()
	b.msgs = append(b.msgs, m)
	b.mu.Unlock()
	select {
	case b.notify <- struct{}{}:
	default:
	}
}

// take returns and clears the queued messages.
func (b *mailbox) take() []*message {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.msgs
	b.msgs = nil
	return m
}

// dialChannels connects shell, control and iopub. Dial blocks until the kernel has bound its
// sockets (zmq4 retries synchronously); ctx cancels it, which callers tie to process exit.
func dialChannels(ctx context.Context, sockCtx context.Context, cf connInfo, log *slog.Logger) (*channels, error) {
	c := &channels{
		log:     log,
		signer:  signer{key: []byte(cf.Key)},
		session: newID(),
		calls:   make(map[string]*mailbox),
	}
	// zmq4 dial retries every 250 ms, 10 times, by default: too slow and too few for a
	// kernel that takes ~1 s to bind. Retry fast, forever, and stop on ctx.
	dctx, cancel := context.WithCancel(sockCtx)
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	opts := []zmq4.Option{
		zmq4.WithDialerRetry(5 * time.Millisecond),
		zmq4.WithDialerMaxRetries(-1),
		zmq4.WithLogger(stdlog.New(io.Discard, "", 0)),
	}
	// Sockets live on sockCtx; dctx only bounds the dial. A zmq4 socket's context also
	// governs its lifetime, so dial through sockets made on dctx would die with it: instead
	// dial in a goroutine and close the socket if ctx ends first.
	dial := func(s zmq4.Socket, port int) error {
		errc := make(chan error, 1)
		go func() { errc <- s.Dial(cf.endpoint(port)) }()
		select {
		case err := <-errc:
			return err
		case <-dctx.Done():
			s.Close()
			<-errc
			return context.Cause(dctx)
		}
	}
	c.shell = zmq4.NewDealer(sockCtx, append(opts, zmq4.WithID(zmq4.SocketIdentity(c.session)))...)
	c.control = zmq4.NewDealer(sockCtx, opts...)
	c.iopub = zmq4.NewSub(sockCtx, opts...)
	for _, d := range []struct {
		name string
		s    zmq4.Socket
		port int
	}{{"iopub", c.iopub, cf.IOPubPort}, {"shell", c.shell, cf.ShellPort}, {"control", c.control, cf.ControlPort}} {
		if err := dial(d.s, d.port); err != nil {
			c.close()
			return nil, fmt.Errorf("dial %s channel: %w", d.name, err)
		}
	}
	if err := c.iopub.SetOption(zmq4.OptionSubscribe, ""); err != nil {
		c.close()
		return nil, fmt.Errorf("subscribe iopub: %w", err)
	}
	for name, s := range map[string]zmq4.Socket{"shell": c.shell, "control": c.control, "iopub": c.iopub} {
		c.wg.Add(1)
		go c.read(name, s)
	}
	return c, nil
}

// read is the single reader of one socket. It exits when the socket is closed.
func (c *channels) read(name string, s zmq4.Socket) {
	defer c.wg.Done()
	for {
		zm, err := s.Recv()
		if err != nil {
			return
		}
		// iopub messages start with a topic frame; decode skips to the delimiter.
		m, err := c.signer.decode(zm.Frames)
		if err != nil {
			// A message that fails to parse or verify is never trusted: drop and log it.
			c.log.Warn("kernel: dropped incoming message", "channel", name, "err", err)
			continue
		}
		c.mu.Lock()
		b := c.calls[m.Parent.MsgID]
		c.mu.Unlock()
		if b != nil {
			b.put(m)
		}
	}
}

// register opens a mailbox for replies to msgID; call it before sending.
func (c *channels) register(msgID string) *mailbox {
	b := newMailbox()
	c.mu.Lock()
	c.calls[msgID] = b
	c.mu.Unlock()
	return b
}

func (c *channels) unregister(msgID string) {
	c.mu.Lock()
	delete(c.calls, msgID)
	c.mu.Unlock()
}

func (c *channels) sessionID() string { return c.session }

func (c *channels) socket(n chanName) zmq4.Socket {
	if n == controlChan {
		return c.control
	}
	return c.shell
}

// send signs and sends one request on shell or control.
func (c *channels) send(n chanName, h header, content any) error {
	s := c.socket(n)
	frames, err := c.signer.encode(h, content)
	if err != nil {
		return err
	}
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	if err := s.SendMulti(zmq4.NewMsgFrom(frames...)); err != nil {
		return fmt.Errorf("send %s: %w", h.MsgType, err)
	}
	return nil
}

// request registers a mailbox and sends msgType on n.
func (c *channels) request(n chanName, msgType string, content any) (header, *mailbox, error) {
	h := newHeader(c.session, msgType)
	b := c.register(h.MsgID)
	if err := c.send(n, h, content); err != nil {
		c.unregister(h.MsgID)
		return h, nil, err
	}
	return h, b, nil
}

// close closes the sockets and waits for the reader goroutines.
func (c *channels) close() {
	var errs []error
	for _, s := range []zmq4.Socket{c.shell, c.control, c.iopub} {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	c.wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.log.Debug("kernel: closing channels", "err", err)
	}
}
