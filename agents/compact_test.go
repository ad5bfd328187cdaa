package agents

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/eventlog"
)

const growScript = `{"rules":[
 {"when":{"task":"^Summarise"},"text":"SUMMARY: the agent printed numbered blocks; variable n counts them."},
 {"when":{"task":"^grow","last":"block 6 "},"text":"done growing"},
 {"when":{"task":"^overflow","last":"block 7 "},"fail":{"status":400,"code":"context_length_exceeded","message":"This model's maximum context length is 8192 tokens","times":1},"text":"recovered after the overflow"},
 {"when":{"task":"^(grow|overflow)"},"code":"n = globals().get('n', 0) + 1\nprint('block', n, 'x' * 400)"}
],"default":{"text":"ok"}}`

func TestCompactionKeepsContextBoundedAndReplays(t *testing.T) {
	e := newEnv(t, growScript)
	os.WriteFile(filepath.Join(e.repo, "arbor.json"), []byte(`{"models":{"scripted":{"contextWindow":1200}}}`), 0o644)
	s := e.create("grow the context")
	e.settled(s)
	comps := e.events(s, event.TypeCompaction)
	if len(comps) == 0 {
		t.Fatal("no compaction happened")
	}
	c := comps[len(comps)-1]
	if !strings.Contains(fmt.Sprint(c["summary"]), "SUMMARY") || !strings.Contains(fmt.Sprint(c["liveVariables"]), "n") {
		t.Errorf("compaction record = %v", c)
	}
	if got := e.events(s, event.TypeAssistantMessage); fmt.Sprint(got[len(got)-1]["text"]) != "done growing" {
		t.Errorf("the session did not finish its work after compacting: %v", got[len(got)-1])
	}
	conv := s.conversation()
	if !strings.HasPrefix(conv[0].Content, "grow the context") || !strings.Contains(conv[0].Content, summaryHeading) {
		t.Errorf("context does not start with the summary: %q", conv[0].Content)
	}
	// Raw events stay: every tool result is still in the log.
	if n := len(e.events(s, event.TypeToolFinished)); n != 6 {
		t.Errorf("log has %d tool results, want 6", n)
	}
	// Replaying the log rebuilds the same context.
	recs, err := s.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	r := &Session{meta: s.meta}
	r.replay(recs)
	if len(r.conv) != len(conv) || r.conv[0].Content != conv[0].Content || r.conv[len(conv)-1].Content != conv[len(conv)-1].Content {
		t.Errorf("replayed context differs: %d vs %d messages", len(r.conv), len(conv))
	}
	_ = eventlog.Record{}
}

func TestContextOverflowCompactsAndRetriesOnce(t *testing.T) {
	e := newEnv(t, growScript)
	s := e.create("overflow the window")
	e.settled(s)
	if st := s.State(); st != Idle {
		t.Fatalf("state %v: %s", st, e.svc.Info(s).Error)
	}
	comps := e.events(s, event.TypeCompaction)
	if len(comps) != 1 || comps[0]["forced"] != true {
		t.Errorf("want one forced compaction, got %v", comps)
	}
	msgs := e.events(s, event.TypeAssistantMessage)
	if got := fmt.Sprint(msgs[len(msgs)-1]["text"]); got != "recovered after the overflow" {
		t.Errorf("last answer = %q", got)
	}
	_ = context.Background()
}

const flakyScript = `{"rules":[
 {"when":{"task":"^flaky"},"fail":{"status":503,"times":2},"text":"answered after retries"}
],"default":{"text":"ok"}}`

func TestModelRetriesAreRecorded(t *testing.T) {
	e := newEnv(t, flakyScript)
	os.WriteFile(filepath.Join(e.repo, "arbor.json"), []byte(`{"models":{"scripted":{}}}`), 0o644)
	s := e.create("flaky endpoint")
	e.settled(s)
	if n := len(e.events(s, event.TypeModelRetry)); n != 2 {
		t.Errorf("%d model_retry events, want 2", n)
	}
	if got := e.svc.Info(s).Usage.Retries; got != 2 {
		t.Errorf("usage retries = %d, want 2", got)
	}
	if s.State() != Idle {
		t.Errorf("state %v", s.State())
	}
}

const fencedScript = `{"rules":[
 {"when":{"task":"^fenced","turn":1},"text":"I will compute it.","code":"print(6*7)"},
 {"when":{"task":"^fenced","last":"42"},"text":"the answer is 42"}
],"default":{"text":"no"}}`

// TestFencedToolMode: a model without tool calling writes python blocks; they run in the
// kernel and their output goes back as a message.
func TestFencedToolMode(t *testing.T) {
	e := newEnv(t, fencedScript)
	os.WriteFile(filepath.Join(e.repo, "arbor.json"), []byte(`{"models":{"scripted":{"toolMode":"fenced"}}}`), 0o644)
	s := e.create("fenced code please")
	e.settled(s)
	outs := e.events(s, event.TypeToolFinished)
	if len(outs) != 1 || !strings.Contains(fmt.Sprint(outs[0]["output"]), "42") {
		t.Fatalf("tool results: %v", outs)
	}
	msgs := e.events(s, event.TypeAssistantMessage)
	if got := fmt.Sprint(msgs[len(msgs)-1]["text"]); got != "the answer is 42" {
		t.Errorf("final answer %q", got)
	}
}
