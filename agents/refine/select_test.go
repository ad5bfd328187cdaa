package refine

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/eventlog"
)

// logBuilder writes payloads as the daemon's log holds them: one record each, seqs from 1.
type logBuilder struct {
	recs []eventlog.Record
	t0   time.Time
}

func (l *logBuilder) add(p event.Payload) uint64 {
	data, err := json.Marshal(p)
	if err != nil {
		panic(err)
	}
	seq := uint64(len(l.recs) + 1)
	l.recs = append(l.recs, eventlog.Record{Seq: seq, TS: l.t0.Add(time.Duration(seq) * time.Second), Type: string(p.EventType()), Data: data})
	return seq
}

// cell records a model reply asking for code, and the cell's start and end.
func (l *logBuilder) cell(id, code string, fin event.ToolFinished) (ask, start, end uint64) {
	ask = l.add(event.AssistantMessage{Text: "Let me run " + id + ".", ToolCalls: []event.ToolCall{{ID: id, Code: code}}})
	start = l.add(event.ToolStarted{CallID: id, Code: code})
	fin.CallID = id
	end = l.add(fin)
	return
}

const traceback = `Traceback (most recent call last):
  File "<cell>", line 3, in <module>
    subprocess.run(["go", "test", "./..."], check=True)
CalledProcessError: Command '['go', 'test', './...']' returned non-zero exit status 1.`

// session is a realistic log of one session: the task, chatter, a failing test cell, a retry,
// a user's correction, a long cell, a failed turn, and a steer still queued at the end.
type session struct {
	recs                                          []eventlog.Record
	task, failEnd, failStart, retry, correction   uint64
	longEnd, longStart, turnFailed, queued, final uint64
	okEnd, chatterFirst                           uint64
}

