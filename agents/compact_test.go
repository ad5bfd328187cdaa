package agents

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/eventlog"
	"github.com/arborhq/arbor/agents/model"
	"github.com/arborhq/arbor/agents/model/scripted"
)

const growScript = `{"rules":[
 {"when":{"task":"^Summarise"},"text":"SUMMARY: the agent printed numbered blocks; variable n counts them."},
 {"when":{"task":"^grow","last":"block 6 "},"text":"done growing"},
 {"when":{"task":"^overflow","last":"block 7 "},"fail":{"status":400,"code":"context_length_exceeded","message":"This model's maximum context length is 8192 tokens","times":1},"text":"recovered after the overflow"},
 {"when":{"task":"^(grow|overflow)"},"code":"n = globals().get('n', 0) + 1\nprint('block', n, 'x' * 400)"}
],"default":{"text":"ok"}}`

func TestCompactionKeepsContextBoundedAndReplays(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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

// longScript works for 40 model calls, each a cell with about 170 tokens of code and output;
// its summaries are long (about 2,500 bytes), as a real model's are.
var longScript = `{"rules":[
 {"when":{"system":"^You write precise working summaries"},"text":"` + strings.Repeat("Goal: keep working on the long task. Progress: steps done, files read. ", 35) + `"},
 {"when":{"task":"^long","last":"step 40 "},"text":"done with the long task"},
 {"when":{"task":"^long"},"code":"n = globals().get('n', 0) + 1\nprint('step', n, 'ok ' * 200)"}
],"default":{"text":"ok"}}`

// TestCompactionCutsRarely runs 40 model calls in a 2,000-token window. Counted at the model:
// between two compactions (and before the first) the conversation grows by at least 20% of
// the window, and between compactions every request repeats the one before byte for byte
// and appends to it, so a provider's prompt cache reuses all of it.
func TestCompactionCutsRarely(t *testing.T) {
	t.Parallel()
	const window = 2000
	e := newEnv(t, longScript)
	os.WriteFile(filepath.Join(e.repo, "arbor.json"), []byte(fmt.Sprintf(`{"maxTurnSteps":60,"models":{"scripted":{"contextWindow":%d}}}`, window)), 0o644)
	var mu sync.Mutex
	var reqs []scripted.Request
	e.script.Observe(func(r scripted.Request) { mu.Lock(); reqs = append(reqs, r); mu.Unlock() })
	s := e.create("long task: work in many small steps")
	e.settled(s)
	if msgs := e.events(s, event.TypeAssistantMessage); fmt.Sprint(msgs[len(msgs)-1]["text"]) != "done with the long task" {
		t.Fatalf("the session did not finish: %v", msgs[len(msgs)-1])
	}
	mu.Lock()
	defer mu.Unlock()
	key := func(m openai.ChatCompletionMessage) string {
		return fmt.Sprintf("%s|%s|%s|%v", m.Role, m.Content, m.ToolCallID, m.ToolCalls)
	}
	var (
		prev        *scripted.Request
		grown       int // tokens of new assistant and tool messages since the last compaction
		compactions int
		main        int
	)
	seen := map[string]bool{}
	for i := range reqs {
		r := &reqs[i]
		if strings.HasPrefix(r.System, "You write precise working summaries") {
			compactions++
			if grown < window/5 {
				t.Errorf("compaction %d after the context grew by %d tokens, want at least %d (20%% of the window)", compactions, grown, window/5)
			}
			grown, prev = 0, nil
			continue
		}
		main++
		for _, m := range r.Messages {
			if (m.Role == "assistant" || m.Role == "tool") && !seen[key(m)] {
				seen[key(m)] = true
				n := len(m.Content)
				for _, c := range m.ToolCalls {
					n += len(c.Function.Arguments)
				}
				grown += n / 4
			}
		}
		if prev != nil {
			// No compaction since prev: this request starts with prev, byte for byte.
			if len(r.Messages) <= len(prev.Messages) {
				t.Fatalf("request %d has %d messages, the one before %d: the conversation did not only grow", i, len(r.Messages), len(prev.Messages))
			}
			for j := range prev.Messages {
				if key(r.Messages[j]) != key(prev.Messages[j]) {
					t.Fatalf("request %d: message %d differs from the request before, with no compaction between", i, j)
				}
			}
			if r.CachedChars != prev.Chars {
				t.Errorf("request %d: %d characters cached, want all %d of the request before", i, r.CachedChars, prev.Chars)
			}
		}
		prev = r
	}
	if n := len(e.events(s, event.TypeCompaction)); n != compactions || n == 0 {
		t.Fatalf("%d compaction events, %d summary requests; want them equal and some", n, compactions)
	}
	if main != 41 {
		t.Errorf("%d model calls of the task, want 41 (40 cells and the answer)", main)
	}
	t.Logf("%d compactions over %d model calls", compactions, main)
	// A compacted context stays within the window, its summary within its bound.
	for _, c := range e.events(s, event.TypeCompaction) {
		if n := len(fmt.Sprint(c["summary"])); n > int(summaryShare*window*4) {
			t.Errorf("a summary of %d bytes, want at most %d", n, int(summaryShare*window*4))
		}
	}
}

// TestCutPoint: a compaction keeps the latest messages that fit its budget, at most keep of
// them, never fewer than the latest exchange, and never parts a tool call from its results.
func TestCutPoint(t *testing.T) {
	t.Parallel()
	user := func(n int) model.Message { return model.Message{Role: model.RoleUser, Content: strings.Repeat("u", n)} }
	call := func(n int) model.Message {
		return model.Message{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c", Code: strings.Repeat("c", n)}}}
	}
	out := func(n int) model.Message {
		return model.Message{Role: model.RoleTool, ToolCallID: "c", Content: strings.Repeat("o", n)}
	}
	// The task, then five exchanges of a call (4+4 tokens) and its output (100+4 tokens).
	conv := []model.Message{user(40)}
	for range 5 {
		conv = append(conv, call(4), out(400))
	}
	two := []model.Message{call(4), out(400), out(400)}
	tests := []struct {
		name   string
		conv   []model.Message
		keep   int
		budget int64
		want   int
	}{
		{"keep bounds", conv, 4, 10000, len(conv) - 4},
		{"budget bounds", conv, 10, 3 * 112, len(conv) - 6},
		{"budget keeps at least the latest exchange", conv, 10, 0, len(conv) - 2},
		{"keep 1 keeps the call with its result", conv, 1, 10000, len(conv) - 2},
		{"two results stay with their call", append([]model.Message{user(40)}, two...), 1, 0, 1},
		{"everything fits: nothing to cut", conv, 100, 10000, 0},
		{"a user message last", append(append([]model.Message(nil), conv...), user(8)), 1, 10000, len(conv)},
	}
	for _, tt := range tests {
		if got := cutPoint(tt.conv, tt.keep, tt.budget); got != tt.want {
			t.Errorf("%s: cut %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestCompactionLeavesItsShare: what a compaction leaves — system prompt, summary, the kernel's
// live variables, the kept messages — is at most 0.4 of the window, counted at the model,
// even when the live variables take much of it.
func TestCompactionLeavesItsShare(t *testing.T) {
	const window = 4000
	script := `{"rules":[
 {"when":{"system":"^You write precise working summaries"},"text":"` + strings.Repeat("Goal: keep working on the task. Progress: steps done. ", 50) + `"},
 {"when":{"task":"^vars","last":"step 30 "},"text":"done"},
 {"when":{"task":"^vars"},"code":"if 'variable_with_a_long_name_000' not in globals():\n    for i in range(150):\n        globals()[f'variable_with_a_long_name_{i:03d}'] = i\nn = globals().get('n', 0) + 1\nprint('step', n, 'ok ' * 100)"}
],"default":{"text":"ok"}}`
	e := newEnv(t, script)
	os.WriteFile(filepath.Join(e.repo, "arbor.json"), []byte(fmt.Sprintf(`{"maxTurnSteps":40,"models":{"scripted":{"contextWindow":%d}}}`, window)), 0o644)
	var mu sync.Mutex
	var reqs []scripted.Request
	e.script.Observe(func(r scripted.Request) { mu.Lock(); reqs = append(reqs, r); mu.Unlock() })
	s := e.create("vars: work with many live variables")
	e.settled(s)
	comps := e.events(s, event.TypeCompaction)
	if len(comps) == 0 || len(fmt.Sprint(comps[0]["liveVariables"])) < 1500 {
		t.Fatalf("compactions %v; want some, with the live variables listed", comps)
	}
	mu.Lock()
	defer mu.Unlock()
	after := 0
	for i, r := range reqs {
		if i == 0 || !strings.HasPrefix(reqs[i-1].System, "You write precise working summaries") {
			continue
		}
		after++
		if limit := int(compactTo * compactAt * window); r.PromptTokens > limit {
			t.Errorf("request %d after a compaction: %d input tokens, want at most %d", i, r.PromptTokens, limit)
		}
	}
	if after != len(comps) {
		t.Errorf("%d requests after a compaction, want %d", after, len(comps))
	}
}
