package agents

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/kernel"
)

// toolOutputs returns a session's tool_output events and the seq of its first tool_finished.
func streamedOutputs(t *testing.T, s *Session) (outs []event.ToolOutput, seqs []uint64, finished uint64) {
	t.Helper()
	recs, err := s.Events(1)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		switch event.Type(r.Type) {
		case event.TypeToolOutput:
			var o event.ToolOutput
			if err := json.Unmarshal(r.Data, &o); err != nil {
				t.Fatal(err)
			}
			outs = append(outs, o)
			seqs = append(seqs, r.Seq)
		case event.TypeToolFinished:
			if finished == 0 {
				finished = r.Seq
			}
		}
	}
	return outs, seqs, finished
}

// A running cell's prints reach the log while it runs, in order, whole, and before its end.
func TestCellOutputStreamsWhileItRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[
 {"when":{"turn":1},"code":"import time, sys\nfor i in range(12):\n    print(f'tick {i}', flush=True)\n    time.sleep(0.1)\nprint('oops', file=sys.stderr)"},
 {"when":{"turn":2},"text":"ok"}
],"default":{"text":"ok"}}`)
	s := e.create("tick")
	var firstSeen, finishedSeen time.Time
	e.waitFor("the first streamed output", func() bool {
		outs, _, fin := streamedOutputs(t, s)
		if len(outs) > 0 && firstSeen.IsZero() {
			firstSeen = time.Now()
		}
		if fin > 0 {
			finishedSeen = time.Now()
			return true
		}
		return false
	})
	e.settled(s)
	if firstSeen.IsZero() || finishedSeen.Sub(firstSeen) < 400*time.Millisecond {
		t.Errorf("output was not seen while the cell ran: first %v, finished %v", firstSeen, finishedSeen)
	}
	outs, seqs, fin := streamedOutputs(t, s)
	var stdout, stderr strings.Builder
	for i, o := range outs {
		if seqs[i] > fin {
			t.Errorf("tool_output %d after tool_finished %d", seqs[i], fin)
		}
		if o.CallID == "" {
			t.Error("tool_output without a call id")
		}
		switch o.Stream {
		case "stdout":
			stdout.WriteString(o.Text)
		case "stderr":
			stderr.WriteString(o.Text)
		default:
			t.Errorf("stream %q", o.Stream)
		}
	}
	var want strings.Builder
	for i := 0; i < 12; i++ {
		want.WriteString("tick " + itoa(i) + "\n")
	}
	if stdout.String() != want.String() || stderr.String() != "oops\n" {
		t.Errorf("streamed stdout %q stderr %q", stdout.String(), stderr.String())
	}
	if len(outs) < 4 || len(outs) > 14 {
		t.Errorf("%d tool_output events for 12 prints 100 ms apart: not streamed, or not rate-limited", len(outs))
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// A cell stopped mid-run keeps what it printed before the stop.
func TestStoppedCellKeepsStreamedOutput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[
 {"when":{"turn":1},"code":"import time\nprint('before the stop', flush=True)\ntime.sleep(60)\nprint('never')"}
],"default":{"text":"ok"}}`)
	s := e.create("sleep")
	e.waitFor("the streamed line", func() bool {
		outs, _, _ := streamedOutputs(t, s)
		return len(outs) > 0
	})
	if err := e.svc.Stop(context.Background(), s.meta.ID); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the stop", func() bool { return !s.busy() })
	outs, _, _ := streamedOutputs(t, s)
	var all strings.Builder
	for _, o := range outs {
		all.WriteString(o.Text)
	}
	if all.String() != "before the stop\n" {
		t.Errorf("streamed output after the stop: %q", all.String())
	}
}

// streamRecorder drives a cellStream without a kernel.
type streamRecorder struct {
	mu  sync.Mutex
	evs []event.ToolOutput
}

func (r *streamRecorder) stream(interval time.Duration) *cellStream {
	return &cellStream{callID: "c1", interval: interval, partialAge: 3 * interval,
		redact:  func(s string) string { return strings.ReplaceAll(s, "s3cret-value", "[redacted $X]") },
		pending: map[string]*streamBuf{},
		record:  func(ev event.ToolOutput) { r.mu.Lock(); r.evs = append(r.evs, ev); r.mu.Unlock() }}
}

func (r *streamRecorder) events() []event.ToolOutput {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event.ToolOutput(nil), r.evs...)
}

