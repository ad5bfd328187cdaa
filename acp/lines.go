package acp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/arborhq/arbor/jsonlimit"
)

// maxLine is the longest ACP message read: the SDK's own cap, past which it ends the
// connection.
const maxLine = 10 << 20

// lockedWriter lets the guard answer a refused line between the SDK's messages, which it
// writes one whole line per Write.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// lineGuard stands between the client's stdin and the SDK, which decodes each line with
// encoding/json. A line nested past jsonlimit.MaxDepth is not passed on: the client gets a
// JSON-RPC parse error naming the depth (with the line's id when it can be found) and the
// connection goes on. The SDK alone would log the whole line and answer nothing.
type lineGuard struct {
	in   *bufio.Reader
	out  io.Writer
	log  *slog.Logger
	line []byte // the line being read
	rest []byte // what of the current line the SDK has not read yet
	err  error  // the input's end, after rest
}

func newLineGuard(in io.Reader, out io.Writer, log *slog.Logger) *lineGuard {
	return &lineGuard{in: bufio.NewReaderSize(in, 64<<10), out: out, log: log}
}

func (g *lineGuard) Read(p []byte) (int, error) {
	for len(g.rest) == 0 {
		if g.err != nil {
			return 0, g.err
		}
		line, err := g.readLine()
		g.err = err
		if len(line) == 0 {
			continue
		}
		if derr := jsonlimit.Check(line, jsonlimit.MaxDepth); derr != nil {
			g.refuse(line, derr)
			continue
		}
		g.rest = line
	}
	n := copy(p, g.rest)
	g.rest = g.rest[n:]
	return n, nil
}

// readLine returns the next line with its newline, reusing one buffer; a line longer than
// maxLine ends the input, as the SDK would.
func (g *lineGuard) readLine() ([]byte, error) {
	if cap(g.line) > 1<<20 {
		g.line = nil // a large line's buffer is not kept for the small ones after it
	}
	g.line = g.line[:0]
	for {
		chunk, err := g.in.ReadSlice('\n')
		if len(g.line)+len(chunk) > maxLine {
			return nil, fmt.Errorf("ACP message longer than %d bytes", maxLine)
		}
		g.line = append(g.line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return g.line, err
	}
}

// refuse answers a line that was not passed on.
func (g *lineGuard) refuse(line []byte, why error) {
	id := json.RawMessage("null")
	var probe struct {
		ID json.RawMessage `json:"id"`
	}
	// encoding/json's own scanner is bounded and does not recurse for the ignored fields.
	if json.Unmarshal(bytes.TrimSpace(line), &probe) == nil && len(probe.ID) > 0 && len(probe.ID) <= 64 {
		id = probe.ID
	}
	g.log.Warn("acp: refused a message from the client", "err", why, "bytes", len(line))
	reply, _ := json.Marshal(struct {
		V     string          `json:"jsonrpc"`
		ID    json.RawMessage `json:"id"`
		Error any             `json:"error"`
	}{"2.0", id, map[string]any{"code": -32700, "message": "message refused: " + why.Error()}})
	g.out.Write(append(reply, '\n'))
}
