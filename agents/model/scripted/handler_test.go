package scripted

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

var update = flag.Bool("update", false, "rewrite golden files")

func newTestServer(t *testing.T, file string) *httptest.Server {
	t.Helper()
	s, err := Load(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, url, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, data
}

// TestStreamGolden pins the exact event stream, so a change to how replies
// are chunked is a deliberate one (go test -run Golden -update).
func TestStreamGolden(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, body string }{
		{"stream_tool_call", `{"model":"m","stream":true,"stream_options":{"include_usage":true},
			"tools":[{"type":"function","function":{"name":"python"}}],
			"messages":[{"role":"user","content":"please update the tests"}]}`},
		{"stream_fenced", `{"model":"m","stream":true,"messages":[{"role":"user","content":"please update the tests"}]}`},
		{"nonstream_tool_call", `{"model":"m","tools":[{"type":"function","function":{"name":"python"}}],
			"messages":[{"role":"system","content":"sys"},{"role":"user","content":"rename the Foo type"}]}`},
	}
	callID := regexp.MustCompile(`call_scripted_\d+`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// A server each: the prompt cache makes a reply's usage depend on the requests
			// before it in the same conversation.
			srv := newTestServer(t, "design.json")
			resp, got := post(t, srv.URL+"/v1/chat/completions", tt.body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, got)
			}
			got = callID.ReplaceAll(got, []byte("call_scripted_N"))
			golden := filepath.Join("testdata", tt.name+".golden")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("response differs from %s:\n got: %s\nwant: %s", golden, got, want)
			}
		})
	}
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, "design.json")
	tests := []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{"not json", "POST", "/v1/chat/completions", "{", 400, "not a valid chat completion request"},
		{"wrong type", "POST", "/v1/chat/completions", `{"messages": "hi"}`, 400, "not a valid chat completion request"},
		{"no messages", "POST", "/v1/chat/completions", `{"model": "m", "messages": []}`, 400, "'messages' must be a non-empty array"},
		{"wrong method", "GET", "/v1/chat/completions", "", 405, "method GET not allowed"},
		{"unknown path", "POST", "/v1/completions", "{}", 404, "unknown path /v1/completions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req, err := http.NewRequestWithContext(t.Context(), tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body errorBody
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatalf("error body is not OpenAI-style JSON: %v", err)
			}
			if resp.StatusCode != tt.status || !strings.Contains(body.Error.Message, tt.want) || body.Error.Type == "" {
				t.Errorf("got %d %+v; want %d with message containing %q", resp.StatusCode, body.Error, tt.status, tt.want)
			}
		})
	}
}

// TestGoOpenAIClient drives the handler with the real go-openai client, the
// way model.Client and any other OpenAI-compatible client would.
func TestGoOpenAIClient(t *testing.T) {
	t.Parallel()
	s, err := Load(filepath.Join("testdata", "robust.json"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = srv.URL + "/v1"
	c := openai.NewClientWithConfig(cfg)

	models, err := c.ListModels(t.Context())
	if err != nil || len(models.Models) != 1 || models.Models[0].ID != "scripted-robust" {
		t.Errorf("ListModels = %+v, %v; want the script's model", models, err)
	}

	req := openai.ChatCompletionRequest{Model: "m", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "slow"}}}
	resp, err := c.CreateChatCompletion(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != "late" || resp.Usage.PromptTokens != 10 || resp.Usage.CompletionTokens != 2 {
		t.Errorf("non-stream reply %q usage %+v; want \"late\" with the scripted usage", got, resp.Usage)
	}

	// "flaky" fails twice with 500, then answers: the counter is per rule.
	req.Messages[0].Content = "flaky"
	for i := range 2 {
		_, err := c.CreateChatCompletion(t.Context(), req)
		var apiErr *openai.APIError
		if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 500 || apiErr.Type != "server_error" {
			t.Fatalf("attempt %d: err = %v; want a 500 server_error", i+1, err)
		}
	}
	if resp, err := c.CreateChatCompletion(t.Context(), req); err != nil || resp.Choices[0].Message.Content != "recovered" {
		t.Errorf("third attempt = %v; want \"recovered\"", err)
	}

	req.Messages[0].Content = "overflow"
	_, err = c.CreateChatCompletion(t.Context(), req)
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 400 || apiErr.Code != "context_length_exceeded" {
		t.Errorf("overflow rule: err = %v; want 400 context_length_exceeded", err)
	}
}

// TestServeStops checks that Serve's goroutines and connections are gone
// once ctx ends and wait returns, even with a request still waiting on a
// delay. Not parallel: it counts goroutines.
func TestServeStops(t *testing.T) {
	s, err := Parse([]byte(`{"rules":[{"delay_ms": 600000, "text": "never"}]}`), "stop.json")
	if err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	url, wait, err := Serve(ctx, "", s, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/v1") {
		t.Errorf("url = %q; want http://127.0.0.1:PORT/v1", url)
	}
	tr := &http.Transport{}
	client := &http.Client{Transport: tr}
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		close(started)
		resp, err := client.Post(url+"/chat/completions", "application/json", strings.NewReader(`{"messages":[{"role":"user","content":"x"}]}`))
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-started
	cancel()
	if err := wait(); err != nil {
		t.Errorf("wait() = %v; want nil after ctx ended", err)
	}
	<-done
	tr.CloseIdleConnections()
	// Exiting goroutines need a moment to be scheduled; the bound only
	// keeps a real leak from hanging the test.
	for range 2000 {
		if runtime.NumGoroutine() <= before {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	buf := make([]byte, 1<<16)
	t.Errorf("goroutines: %d before, %d after stop\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
}
