package agents

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/kernel"
)

// The bounds of a cell's streamed output (tool_output events): what an editor shows while a
// cell runs and a late attach replays. The model's view is the tool_finished output, bounded
// on its own; these keep a chatty cell from flooding the log and every attached client.
const (
	streamInterval   = 100 * time.Millisecond // at most one event per stream per interval
	streamPartialAge = 500 * time.Millisecond // a line without its newline waits this long
	streamChunk      = 4 << 10                // the most text one event carries
	streamCellBudget = 256 << 10              // the most of one cell's output the log keeps
)

// cellStream turns a running cell's stdout and stderr into tool_output events: whole lines
// where it can (so redaction sees a secret whole), at most one event per stream per interval,
// each bounded — text arriving faster than that is skipped with a marker, the newest kept —
// and at most streamCellBudget of the cell in the log, then one truncated event. close
// flushes what is pending, so the events precede the cell's tool_finished, and a stopped
// cell keeps what it printed.
type cellStream struct {
	callID     string
	redact     func(string) string
	record     func(event.ToolOutput)
	interval   time.Duration
	partialAge time.Duration

	mu        sync.Mutex
	pending   map[string]*streamBuf
	logged    int  // bytes of text recorded so far
	truncated bool // the budget is spent: nothing more is recorded
	closed    bool
	timer     *time.Timer
	last      time.Time // when the last flush ran
}

type streamBuf struct {
	text    strings.Builder
	skipped int       // bytes dropped since the last event (arriving faster than the bound)
	since   time.Time // when the oldest pending byte arrived
}

func newCellStream(ctx context.Context, s *Session, callID string) *cellStream {
	ctx = context.WithoutCancel(ctx) // a stopped cell's last output is still recorded
	return &cellStream{
		callID: callID, redact: s.redactor(), interval: streamInterval, partialAge: streamPartialAge,
		pending: map[string]*streamBuf{},
		record: func(ev event.ToolOutput) {
			if _, err := s.append(ctx, ev); err != nil {
				s.svc.log.Warn("stream cell output", "session", s.meta.ID, "err", err)
			}
		},
	}
}

// onOutput is the kernel's streaming callback.
func (c *cellStream) onOutput(o kernel.Output) {
	if o.Kind != kernel.KindStdout && o.Kind != kernel.KindStderr || o.Text == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.truncated {
		return
	}
	b := c.pending[o.Kind]
	if b == nil {
		b = &streamBuf{}
		c.pending[o.Kind] = b
	}
	if b.text.Len() == 0 {
		b.since = time.Now()
	}
	b.text.WriteString(o.Text)
	if b.text.Len() > 2*streamChunk {
		// Faster than the bound lets through: keep the newest, say how much was skipped. The
		// text is redacted before the cut, so the cut cannot leave part of a secret.
		t := c.redact(b.text.String())
		cut := runeStart(t, len(t)-streamChunk)
		if i := strings.IndexByte(t[cut:], '\n'); i >= 0 && i < len(t)-cut-1 {
			cut += i + 1
		}
		b.skipped += cut
		b.text.Reset()
		b.text.WriteString(t[cut:])
	}
	c.schedule()
}

// schedule arms the flush timer for the next moment a flush may run (c.mu held).
func (c *cellStream) schedule() {
	if c.timer != nil {
		return
	}
	wait := c.interval - time.Since(c.last)
	if wait < 0 {
		wait = 0
	}
	c.timer = time.AfterFunc(wait, c.tick)
}

func (c *cellStream) tick() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timer = nil
	if c.closed {
		return
	}
	if c.flush(false) {
		c.schedule()
	}
}

// close records everything still pending; the cell has ended (or stopped).
func (c *cellStream) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	c.flush(true)
}

// flush records one event per stream with something to send and reports whether text is left
// waiting (a partial line). c.mu is held across the append so events stay in order and none
// lands after close.
func (c *cellStream) flush(final bool) (left bool) {
	c.last = time.Now()
	for _, stream := range []string{kernel.KindStdout, kernel.KindStderr} {
		b := c.pending[stream]
		if b == nil {
			continue
		}
		t := b.text.String()
		n := len(t)
		if !final {
			// Whole lines only, unless a partial line has waited long enough.
			if i := strings.LastIndexByte(t, '\n'); i >= 0 {
				n = i + 1
			} else if time.Since(b.since) < c.partialAge {
				n = 0
			}
		}
		if n == 0 && b.skipped == 0 {
			left = left || t != ""
			continue
		}
		send, rest := c.redact(t[:n]), t[n:] // redacted whole, before any cut
		if len(send) > streamChunk {
			cut := runeStart(send, len(send)-streamChunk)
			b.skipped += cut
			send = send[cut:]
		}
		c.emit(stream, b.skipped, send)
		b.skipped = 0
		b.text.Reset()
		b.text.WriteString(rest)
		if rest != "" {
			b.since = time.Now()
			left = true
		}
		if c.truncated {
			return false
		}
	}
	return left
}

// emit records one tool_output event, within the cell's budget (c.mu held).
func (c *cellStream) emit(stream string, skipped int, text string) {
	if skipped > 0 {
		text = fmt.Sprintf("[arbor: %d bytes of output arrived faster than they stream; the cell's result has them]\n", skipped) + text
	}
	text = c.redact(text)
	ev := event.ToolOutput{CallID: c.callID, Stream: stream, Text: text}
	if c.logged+len(text) > streamCellBudget {
		ev.Text = clipUTF8(text, streamCellBudget-c.logged)
		ev.Truncated = true
		c.truncated = true
	}
	c.logged += len(ev.Text)
	c.record(ev)
}

// runeStart moves i forward to the start of a character of s.
func runeStart(s string, i int) int {
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return i
}

// clipUTF8 cuts s to at most n bytes without splitting a character.
func clipUTF8(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
