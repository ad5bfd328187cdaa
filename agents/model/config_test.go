package model_test

import (
	"strings"
	"testing"
	"time"

	"github.com/arborhq/arbor/agents/model"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	ok := model.Config{BaseURL: "http://127.0.0.1:11434/v1", Model: "qwen"}
	tests := []struct {
		name string
		mod  func(*model.Config)
		want string // "" = valid
	}{
		{"minimal", func(*model.Config) {}, ""},
		{"fenced", func(c *model.Config) { c.ToolMode = "fenced" }, ""},
		{"empty base URL", func(c *model.Config) { c.BaseURL = "" }, "model: base URL is empty; set ARBOR_MODEL_BASE_URL or model.baseURL in arbor.json"},
		{"base URL without scheme", func(c *model.Config) { c.BaseURL = "127.0.0.1:11434/v1" }, `base URL "127.0.0.1:11434/v1" is not an http(s) URL`},
		{"base URL with ftp", func(c *model.Config) { c.BaseURL = "ftp://x/v1" }, "is not an http(s) URL"},
		{"credentials in URL", func(c *model.Config) { c.BaseURL = "https://user:sk-secret@x/v1" }, "must not carry credentials"},
		{"empty model", func(c *model.Config) { c.Model = "" }, "model: model id is empty; set ARBOR_MODEL"},
		{"bad tool mode", func(c *model.Config) { c.ToolMode = "xml" }, `tool mode "xml" is unknown`},
		{"negative window", func(c *model.Config) { c.ContextWindow = -1 }, "context window -1 is negative"},
		{"negative price", func(c *model.Config) { c.OutputPrice = -1 }, "prices must not be negative"},
		{"negative timeout", func(c *model.Config) { c.Timeout = -time.Second }, "must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := ok
			tt.mod(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate() = %v; want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate() = %v; want error containing %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "sk-secret") {
				t.Errorf("Validate() error leaks the URL's password: %v", err)
			}
		})
	}
}

func TestNewDefaults(t *testing.T) {
	t.Parallel()
	c, err := model.New(model.Config{BaseURL: "http://127.0.0.1:9/v1", Model: "m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := c.Config()
	want := model.Config{
		Name: "m", BaseURL: "http://127.0.0.1:9/v1", Model: "m", ContextWindow: 128000, ToolMode: "tools",
		MaxRetries: 4, Timeout: 5 * time.Minute, Backoff: 500 * time.Millisecond,
	}
	if got != want {
		t.Errorf("Config() = %+v; want %+v", got, want)
	}
}

func TestNewMissingKey(t *testing.T) {
	t.Setenv("ARBOR_TEST_UNSET_KEY", "")
	_, err := model.New(model.Config{BaseURL: "http://127.0.0.1:9/v1", Model: "m", APIKeyEnv: "ARBOR_TEST_UNSET_KEY"}, nil)
	if err == nil || !strings.Contains(err.Error(), "environment variable ARBOR_TEST_UNSET_KEY") {
		t.Errorf("New without key = %v; want an error naming the variable", err)
	}
}
