// Package server speaks Arbor's one protocol — LSP plus arbor/* methods — on every connection:
// the daemon's listener, the `arbor lsp` forwarder, and the client the CLI uses.
//
// Call [RunDaemon] to serve; [Dial] connects to the daemon (starting it when needed), [Forward]
// copies an editor's stdio to it, and [NewClient] wraps a connection in typed calls.
//
// The package has three layers, as in gopls: framing (this file: no domain types, size
// limits), the typed protocol (protocol.go) and thin handlers, one file per method family.
//
// A request that changes state is journalled before its handler runs (journal.go, with the
// table of how each method replays in journalrules.go), so one received but not answered when
// the daemon died is replayed once at the next start — never lost, never applied twice — or
// reported in arbor/daemon.status when redoing it unseen could surprise.
package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/arborhq/arbor/jsonlimit"
	"go.lsp.dev/jsonrpc2"
	"golang.org/x/sync/semaphore"
)

// MaxMessageBytes caps one JSON-RPC message. jsonrpc2's own stream allocates whatever
// Content-Length asks for (up to 2 GiB), so the cap is checked before reading the body.
const MaxMessageBytes = 32 << 20

// maxHeaderLine caps one header line; LSP sends two short ones.
const maxHeaderLine = 1024

// readBuffer is each connection's read buffer. Bodies larger than it are read straight into
// their own slice, so it is small: an idle connection holds little.
const readBuffer = 16 << 10

// smallFrame is the largest body read without the daemon's frame gate, and the first piece of
// a larger one, scanned before the rest is allocated: a frame too deep in its first 64 KiB
// (every crafted one) never costs more.
const smallFrame = 64 << 10

// frameGateBytes bounds the bytes of large bodies being read and decoded at once across all of
// the daemon's connections: twice the largest message, so one always fits. A flood of large
// frames on many connections then waits here, in the kernel's socket buffers, instead of
// growing the daemon's heap with each connection; small frames (every request a user's
// editor or CLI sends in normal use) never wait behind it.
const frameGateBytes = 2 * MaxMessageBytes

// newFrameGate returns the gate a daemon shares among its connections.
func newFrameGate() *semaphore.Weighted { return semaphore.NewWeighted(frameGateBytes) }

// refusedRate is how fast, in bytes a second, the daemon reads on after refusing frames: each
// refused frame (charged at least smallFrame) puts off, by its share of a second, the next
// frame of the connection that sent it and every large frame on any connection. A flood of
// bad frames, on one connection or on many that reconnect, is paced to this rate; a client
// that sends good frames under 64 KiB (every editor and CLI request) is never paced.
const refusedRate = 8 << 20

// pacer holds when the daemon reads on after the frames it refused (see refusedRate).
type pacer struct {
	mu    sync.Mutex
	until time.Time
}

// charge puts reading on off by a refused frame of n bytes.
func (p *pacer) charge(n int64) {
	d := time.Duration(max(n, smallFrame)) * time.Second / refusedRate
	p.mu.Lock()
	if now := time.Now(); p.until.Before(now) {
		p.until = now
	}
	p.until = p.until.Add(d)
	p.mu.Unlock()
}