// The bounds: a flood is cut to the newest text with a note, each event stays within the
// chunk, the cell's total within its budget (the last event says truncated, none follow), a
// secret split across two prints is redacted whole, and a partial line waits for its end.
func TestCellStreamBounds(t *testing.T) {
	t.Run("flood", func(t *testing.T) {
		var r streamRecorder
		c := r.stream(20 * time.Millisecond)
		line := strings.Repeat("x", 99) + "\n"
		start := time.Now()
		for i := 0; i < 100_000; i++ { // 10 MB as fast as it can
			c.onOutput(kernel.Output{Kind: kernel.KindStdout, Text: line})
		}
		c.close()
		intervals := int(time.Since(start)/(20*time.Millisecond)) + 2
		evs := r.events()
		total := 0
		for _, ev := range evs {
			total += len(ev.Text)
			if len(ev.Text) > streamChunk+200 {
				t.Errorf("an event of %d bytes", len(ev.Text))
			}
		}
		// The first flush may run before the buffer overflows (nothing was skipped yet), so
		// the note is looked for in every event, not only the first.
		noted := false
		for _, ev := range evs {
			noted = noted || strings.Contains(ev.Text, "bytes of output arrived faster than they stream")
		}
		if len(evs) == 0 || len(evs) > intervals || !noted {
			t.Errorf("%d events for a flood over %d intervals (skip noted: %v); first %.120q", len(evs), intervals, noted, firstText(evs))
		}
		if total > intervals*(streamChunk+200) || total > 1<<20 {
			t.Errorf("the flood of 10 MB logged %d bytes", total)
		}
	})
	t.Run("budget", func(t *testing.T) {
		var r streamRecorder
		c := r.stream(time.Millisecond)
		line := strings.Repeat("y", 1023) + "\n"
		for i := 0; i < 400; i++ { // 400 KiB, slowly enough to stream all of it
			c.onOutput(kernel.Output{Kind: kernel.KindStdout, Text: line})
			time.Sleep(2 * time.Millisecond)
		}
		c.close()
		evs := r.events()
		total := 0
		for i, ev := range evs {
			total += len(ev.Text)
			if ev.Truncated != (i == len(evs)-1) {
				t.Errorf("event %d of %d truncated=%v", i, len(evs), ev.Truncated)
			}
		}
		if total != streamCellBudget {
			t.Errorf("the cell logged %d bytes, budget %d", total, streamCellBudget)
		}
		c.onOutput(kernel.Output{Kind: kernel.KindStdout, Text: "after\n"})
		if len(r.events()) != len(evs) {
			t.Error("an event after the truncated one")
		}
	})
	t.Run("a secret in a line too long to stream whole", func(t *testing.T) {
		var r streamRecorder
		c := r.stream(time.Hour) // nothing flushes until close: the long line is cut
		// The secret straddles where the 4 KiB kept at the end of the line begins.
		line := strings.Repeat("a", 3*streamChunk-streamChunk-5) + "s3cret-value" + strings.Repeat("b", streamChunk-6) + "\n"
		c.onOutput(kernel.Output{Kind: kernel.KindStdout, Text: line[:len(line)/2]})
		c.onOutput(kernel.Output{Kind: kernel.KindStdout, Text: line[len(line)/2:]})
		c.close()
		for _, ev := range r.events() {
			for i := 4; i < len("s3cret-value"); i++ {
				if strings.Contains(ev.Text, "s3cret-value"[len("s3cret-value")-i:]+"bbbb") {
					t.Fatalf("part of the secret was streamed: %q", ev.Text[:80])
				}
			}
		}
	})
	t.Run("redaction and partial lines", func(t *testing.T) {
		var r streamRecorder
		c := r.stream(10 * time.Millisecond)
		c.onOutput(kernel.Output{Kind: kernel.KindStdout, Text: "key=s3cret"})
		time.Sleep(15 * time.Millisecond) // past the interval, not the partial line's age
		c.onOutput(kernel.Output{Kind: kernel.KindStdout, Text: "-value\nprogress 10%"})
		c.onOutput(kernel.Output{Kind: kernel.KindResult, Text: "not a stream"})
		time.Sleep(100 * time.Millisecond) // the partial line's age passes: it is sent
		evs := r.events()
		var all string
		for _, ev := range evs {
			all += ev.Text
		}
		if all != "key=[redacted $X]\nprogress 10%" {
			t.Errorf("streamed %q", all)
		}
		c.close()
		if len(r.events()) != len(evs) {
			t.Error("close sent again what was sent")
		}
	})
}

func firstText(evs []event.ToolOutput) string {
	if len(evs) == 0 {
		return ""
	}
	return evs[0].Text
}