func buildSession(chatter int) session {
	l := &logBuilder{t0: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	var s session
	l.add(event.SessionCreated{ID: "s1", Task: "make the tests pass", Model: "m", Branch: "arbor/x"})
	l.add(event.StateChanged{State: event.Running})
	l.add(event.TurnStarted{Turn: 1})
	q := l.add(event.MessageQueued{From: "task", Text: "make the tests pass", Mode: "follow_up"})
	s.task = l.add(event.UserMessage{Text: "make the tests pass", From: "task", QueuedSeq: q})
	for i := range chatter {
		seq := l.add(event.AssistantMessage{Text: fmt.Sprintf("Thinking step %d: %s", i, strings.Repeat("I will look at the files. ", 20))})
		if i == 0 {
			s.chatterFirst = seq
		}
	}
	_, _, s.okEnd = l.cell("call_1", "print(open('go.mod').read())", event.ToolFinished{Status: "ok", Output: "module x", DurationMs: 40})
	_, s.failStart, s.failEnd = l.cell("call_2", "import subprocess\nsubprocess.run(['go','test','./...'], check=True)",
		event.ToolFinished{Status: "error", Output: "--- FAIL: TestX\n" + traceback, Error: "CalledProcessError: Command '['go', 'test', './...']' returned non-zero exit status 1.", DurationMs: 900})
	s.retry = l.add(event.ModelRetry{Retry: 1, Error: "429 Too Many Requests"})
	l.add(event.Checkpoint{Turn: 1, Commit: "abc"})
	l.add(event.TurnStarted{Turn: 2})
	q2 := l.add(event.MessageQueued{From: "user", Text: "don't run the whole suite, run go test ./pkg/ only", Mode: "steer"})
	s.correction = l.add(event.UserMessage{Text: "don't run the whole suite, run go test ./pkg/ only", From: "user", QueuedSeq: q2})
	l.add(event.MessageQueued{From: "child tests", Text: "tests updated", Mode: "auto"})
	_, s.longStart, s.longEnd = l.cell("call_1", "subprocess.run(['go','test','./pkg/'])", event.ToolFinished{Status: "ok", Output: "ok pkg 41.2s", DurationMs: 41200})
	s.turnFailed = l.add(event.TurnFailed{Turn: 2, Error: "model: context overflow after compaction"})
	s.queued = l.add(event.MessageQueued{From: "user", Text: "also update the README", Mode: "follow_up"})
	s.final = l.add(event.AssistantMessage{Text: "The tests pass now."})
	s.recs = l.recs
	return s
}

func kinds(t Trajectory) map[uint64]string {
	m := map[uint64]string{}
	for _, it := range t.Items {
		m[it.Seq] = it.Kind
	}
	return m
}

func TestSelectSignals(t *testing.T) {
	t.Parallel()
	s := buildSession(2)
	tr := Select(s.recs, 0, Options{})
	want := map[uint64]string{
		s.failStart:     "tool_started",
		s.failEnd:       "tool_finished error",
		s.retry:         "model_retry",
		s.correction:    "user_message",
		s.longStart:     "tool_started",
		s.longEnd:       "tool_finished long",
		s.turnFailed:    "turn_failed",
		s.queued:        "message_queued",
		s.final:         "assistant_message",
		s.failStart - 1: "assistant_message", // the reply that ran the failing cell
		s.longStart - 1: "assistant_message",
	}
	got := kinds(tr)
	for seq, k := range want {
		if got[seq] != k {
			t.Errorf("seq %d: kind %q, want %q", seq, got[seq], k)
		}
	}
	for _, seq := range []uint64{s.task, s.okEnd, s.correction - 1} {
		if _, ok := got[seq]; ok {
			t.Errorf("seq %d (%s) selected; the task, an ok cell and a delivered queue entry are not signals", seq, got[seq])
		}
	}
	for seq := range got {
		if !tr.Seqs[seq] {
			t.Errorf("seq %d selected but not citable", seq)
		}
	}
	if len(tr.Seqs) != len(tr.Items) {
		t.Errorf("%d seqs for %d items", len(tr.Seqs), len(tr.Items))
	}
	wantCounts := map[string]int{"failures": 2, "retries": 1, "corrections": 2, "longCells": 1}
	for k, n := range wantCounts {
		if tr.Counts[k] != n {
			t.Errorf("Counts[%s] = %d, want %d", k, tr.Counts[k], n)
		}
	}
	if tr.FromSeq != 1 || tr.ToSeq != uint64(len(s.recs)) {
		t.Errorf("range %d..%d, want 1..%d", tr.FromSeq, tr.ToSeq, len(s.recs))
	}
	if tr.Task != "make the tests pass" {
		t.Errorf("Task %q", tr.Task)
	}
	for i := 1; i < len(tr.Items); i++ {
		if tr.Items[i-1].Seq >= tr.Items[i].Seq {
			t.Fatalf("items not in seq order: %d then %d", tr.Items[i-1].Seq, tr.Items[i].Seq)
		}
	}
	for _, frag := range []string{
		fmt.Sprintf("[seq %d tool_finished error]\n", s.failEnd),
		"CalledProcessError",
		fmt.Sprintf("[seq %d tool_started]\nimport subprocess", s.failStart),
		fmt.Sprintf("[seq %d user_message]\nfrom user: don't run the whole suite", s.correction),
		"(ran 41.2s)",
		"retry 1: 429 Too Many Requests",
	} {
		if !strings.Contains(tr.Digest, frag) {
			t.Errorf("digest lacks %q:\n%s", frag, tr.Digest)
		}
	}
	if strings.Count(tr.Digest, "CalledProcessError: Command") != 1 {
		t.Errorf("the cell's error is repeated although its output holds it")
	}
}

// Under a tight budget the failures and the correction are kept, the chatter goes, and the
// digest says how much it left out.
func TestSelectTightBudget(t *testing.T) {
	t.Parallel()
	s := buildSession(40)
	for _, max := range []int{900, 1500, 3000} {
		tr := Select(s.recs, 0, Options{MaxBytes: max})
		if len(tr.Digest) > max {
			t.Errorf("MaxBytes %d: digest is %d bytes", max, len(tr.Digest))
		}
		got := kinds(tr)
		for _, seq := range []uint64{s.failEnd, s.correction, s.turnFailed} {
			if got[seq] == "" {
				t.Errorf("MaxBytes %d: failure/correction seq %d left out; kept %v", max, seq, got)
			}
		}
		if got[s.chatterFirst] != "" {
			t.Errorf("MaxBytes %d: early chatter kept over signals", max)
		}
		if max < 1500 && (tr.Omitted == 0 || !strings.Contains(tr.Digest, "left out for space")) {
			t.Errorf("MaxBytes %d: nothing said to be left out (omitted %d)", max, tr.Omitted)
		}
	}
	// A generous budget keeps the signals and at most a few replies.
	tr := Select(s.recs, 0, Options{})
	n := 0
	for _, it := range tr.Items {
		if it.Kind == "assistant_message" {
			n++
		}
	}
	if n > maxContextMsg {
		t.Errorf("%d assistant replies, want at most %d", n, maxContextMsg)
	}
}

// No budget, however small, gives a digest over it; and a code block never comes without its
// cell's result.
func TestSelectBudgetHolds(t *testing.T) {
	t.Parallel()
	s := buildSession(10)
	for max := 1; max < 6000; max += 37 {
		tr := Select(s.recs, 0, Options{MaxBytes: max})
		if len(tr.Digest) > max {
			t.Fatalf("MaxBytes %d: digest is %d bytes", max, len(tr.Digest))
		}
		got := kinds(tr)
		if got[s.failStart] != "" && got[s.failEnd] == "" {
			t.Fatalf("MaxBytes %d: the failing cell's code without its result", max)
		}
		if got[s.longStart] != "" && got[s.longEnd] == "" {
			t.Fatalf("MaxBytes %d: the long cell's code without its result", max)
		}
		if !utf8.ValidString(tr.Digest) {
			t.Fatalf("MaxBytes %d: digest is not UTF-8", max)
		}
	}
}

func TestSelectSince(t *testing.T) {
	t.Parallel()
	s := buildSession(2)
	since := s.correction - 1 // after the first failure, before the correction
	tr := Select(s.recs, since, Options{})
	if tr.FromSeq != since+1 {
		t.Errorf("FromSeq %d, want %d", tr.FromSeq, since+1)
	}
	for _, it := range tr.Items {
		if it.Seq <= since {
			t.Errorf("seq %d (%s) is at or before since %d", it.Seq, it.Kind, since)
		}
	}
	got := kinds(tr)
	if got[s.correction] != "user_message" {
		t.Errorf("the correction after since is not selected (it is not the task): %v", got)
	}
	if tr.Counts["failures"] != 1 || tr.Counts["retries"] != 0 {
		t.Errorf("counts %v: the failure and retry before since are counted", tr.Counts)
	}
	if tr.Task != "make the tests pass" {
		t.Errorf("Task %q: the task before since is still the task", tr.Task)
	}
	// Since the end: nothing, an empty range.
	end := Select(s.recs, uint64(len(s.recs)), Options{})
	if len(end.Items) != 0 || end.Digest != "" || end.ToSeq >= end.FromSeq {
		t.Errorf("since the last seq: %d items, range %d..%d, digest %q", len(end.Items), end.FromSeq, end.ToSeq, end.Digest)
	}
}

func TestSelectDeterministic(t *testing.T) {
	t.Parallel()
	s := buildSession(30)
	for _, max := range []int{0, 1200, 4000} {
		first := Select(s.recs, 0, Options{MaxBytes: max})
		for range 20 {
			if again := Select(s.recs, 0, Options{MaxBytes: max}); again.Digest != first.Digest {
				t.Fatalf("MaxBytes %d: digest differs between runs:\n%s\n---\n%s", max, first.Digest, again.Digest)
			}
		}
	}
}

// A cell id reused by a later turn joins each result to its own code.
func TestSelectCallIDReused(t *testing.T) {
	t.Parallel()
	l := &logBuilder{t0: time.Unix(0, 0)}
	l.add(event.UserMessage{Text: "task", From: "task"})
	l.cell("call_1", "print('first')", event.ToolFinished{Status: "ok", Output: "first"})
	_, start, end := l.cell("call_1", "raise ValueError('second')", event.ToolFinished{Status: "error", Output: "ValueError: second"})
	tr := Select(l.recs, 0, Options{})
	got := kinds(tr)
	if got[start] != "tool_started" || got[end] != "tool_finished error" {
		t.Fatalf("kinds %v", got)
	}
	if strings.Contains(tr.Digest, "print('first')") {
		t.Errorf("the first cell's code is joined to the second's failure:\n%s", tr.Digest)
	}
}

// A huge output is cut in the middle, keeping the traceback's end, with valid UTF-8 and a
// marker saying how much was cut.
func TestSelectClipsLongText(t *testing.T) {
	t.Parallel()
	l := &logBuilder{t0: time.Unix(0, 0)}
	l.add(event.UserMessage{Text: "task", From: "task"})
	out := strings.Repeat("é€ line of noise\n", 2000) + "KeyError: 'the cause'"
	_, _, end := l.cell("c", "x()", event.ToolFinished{Status: "error", Output: out})
	tr := Select(l.recs, 0, Options{})
	var text string
	for _, it := range tr.Items {
		if it.Seq == end {
			text = it.Text
		}
	}
	if len(text) > maxOutputText || !utf8.ValidString(text) {
		t.Fatalf("clipped text: %d bytes, valid UTF-8 %v", len(text), utf8.ValidString(text))
	}
	if !strings.Contains(text, "KeyError: 'the cause'") || !strings.Contains(text, "bytes cut …]") {
		t.Errorf("clipped text lacks the tail or the marker:\n%s", text)
	}
}

// Records of types this version does not know are passed over.
func TestSelectUnknownRecords(t *testing.T) {
	t.Parallel()
	l := &logBuilder{t0: time.Unix(0, 0)}
	l.add(event.UserMessage{Text: "task", From: "task"})
	l.recs = append(l.recs, eventlog.Record{Seq: 2, TS: time.Unix(2, 0), Type: "harness_future", Data: json.RawMessage(`{"x":1}`)},
		eventlog.Record{Seq: 3, TS: time.Unix(3, 0), Type: "turn_failed", Data: json.RawMessage(`{"turn":"not a number"}`)})
	l.add(event.TurnFailed{Turn: 1, Error: "boom"})
	tr := Select(l.recs, 0, Options{})
	if len(tr.Items) != 1 || tr.Items[0].Seq != 4 || tr.ToSeq != 4 {
		t.Errorf("items %+v, ToSeq %d", tr.Items, tr.ToSeq)
	}
}