// wait returns once the refused frames have been paid for, or ctx ends.
func (p *pacer) wait(ctx context.Context) error {
	p.mu.Lock()
	d := time.Until(p.until)
	p.mu.Unlock()
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// clientDepth is the nesting a client accepts from the daemon: the daemon checked everything
// that came from outside against jsonlimit.MaxDepth and wraps it in a few levels of its own.
const clientDepth = 2 * jsonlimit.MaxDepth

// defaultWriteTimeout is how long the daemon waits for a client to take one message.
const defaultWriteTimeout = 30 * time.Second

// stream is a jsonrpc2.Stream with LSP header framing, a size cap, and recovery from a
// malformed body: the peer gets a parse error naming the problem and the connection goes on.
type stream struct {
	conn io.ReadWriteCloser
	in   *bufio.Reader
	wmu  sync.Mutex
	max  int64
	// writeTimeout bounds each write (0 = none). A write that times out closes the
	// connection: the peer stopped reading, and a half-written frame cannot be resumed.
	writeTimeout time.Duration
	// depth is the deepest nesting a message may have (see jsonlimit). It is checked as the
	// body arrives, before any decoder sees it.
	depth int
	// gate, when set, is shared by every connection of a daemon: a body over smallFrame holds
	// its length in bytes of it while it is read and decoded.
	gate *semaphore.Weighted
	// pace, when set, is shared by every connection of a daemon: it paces reading after
	// refused frames (see refusedRate).
	pace *pacer
}

func newStream(conn io.ReadWriteCloser) *stream {
	return &stream{conn: conn, in: bufio.NewReaderSize(conn, readBuffer), max: MaxMessageBytes, depth: jsonlimit.MaxDepth}
}

// Read returns the next well-formed message. Header errors and oversized frames end the
// connection (the framing cannot be trusted after them); bad JSON only skips the message.
func (s *stream) Read(ctx context.Context) (jsonrpc2.Message, int64, error) {
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return nil, total, err
		}
		length, n, err := s.readHeader()
		total += n
		if err == io.EOF {
			return nil, total, err // the peer is gone between messages: nobody to answer
		}
		if err != nil {
			s.writeError(nil, jsonrpc2.ParseError, err.Error())
			return nil, total, err
		}
		if length > s.max {
			err := fmt.Errorf("message of %d bytes exceeds the limit of %d bytes", length, s.max)
			s.writeError(nil, jsonrpc2.ParseError, err.Error())
			return nil, total, err
		}
		msg, err := s.readMessage(ctx, length)
		var deep *jsonlimit.DepthError
		var bad *malformed
		switch {
		case errors.As(err, &deep):
			// The rest of the frame was read past, so the framing holds: refuse this one only.
			// Its id is not looked for: that would mean decoding what was refused.
			s.writeError(nil, jsonrpc2.ParseError, "message refused: "+err.Error())
		case errors.As(err, &bad):
			// JSON-RPC 2.0: -32700 for text that is not JSON, -32600 for JSON that is no request.
			code := jsonrpc2.ParseError
			if json.Valid(bad.data) {
				code = jsonrpc2.InvalidRequest
			}
			s.writeError(requestID(bad.data), code, clip("malformed JSON-RPC message: "+bad.err.Error(), maxEcho))
			putBody(bad.data)
		case err != nil:
			return nil, total, err
		default:
			return msg, total + length, nil
		}
		total += length
		if s.pace != nil {
			s.pace.charge(length)
			if err := s.pace.wait(ctx); err != nil {
				return nil, total, err
			}
		}
	}
}

// malformed is a body that is no JSON-RPC message; the stream answers it and reads on.
type malformed struct {
	data []byte
	err  error
}

func (m *malformed) Error() string { return m.err.Error() }

// gateTime is how long a body may take to arrive once it holds part of the frame gate: a
// peer that announces a large frame and trickles it must not hold the gate for the others.
func gateTime(length int64) time.Duration {
	return 10*time.Second + time.Duration(length>>20)*time.Second
}

// readMessage reads a body of length bytes and decodes it. It returns the message, or a
// *malformed for a body that is no message, or a *jsonlimit.DepthError for one that nests too
// deeply, or another error when the connection failed.
func (s *stream) readMessage(ctx context.Context, length int64) (jsonrpc2.Message, error) {
	if s.pace != nil && length > smallFrame {
		if err := s.pace.wait(ctx); err != nil {
			return nil, err
		}
	}
	if s.gate != nil && length > smallFrame {
		if err := s.gate.Acquire(ctx, length); err != nil {
			return nil, err
		}
		defer s.gate.Release(length)
		if dl, ok := s.conn.(interface{ SetReadDeadline(time.Time) error }); ok {
			dl.SetReadDeadline(time.Now().Add(gateTime(length)))
			defer dl.SetReadDeadline(time.Time{})
		}
	}
	data, err := s.readBody(length)
	if err != nil {
		return nil, err
	}
	msg, err := jsonrpc2.DecodeMessage(data)
	if err != nil {
		return nil, &malformed{data: data, err: err}
	}
	return msg, nil
}

// bodies keeps the large bodies of refused frames for the next large frame: a flood of them
// then does not make the garbage collector work for each. sync.Pool lets go of what it holds
// at the next collections, so nothing stays for long.
var bodies sync.Pool

// takeBody returns a slice of length bytes for a large body.
func takeBody(length int64) []byte {
	if b, ok := bodies.Get().(*[]byte); ok && int64(cap(*b)) >= length {
		return (*b)[:length]
	}
	return make([]byte, length)
}

// putBody gives back the body of a refused frame; nothing refers to it any more.
func putBody(b []byte) {
	if len(b) > smallFrame {
		bodies.Put(&b)
	}
}

