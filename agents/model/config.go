package model

import (
	"errors"
	"fmt"
	"net/url"
	"time"
)

// Tool modes.
const (
	ToolModeTools  = "tools"  // the python tool is offered as a function tool
	ToolModeFenced = "fenced" // no tools; ```python blocks in the reply text are the calls
)

// Defaults applied by [New] for zero fields of [Config].
const (
	DefaultContextWindow = 128000
	DefaultMaxRetries    = 4
	DefaultTimeout       = 5 * time.Minute
	DefaultBackoff       = 500 * time.Millisecond
	maxBackoff           = 30 * time.Second
)

// Config describes one model endpoint. The zero values of the optional
// fields mean the documented defaults.
type Config struct {
	Name          string        // local name, e.g. "default" or "gpt-4o"
	BaseURL       string        // e.g. https://api.openai.com/v1, http://127.0.0.1:11434/v1
	Model         string        // model id sent to the endpoint
	APIKeyEnv     string        // NAME of the env var holding the key ("" = no key)
	ContextWindow int           // tokens; 0 = 128000
	ToolMode      string        // "tools" (default) or "fenced" (```python blocks in text)
	InputPrice    float64       // USD per 1M input tokens, 0 = unpriced
	OutputPrice   float64       // USD per 1M output tokens, 0 = unpriced
	MaxRetries    int           // retries after the first attempt; 0 = 4, negative = none
	Timeout       time.Duration // per attempt, including the whole stream; 0 = 5 min
	// Backoff is the delay before the first retry; later retries double it
	// (capped at 30s), each with full jitter. 0 = 500ms.
	Backoff time.Duration
}

// Validate reports the first problem with c, in words that say how to fix it.
func (c Config) Validate() error {
	if c.BaseURL == "" {
		return errors.New("model: base URL is empty; set ARBOR_MODEL_BASE_URL or model.baseURL in arbor.json")
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("model: base URL %q is not an http(s) URL; expected something like http://127.0.0.1:11434/v1", c.BaseURL)
	}
	if u.User != nil {
		return errors.New("model: base URL must not carry credentials; put the API key in an environment variable and name it in ARBOR_API_KEY_ENV or model.apiKeyEnv")
	}
	if c.Model == "" {
		return errors.New("model: model id is empty; set ARBOR_MODEL or model.model in arbor.json")
	}
	switch c.ToolMode {
	case "", ToolModeTools, ToolModeFenced:
	default:
		return fmt.Errorf("model: tool mode %q is unknown; use %q or %q", c.ToolMode, ToolModeTools, ToolModeFenced)
	}
	if c.ContextWindow < 0 {
		return fmt.Errorf("model: context window %d is negative", c.ContextWindow)
	}
	if c.InputPrice < 0 || c.OutputPrice < 0 {
		return errors.New("model: prices must not be negative")
	}
	if c.Timeout < 0 || c.Backoff < 0 {
		return errors.New("model: timeout and backoff must not be negative")
	}
	return nil
}

// withDefaults fills the zero optional fields.
func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = c.Model
	}
	if c.ContextWindow == 0 {
		c.ContextWindow = DefaultContextWindow
	}
	if c.ToolMode == "" {
		c.ToolMode = ToolModeTools
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = DefaultMaxRetries
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Backoff == 0 {
		c.Backoff = DefaultBackoff
	}
	return c
}

// cost prices a usage in USD.
func (c Config) cost(in, out int64) float64 {
	return float64(in)*c.InputPrice/1e6 + float64(out)*c.OutputPrice/1e6
}
