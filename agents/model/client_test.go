package model_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/arborhq/arbor/agents/model"
	"github.com/arborhq/arbor/agents/model/scripted"
)

// startScripted serves script on a loopback port for the test's lifetime.
func startScripted(t *testing.T, script string) string {
	t.Helper()
	s, err := scripted.Parse([]byte(script), t.Name()+".json")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	url, wait, err := scripted.Serve(ctx, "", s, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := wait(); err != nil {
			t.Errorf("scripted server: %v", err)
		}
	})
	return url
}

// newClient makes a client with fast retries; mod adjusts the config.
func newClient(t *testing.T, url string, mod func(*model.Config)) *model.Client {
	t.Helper()
	cfg := model.Config{BaseURL: url, Model: "scripted", Backoff: time.Millisecond, InputPrice: 2, OutputPrice: 8}
	if mod != nil {
		mod(&cfg)
	}
	c, err := model.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

const conversationScript = `{
  "rules": [
    {"when": {"task": "^say hi", "turn": 1}, "text": "Hello there, I am a scripted model speaking in many small pieces.",
     "usage": {"prompt_tokens": 1000, "completion_tokens": 500}},
    {"when": {"task": "^count", "turn": 1}, "code": "print(sum(range(10)))"},
    {"when": {"task": "^count", "last": "^45$"}, "text": "The sum is 45."},
    {"when": {"task": "^both"}, "text": "Let me look — ünïcode first.", "code": "import os\nprint(os.listdir('.'))\nprint(\"quotes\\n\")"},
    {"when": {"last": "Traceback"}, "text": "the cell failed; stopping"}
  ],
  "default": {"text": "nothing scripted for this"}
}`

func TestCompleteAgainstScriptedModel(t *testing.T) {
	t.Parallel()
	url := startScripted(t, conversationScript)
	user := func(s string) model.Message { return model.Message{Role: model.RoleUser, Content: s} }
	tests := []struct {
		name      string
		mode      string
		msgs      []model.Message
		wantText  string
		wantCode  []string
		wantFin   string
		wantUsage *model.Usage
	}{
		{
			name: "text with server usage", msgs: []model.Message{user("say hi")},
			wantText: "Hello there, I am a scripted model speaking in many small pieces.", wantFin: "stop",
			wantUsage: &model.Usage{InputTokens: 1000, OutputTokens: 500, CostUSD: 1000*2.0/1e6 + 500*8.0/1e6},
		},
		{
			name: "tool call", msgs: []model.Message{user("count to ten")},
			wantCode: []string{"print(sum(range(10)))"}, wantFin: "tool_calls",
		},
		{
			name: "tool result goes back", msgs: []model.Message{
				user("count to ten"),
				{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "call_1", Code: "print(sum(range(10)))"}}},
				{Role: model.RoleTool, ToolCallID: "call_1", Content: "45"},
			},
			wantText: "The sum is 45.", wantFin: "stop",
		},
		{
			name: "text and code", msgs: []model.Message{user("both please")},
			wantText: "Let me look — ünïcode first.",
			wantCode: []string{"import os\nprint(os.listdir('.'))\nprint(\"quotes\\n\")"}, wantFin: "tool_calls",
		},
		{
			name: "traceback rule", msgs: []model.Message{
				user("anything"),
				{Role: model.RoleAssistant, Content: "trying", ToolCalls: []model.ToolCall{{ID: "c", Code: "1/0"}}},
				{Role: model.RoleTool, ToolCallID: "c", Content: "Traceback (most recent call last):\nZeroDivisionError"},
			},
			wantText: "the cell failed; stopping", wantFin: "stop",
		},
		{name: "default", msgs: []model.Message{user("unscripted")}, wantText: "nothing scripted for this", wantFin: "stop"},
		{
			name: "fenced tool call", mode: model.ToolModeFenced, msgs: []model.Message{user("count to ten")},
			wantCode: []string{"print(sum(range(10)))"}, wantFin: "stop",
		},
		{
			name: "fenced text and code", mode: model.ToolModeFenced, msgs: []model.Message{user("both please")},
			wantText: "Let me look — ünïcode first.",
			wantCode: []string{"import os\nprint(os.listdir('.'))\nprint(\"quotes\\n\")"}, wantFin: "stop",
		},
		{
			name: "fenced tool result as user message", mode: model.ToolModeFenced, msgs: []model.Message{
				user("count to ten"),
				{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "f1", Code: "print(sum(range(10)))"}}},
				{Role: model.RoleTool, ToolCallID: "f1", Content: "Traceback: oops"},
			},
			wantText: "the cell failed; stopping", wantFin: "stop",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newClient(t, url, func(c *model.Config) { c.ToolMode = tt.mode })
			var streamed strings.Builder
			reply, err := c.Complete(t.Context(), model.Request{System: "You are a test.", Messages: tt.msgs}, func(s string) {
				streamed.WriteString(s)
			})
			if err != nil {
				t.Fatal(err)
			}
			if reply.Text != tt.wantText {
				t.Errorf("Text = %q; want %q", reply.Text, tt.wantText)
			}
			if tt.mode != model.ToolModeFenced && streamed.String() != reply.Text {
				t.Errorf("streamed deltas %q differ from Text %q", streamed.String(), reply.Text)
			}
			var codes []string
			for _, tc := range reply.ToolCalls {
				if tc.ID == "" {
					t.Errorf("tool call without ID: %+v", tc)
				}
				codes = append(codes, tc.Code)
			}
			if strings.Join(codes, "\x00") != strings.Join(tt.wantCode, "\x00") {
				t.Errorf("tool call code = %q; want %q", codes, tt.wantCode)
			}
			if reply.FinishReason != tt.wantFin {
				t.Errorf("FinishReason = %q; want %q", reply.FinishReason, tt.wantFin)
			}
			if reply.Retries != 0 {
				t.Errorf("Retries = %d; want 0", reply.Retries)
			}
			if tt.wantUsage != nil && reply.Usage != *tt.wantUsage {
				t.Errorf("Usage = %+v; want %+v", reply.Usage, *tt.wantUsage)
			}
			if reply.Usage.InputTokens <= 0 || reply.Usage.OutputTokens <= 0 || reply.Usage.CostUSD <= 0 {
				t.Errorf("Usage = %+v; want positive counts and cost", reply.Usage)
			}
		})
	}
}