// readBody reads a body of length bytes, scanning its nesting as it arrives: at the first byte
// past the limit it stops keeping what it reads, skips the rest of the frame and returns the
// *jsonlimit.DepthError.
func (s *stream) readBody(length int64) ([]byte, error) {
	depth := jsonlimit.NewScanner(s.depth)
	data := make([]byte, min(length, smallFrame))
	for off := int64(0); off < length; {
		if off == int64(len(data)) {
			// The first piece passed: now the whole body is worth its allocation.
			full := takeBody(length)
			copy(full, data)
			data = full
		}
		end := min(off+smallFrame, length)
		if _, err := io.ReadFull(s.in, data[off:end]); err != nil {
			return nil, fmt.Errorf("read message body: %w", err)
		}
		_, err := depth.Write(data[off:end])
		if err == nil && off == 0 && length > smallFrame {
			// A request is a JSON object (a batch an array): a large body that starts with
			// anything else is refused before the rest of it is allocated.
			if t := bytes.TrimLeft(data[:end], " \t\r\n"); len(t) > 0 && t[0] != '{' && t[0] != '[' {
				err = &malformed{err: fmt.Errorf("a JSON-RPC message is a JSON object, and this body of %d bytes starts with %q", length, t[0])}
			}
		}
		if err != nil {
			if _, derr := s.in.Discard(int(length - end)); derr != nil {
				return nil, fmt.Errorf("read message body: %w", derr)
			}
			return nil, err
		}
		off = end
	}
	return data, nil
}

func (s *stream) readHeader() (length int64, total int64, err error) {
	length = -1
	for {
		// ReadSlice, not ReadString: a line that never ends must not grow without bound; it
		// stops at the read buffer's size.
		raw, err := s.in.ReadSlice('\n')
		total += int64(len(raw))
		if len(raw) > maxHeaderLine {
			return 0, total, fmt.Errorf("header line of more than %d bytes is too long", maxHeaderLine)
		}
		if err != nil {
			if err == io.EOF && total == 0 {
				return 0, total, io.EOF
			}
			return 0, total, fmt.Errorf("read header: %w", err)
		}
		line := strings.TrimSpace(string(raw))
		if line == "" {
			break
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			return 0, total, fmt.Errorf("invalid header line %q: want \"Name: value\"", clip(line, maxEcho))
		}
		if strings.EqualFold(strings.TrimSpace(name), "Content-Length") {
			value = strings.TrimSpace(value)
			length, err = strconv.ParseInt(value, 10, 64)
			if err != nil || length <= 0 {
				return 0, total, fmt.Errorf("invalid Content-Length %q: want a positive number of bytes", clip(value, maxEcho))
			}
		}
	}
	if length < 0 {
		return 0, total, fmt.Errorf("missing Content-Length header")
	}
	return length, total, nil
}

// requestID digs the id out of a message that failed to decode, so the error can answer it.
func requestID(data []byte) json.RawMessage {
	var probe struct {
		ID json.RawMessage `json:"id"`
	}
	// An id is a number or a short string; a huge one is not echoed (the reply gets null).
	if json.Unmarshal(data, &probe) == nil && len(probe.ID) > 0 && len(probe.ID) <= maxEcho {
		return probe.ID
	}
	return nil
}

func (s *stream) writeError(id json.RawMessage, code jsonrpc2.Code, msg string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	body, _ := json.Marshal(struct {
		V     string          `json:"jsonrpc"`
		ID    json.RawMessage `json:"id"`
		Error *jsonrpc2.Error `json:"error"`
	}{"2.0", id, jsonrpc2.NewError(code, msg)})
	s.writeRaw(body)
}

func (s *stream) writeRaw(body []byte) (int64, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	dl, _ := s.conn.(interface{ SetWriteDeadline(time.Time) error })
	if s.writeTimeout > 0 && dl != nil {
		dl.SetWriteDeadline(time.Now().Add(s.writeTimeout))
	}
	n, err := fmt.Fprintf(s.conn, "Content-Length: %d\r\n\r\n", len(body))
	m := 0
	if err == nil {
		m, err = s.conn.Write(body)
	}
	if err != nil && s.writeTimeout > 0 {
		s.conn.Close()
	}
	return int64(n + m), err
}

// Write sends one message.
func (s *stream) Write(ctx context.Context, msg jsonrpc2.Message) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return 0, fmt.Errorf("marshal message: %w", err)
	}
	return s.writeRaw(body)
}

// Close closes the underlying connection.
func (s *stream) Close() error { return s.conn.Close() }
