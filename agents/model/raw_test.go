package model_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arborhq/arbor/agents/model"
)

// Tests here use hand-written server responses for what the scripted model
// does not produce: quirks of other OpenAI-compatible servers.

func sse(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		fmt.Fprintf(&b, "data: %s\n\n", e)
	}
	return b.String()
}

func rawServer(t *testing.T, bodies ...string) (url string, hits *atomic.Int32) {
	t.Helper()
	hits = new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(hits.Add(1)) - 1
		body := bodies[min(n, len(bodies)-1)]
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1", hits
}

func TestCompleteServerQuirks(t *testing.T) {
	t.Parallel()
	const (
		role = `{"choices":[{"index":0,"delta":{"role":"assistant"}}]}`
		stop = `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`
	)
	text := func(s string) string {
		b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]string{"content": s}}}})
		return string(b)
	}
	tests := []struct {
		name        string
		bodies      []string
		wantText    string
		wantCode    []string
		wantUsage   model.Usage
		wantRetries int
		wantErr     string
		overflow    bool
	}{
		{
			name:      "no usage: estimated at 4 chars per token",
			bodies:    []string{sse(role, text("12345678"), stop, "[DONE]")},
			wantText:  "12345678",
			wantUsage: model.Usage{InputTokens: 1, OutputTokens: 2, Estimated: true},
		},
		{
			name: "tool calls without index, told apart by id",
			bodies: []string{sse(role,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"a","type":"function","function":{"name":"python","arguments":"{\"code\":\"1\"}"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"b","type":"function","function":{"name":"python","arguments":"{\"code\":\"2\"}"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":7,"completion_tokens":3}}`,
				"[DONE]")},
			wantCode:  []string{"1", "2"},
			wantUsage: model.Usage{InputTokens: 7, OutputTokens: 3},
		},
		{
			name: "indexed parallel tool calls, bare code arguments",
			bodies: []string{sse(role,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"python","arguments":""}},{"index":1,"id":"b","type":"function","function":{"name":"python","arguments":"print("}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"code\": \"x = 1\"}"}},{"index":1,"function":{"arguments":"2)"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
				`{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}}`)},
			wantCode:  []string{"x = 1", "print(2)"},
			wantUsage: model.Usage{InputTokens: 7, OutputTokens: 3},
		},
		{
			name: "keep-alive comments (OpenRouter) and odd argument names",
			bodies: []string{": OPENROUTER PROCESSING\n\n: OPENROUTER PROCESSING\n\n" + sse(role,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"python","arguments":"{\"source\": \"print(3)\"}"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":7,"completion_tokens":3}}`,
				"[DONE]")},
			wantCode:  []string{"print(3)"},
			wantUsage: model.Usage{InputTokens: 7, OutputTokens: 3},
		},
		{
			name:        "clean end without finish reason is a cut, retried",
			bodies:      []string{sse(role, text("partial")), sse(role, text("full"), stop)},
			wantText:    "full",
			wantRetries: 1,
			wantUsage:   model.Usage{InputTokens: 1, OutputTokens: 1, Estimated: true},
		},
		{
			name:    "event that is not JSON",
			bodies:  []string{sse(role, `{"choices": [nope`)},
			wantErr: "answered garbage: a stream event is not a chat completion chunk",
		},
		{
			name:     "overflow reported inside the stream",
			bodies:   []string{sse(`{"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error"}}`)},
			wantErr:  "context window exceeded",
			overflow: true,
		},
		{
			name:        "server error inside the stream is retried",
			bodies:      []string{sse(`{"error":{"message":"upstream overloaded","type":"server_error"}}`), sse(role, text("ok"), stop)},
			wantText:    "ok",
			wantRetries: 1,
			wantUsage:   model.Usage{InputTokens: 1, OutputTokens: 1, Estimated: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url, _ := rawServer(t, tt.bodies...)
			c := newClient(t, url, func(c *model.Config) { c.InputPrice, c.OutputPrice = 0, 0 })
			reply, err := c.Complete(t.Context(), model.Request{Messages: []model.Message{{Role: "user", Content: "hi"}}}, nil)
			if errors.Is(err, model.ErrContextOverflow) != tt.overflow {
				t.Errorf("errors.Is(%v, ErrContextOverflow) = %v; want %v", err, !tt.overflow, tt.overflow)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Complete error = %v; want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var codes []string
			for _, tc := range reply.ToolCalls {
				codes = append(codes, tc.Code)
			}
			if reply.Text != tt.wantText || fmt.Sprint(codes) != fmt.Sprint(tt.wantCode) {
				t.Errorf("reply text %q, code %q; want %q, %q", reply.Text, codes, tt.wantText, tt.wantCode)
			}
			if reply.Usage != tt.wantUsage || reply.Retries != tt.wantRetries {
				t.Errorf("usage %+v after %d retries; want %+v after %d", reply.Usage, reply.Retries, tt.wantUsage, tt.wantRetries)
			}
		})
	}
}

// TestKeyNeverLeaks uses a server that echoes the Authorization header into
// its error bodies, the worst case for a client that quotes error bodies.
func TestKeyNeverLeaks(t *testing.T) {
	const key = "sk-test-0123456789abcdef"
	t.Setenv("ARBOR_TEST_MODEL_KEY", key)
	var sawKey atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		sawKey.Store(auth == "Bearer "+key)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, `{"error":{"message":"bad credentials %s","type":"server_error"}}`, auth)
	}))
	defer srv.Close()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := model.New(model.Config{BaseURL: srv.URL + "/v1", Model: "m", APIKeyEnv: "ARBOR_TEST_MODEL_KEY", MaxRetries: 1, Backoff: 1}, logger)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Complete(t.Context(), model.Request{Messages: []model.Message{{Role: "user", Content: "hi"}}}, nil)
	if err == nil {
		t.Fatal("Complete succeeded; want a 500 error")
	}
	if !sawKey.Load() {
		t.Error("the server never received the key as a bearer token")
	}
	if strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "[redacted]") {
		t.Errorf("error = %q; want the key redacted", err)
	}
	if strings.Contains(logs.String(), key) {
		t.Errorf("logs contain the key:\n%s", logs.String())
	}
}