const robustScript = `{
  "rules": [
    {"when": {"task": "flaky"}, "fail": {"status": 500, "times": 2}, "text": "recovered"},
    {"when": {"task": "limited"}, "fail": {"status": 429, "times": 3, "message": "slow down"}, "text": "ok"},
    {"when": {"task": "down"}, "fail": {"status": 503}},
    {"when": {"task": "overflow"}, "fail": {"status": 400, "code": "context_length_exceeded"}},
    {"when": {"task": "bad request"}, "fail": {"status": 400, "message": "messages[0]: bad role"}},
    {"when": {"task": "cut"}, "fail": {"cut": true, "times": 1}, "text": "the whole reply, streamed again"},
    {"when": {"task": "garbage"}, "fail": {"garbage": true}},
    {"when": {"task": "slow"}, "delay_ms": 60000, "text": "late"}
  ]
}`

func TestCompleteRobustness(t *testing.T) {
	t.Parallel()
	url := startScripted(t, robustScript)
	tests := []struct {
		task        string
		maxRetries  int
		timeout     time.Duration
		wantText    string
		wantRetries int
		wantErr     []string // substrings of the error
		overflow    bool
	}{
		{task: "flaky", wantText: "recovered", wantRetries: 2},
		{task: "limited", wantText: "ok", wantRetries: 3},
		{task: "cut", wantText: "the whole reply, streamed again", wantRetries: 1},
		{task: "down", maxRetries: 2, wantRetries: 2, wantErr: []string{"model endpoint " + url, "503", "gave up after 2 retries"}},
		{task: "overflow", wantErr: []string{"model endpoint " + url, "context window exceeded", "maximum context length"}, overflow: true},
		{task: "bad request", wantErr: []string{"model endpoint " + url + " answered 400", "bad role"}},
		{task: "garbage", wantErr: []string{"model endpoint " + url + " answered garbage", "text/html"}},
		{task: "slow", maxRetries: 1, timeout: 100 * time.Millisecond, wantRetries: 1, wantErr: []string{"timed out after 100ms", "gave up after 1 retries"}},
	}
	for _, tt := range tests {
		t.Run(tt.task, func(t *testing.T) {
			t.Parallel()
			c := newClient(t, url, func(c *model.Config) {
				c.MaxRetries, c.Timeout = tt.maxRetries, tt.timeout
			})
			var retried []int
			req := model.Request{
				Messages: []model.Message{{Role: model.RoleUser, Content: tt.task}},
				OnRetry:  func(n int, err error) { retried = append(retried, n) },
			}
			var streamed strings.Builder
			reply, err := c.Complete(t.Context(), req, func(s string) { streamed.WriteString(s) })
			if len(retried) != tt.wantRetries {
				t.Errorf("OnRetry called %d times; want %d", len(retried), tt.wantRetries)
			}
			if errors.Is(err, model.ErrContextOverflow) != tt.overflow {
				t.Errorf("errors.Is(%v, ErrContextOverflow) = %v; want %v", err, !tt.overflow, tt.overflow)
			}
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("Complete succeeded with %q; want an error", reply.Text)
				}
				for _, want := range tt.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not contain %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// A cut attempt's partial text was streamed before the retry
			// started over; OnRetry told the caller to drop it.
			if !strings.HasSuffix(streamed.String(), reply.Text) {
				t.Errorf("streamed %q does not end with the reply %q", streamed.String(), reply.Text)
			}
			if reply.Text != tt.wantText || reply.Retries != tt.wantRetries {
				t.Errorf("reply = %q after %d retries; want %q after %d", reply.Text, reply.Retries, tt.wantText, tt.wantRetries)
			}
		})
	}
}

