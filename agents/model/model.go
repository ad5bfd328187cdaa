// Package model talks to OpenAI-compatible chat completion endpoints
// (OpenAI, vLLM, Ollama, LM Studio, OpenRouter, the scripted model) through
// github.com/sashabaranov/go-openai, offering the model exactly one tool,
// python(code).
//
// Call [New] with a [Config], then [Client.Complete] once per model call:
//
//	c, err := model.New(model.Config{BaseURL: url, Model: "gpt-4o", APIKeyEnv: "OPENAI_API_KEY"}, logger)
//	reply, err := c.Complete(ctx, model.Request{System: prompt, Messages: msgs}, func(s string) { fmt.Print(s) })
//	// reply.Text, reply.ToolCalls (run each Code; answer with a Role "tool" message), reply.Usage
//
// Complete always streams. Transient failures (429, 5xx, timeouts, refused
// or dropped connections, a stream cut mid-reply) are retried with
// exponential backoff and full jitter; [ErrContextOverflow] tells the caller
// to compact and try again. For models without tool calling, set
// Config.ToolMode to "fenced": no tools are sent, ```python blocks in the
// reply become tool calls and tool results go back as user messages.
//
// The API key is read from the environment variable named by
// Config.APIKeyEnv once, in New, and never appears in logs or errors.
package model

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	openai "github.com/sashabaranov/go-openai"
)

// ToolName is the name of the one tool the model sees.
const ToolName = "python"

// Roles of a [Message].
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// ErrContextOverflow is returned (test with errors.Is) when the endpoint
// refuses a request because the conversation exceeds its context window.
// It is not retried: the caller compacts the conversation first.
var ErrContextOverflow = errors.New("model context window exceeded")

// ToolCall is one call of the python tool.
type ToolCall struct {
	ID   string `json:"id"`
	Code string `json:"code"`
}

// Message is one entry of the conversation.
type Message struct {
	Role       string // system, user, assistant or tool
	Content    string
	ToolCalls  []ToolCall // assistant messages only
	ToolCallID string     // tool messages only: the call this answers
}

// Usage counts tokens of one model call and prices them.
type Usage struct {
	InputTokens, OutputTokens int64
	// CachedInputTokens is the part of InputTokens the endpoint read from its prompt cache
	// (usage.prompt_tokens_details.cached_tokens): the request's prefix it had seen before.
	// 0 when the endpoint does not say.
	CachedInputTokens int64
	CostUSD           float64
	// Estimated is true when the endpoint reported no usage and the counts
	// come from the 4-characters-per-token rule.
	Estimated bool
}

// Reply is one complete assistant reply.
type Reply struct {
	Text         string
	ToolCalls    []ToolCall
	Usage        Usage // of the successful attempt only
	Retries      int   // attempts that failed before this reply
	FinishReason string
}

// Request is the conversation to continue.
type Request struct {
	System   string
	Messages []Message
	// OnRetry, if set, is called before each retry with the retry number
	// (from 1) and the error that caused it. Text already passed to onDelta
	// by the failed attempt is void: the next attempt streams from the start.
	OnRetry func(retry int, err error)
}

// Client calls one configured model endpoint. It is safe for concurrent use.
type Client struct {
	cfg    Config
	key    string
	api    *openai.Client
	http   *http.Client
	log    *slog.Logger
	redact *strings.Replacer
	// noStreamOptions is set once the endpoint has refused stream_options.
	noStreamOptions atomic.Bool
}

// New validates cfg, reads the API key from the environment and returns a
// client. A nil logger discards logs.
func New(cfg Config, logger *slog.Logger) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var key string
	if cfg.APIKeyEnv != "" {
		key = os.Getenv(cfg.APIKeyEnv)
		if key == "" {
			return nil, fmt.Errorf("model %s: environment variable %s (named by the API key setting) is empty or unset", cfg.Name, cfg.APIKeyEnv)
		}
	}
	oc := openai.DefaultConfig(key)
	oc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	// Per-attempt deadlines come from contexts; an http.Client timeout would
	// also cut long healthy streams.
	hc := &http.Client{Transport: hintTransport{base: http.DefaultTransport.(*http.Transport).Clone()}}
	oc.HTTPClient = hc
	c := &Client{cfg: cfg, key: key, api: openai.NewClientWithConfig(oc), http: hc, log: logger.With("model", cfg.Name)}
	if key != "" {
		c.redact = strings.NewReplacer(key, "[redacted]")
	}
	return c, nil
}

// CloseIdleConnections closes kept-alive connections to the endpoint, for a
// client that is no longer needed or a server about to stop.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// Config returns the client's configuration with defaults filled in.
func (c *Client) Config() Config { return c.cfg }