// TestRetryAfterHonoured checks that the server's Retry-After-Ms sets the
// delay (read from the retry log line, not measured).
func TestRetryAfterHonoured(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			w.Header().Set("Retry-After-Ms", "300")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"error":{"message":"Rate limit reached","type":"requests"}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, sse(`{"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}`, "[DONE]"))
	}))
	defer srv.Close()
	var logs syncBuffer
	c, err := model.New(model.Config{BaseURL: srv.URL + "/v1", Model: "m", Backoff: time.Millisecond},
		slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	reply, err := c.Complete(t.Context(), model.Request{Messages: []model.Message{{Role: "user", Content: "hi"}}}, nil)
	if err != nil || reply.Retries != 1 {
		t.Fatalf("Complete = %+v, %v; want success after 1 retry", reply, err)
	}
	if !strings.Contains(logs.String(), "delay=300ms") {
		t.Errorf("retry log does not show the server's 300ms:\n%s", logs.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestTLSFailureNotRetried(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(http.NotFoundHandler()) // self-signed: not trusted
	defer srv.Close()
	c := newClient(t, srv.URL+"/v1", nil)
	var retries int
	_, err := c.Complete(t.Context(), model.Request{
		Messages: []model.Message{{Role: "user", Content: "hi"}},
		OnRetry:  func(int, error) { retries++ },
	}, nil)
	if err == nil || !strings.Contains(err.Error(), "TLS failed") || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("error = %v; want a TLS certificate failure", err)
	}
	if retries != 0 {
		t.Errorf("retried %d times; a TLS failure is not transient", retries)
	}
}

func TestStreamOptionsRefused(t *testing.T) {
	t.Parallel()
	var withOpts, without atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte("stream_options")) {
			withOpts.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"message":"Unrecognized request argument supplied: stream_options","type":"invalid_request_error"}}`)
			return
		}
		without.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, sse(`{"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}`, "[DONE]"))
	}))
	defer srv.Close()
	c := newClient(t, srv.URL+"/v1", nil)
	for range 2 {
		reply, err := c.Complete(t.Context(), model.Request{Messages: []model.Message{{Role: "user", Content: "hi"}}}, nil)
		if err != nil || reply.Text != "ok" || reply.Retries != 0 || !reply.Usage.Estimated {
			t.Fatalf("Complete = %+v, %v; want ok with estimated usage and no retries", reply, err)
		}
	}
	if withOpts.Load() != 1 || without.Load() != 2 {
		t.Errorf("requests with stream_options %d, without %d; want 1 and 2 (remembered)", withOpts.Load(), without.Load())
	}
}

func TestEstimateTokens(t *testing.T) {
	t.Parallel()
	c := newClient(t, "http://127.0.0.1:9/v1", nil)
	small := model.Request{System: "s", Messages: []model.Message{{Role: "user", Content: "hi"}}}
	big := model.Request{System: "s", Messages: []model.Message{
		{Role: "user", Content: strings.Repeat("x", 4000)},
		{Role: "assistant", ToolCalls: []model.ToolCall{{ID: "a", Code: strings.Repeat("y", 400)}}},
		{Role: "tool", ToolCallID: "a", Content: strings.Repeat("z", 4000)},
	}}
	s, b := c.EstimateTokens(small), c.EstimateTokens(big)
	if s <= 0 || b < 2100 || b > 2300 {
		t.Errorf("EstimateTokens = %d (small), %d (big); want positive and about 2100-2300", s, b)
	}
}