func TestCompleteUnreachable(t *testing.T) {
	t.Parallel()
	// A port that was just free: connecting to it is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/v1"
	ln.Close()
	c := newClient(t, url, func(c *model.Config) { c.MaxRetries = 2 })
	_, err = c.Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}, nil)
	if err == nil {
		t.Fatal("Complete succeeded against a closed port")
	}
	for _, want := range []string{"model endpoint " + url + " unreachable", "connection refused", "gave up after 2 retries"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestCompleteCanceled(t *testing.T) {
	t.Parallel()
	url := startScripted(t, robustScript)
	c := newClient(t, url, nil)
	ctx, cancel := context.WithCancel(t.Context())
	req := model.Request{
		Messages: []model.Message{{Role: model.RoleUser, Content: "slow"}},
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Complete(ctx, req, nil)
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Complete after cancel = %v; want context.Canceled", err)
	}
}

func TestCompleteConcurrent(t *testing.T) {
	t.Parallel()
	url := startScripted(t, conversationScript)
	c := newClient(t, url, nil)
	const n = 16
	errs := make(chan error, n)
	for i := range n {
		go func() {
			task := "say hi"
			if i%2 == 1 {
				task = "count to ten"
			}
			reply, err := c.Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: task}}}, nil)
			if err == nil && reply.Text == "" && len(reply.ToolCalls) != 1 {
				err = errors.New("empty reply")
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestCachedInputTokens: the cached tokens an endpoint reports in the stream's usage reach
// Reply.Usage; the scripted model reports the prefix a request shares with the one before.
func TestCachedInputTokens(t *testing.T) {
	t.Parallel()
	url := startScripted(t, conversationScript)
	c := newClient(t, url, nil)
	sys := strings.Repeat("You are a careful agent. ", 40)
	msgs := []model.Message{{Role: model.RoleUser, Content: "count to ten"}}
	first, err := c.Complete(t.Context(), model.Request{System: sys, Messages: msgs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if first.Usage.CachedInputTokens != 0 || first.Usage.Estimated {
		t.Errorf("first call: usage %+v; want server-reported usage with nothing cached", first.Usage)
	}
	msgs = append(msgs, model.Message{Role: model.RoleAssistant, ToolCalls: first.ToolCalls},
		model.Message{Role: model.RoleTool, ToolCallID: first.ToolCalls[0].ID, Content: "45"})
	second, err := c.Complete(t.Context(), model.Request{System: sys, Messages: msgs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The first request's characters (system + task) out of the second's, in prompt tokens.
	args := `{"code":"print(sum(range(10)))"}`
	want := second.Usage.InputTokens * int64(len(sys)+len("count to ten")) / int64(len(sys)+len("count to ten")+len(args)+len("45"))
	if got := second.Usage.CachedInputTokens; got != want || got == 0 {
		t.Errorf("second call: %d cached input tokens of %d; want %d", got, second.Usage.InputTokens, want)
	}
}
