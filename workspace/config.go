// Package workspace finds the repository a directory belongs to, loads Arbor's configuration
// for it, and confines paths to it.
//
// Call [Load] with a directory inside a git repository and the daemon's [Overrides]; the
// result merges, in order of precedence, flags and environment (the overrides), the repo's
// arbor.json, the user config ($XDG_CONFIG_HOME/arbor/config.json) and built-in defaults.
package workspace

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Model configures one OpenAI-compatible endpoint.
type Model struct {
	BaseURL       string  `json:"baseURL,omitempty"`
	Model         string  `json:"model,omitempty"`     // id sent to the endpoint; defaults to the entry's name
	APIKeyEnv     string  `json:"apiKeyEnv,omitempty"` // the NAME of the variable holding the key
	ContextWindow int     `json:"contextWindow,omitempty"`
	ToolMode      string  `json:"toolMode,omitempty"` // "tools" or "fenced"
	InputPrice    float64 `json:"inputPrice,omitempty"`
	OutputPrice   float64 `json:"outputPrice,omitempty"`
}

// Config is Arbor's configuration for one repository.
type Config struct {
	DefaultModel string           `json:"defaultModel,omitempty"`
	Models       map[string]Model `json:"models,omitempty"`
	KernelPython string           `json:"kernelPython,omitempty"`
	// MaxTurnSteps bounds model calls in one turn.
	MaxTurnSteps int `json:"maxTurnSteps,omitempty"`
	// OutputBudget is how many bytes of one tool output reach the model (head + tail).
	OutputBudget int `json:"outputBudget,omitempty"`
	// CellTimeout bounds one kernel execution, e.g. "10m".
	CellTimeout string `json:"cellTimeout,omitempty"`
	// MaxDepth bounds the session tree: 2 lets the root and its children spawn.
	MaxDepth int `json:"maxDepth,omitempty"`
	// MaxRunning caps sessions running at once; the rest wait as admitted.
	MaxRunning int `json:"maxRunning,omitempty"`
	// IdleTimeout moves an idle session to inactive (kernel snapshotted and stopped), e.g. "30m".
	IdleTimeout string `json:"idleTimeout,omitempty"`
	// Sandbox runs kernels under "bwrap" (bubblewrap): read-only system, writable worktree and
	// session directory, private /tmp, no network unless AllowNetwork. "" runs them plainly.
	Sandbox      string `json:"sandbox,omitempty"`
	AllowNetwork bool   `json:"allowNetwork,omitempty"`
	// Worktree prepares each new session worktree with what a checkout lacks.
	Worktree WorktreeSetup `json:"worktree,omitempty"`
}

// WorktreeSetup lists untracked paths of the main worktree (.env, node_modules, build caches)
// to copy or symlink into each new session worktree, and a command to run there after.
type WorktreeSetup struct {
	Copy    []string `json:"copy,omitempty"`
	Link    []string `json:"link,omitempty"`
	Command string   `json:"command,omitempty"`
	Timeout string   `json:"timeout,omitempty"` // for Command, e.g. "5m"; default 10m
}

// Empty reports whether there is nothing to set up.
func (w WorktreeSetup) Empty() bool { return len(w.Copy) == 0 && len(w.Link) == 0 && w.Command == "" }

// Overrides come from the daemon's flags and environment and beat every file.
type Overrides struct {
	ModelBaseURL string // ARBOR_MODEL_BASE_URL
	Model        string // ARBOR_MODEL
	APIKeyEnv    string // ARBOR_API_KEY_ENV
	KernelPython string // ARBOR_KERNEL_PYTHON
}

// OverridesFromEnv reads the ARBOR_* variables of DESIGN's configuration table.
func OverridesFromEnv() Overrides {
	return Overrides{
		ModelBaseURL: os.Getenv("ARBOR_MODEL_BASE_URL"),
		Model:        os.Getenv("ARBOR_MODEL"),
		APIKeyEnv:    os.Getenv("ARBOR_API_KEY_ENV"),
		KernelPython: os.Getenv("ARBOR_KERNEL_PYTHON"),
	}
}

// Defaults are the built-in values under every layer.
func Defaults() Config {
	return Config{
		MaxTurnSteps: 40,
		OutputBudget: 8 << 10,
		CellTimeout:  "10m",
		MaxDepth:     2,
		MaxRunning:   8,
		IdleTimeout:  "30m",
	}
}

// ErrNoModel means no model is configured; its message says how to configure one.
var ErrNoModel = errors.New("no model configured: set ARBOR_MODEL_BASE_URL and ARBOR_MODEL " +
	"(and ARBOR_API_KEY_ENV, the name of the variable holding the key), or add \"models\" and " +
	"\"defaultModel\" to arbor.json; `arbor demo` runs on the built-in scripted model")

// Load merges the configuration for the repository whose top level is root.
func Load(root string, ov Overrides) (Config, error) {
	cfg := Defaults()
	if p := UserConfigPath(); p != "" {
		if err := mergeFile(&cfg, p); err != nil {
			return cfg, err
		}
	}
	if err := mergeFile(&cfg, filepath.Join(root, "arbor.json")); err != nil {
		return cfg, err
	}
	if ov.ModelBaseURL != "" || ov.Model != "" {
		name := ov.Model
		if name == "" {
			name = "default"
		}
		m := cfg.Models[name]
		if ov.ModelBaseURL != "" {
			m.BaseURL = ov.ModelBaseURL
		}
		if ov.APIKeyEnv != "" {
			m.APIKeyEnv = ov.APIKeyEnv
		}
		if cfg.Models == nil {
			cfg.Models = map[string]Model{}
		}
		cfg.Models[name] = m
		cfg.DefaultModel = name
	}
	if ov.KernelPython != "" {
		cfg.KernelPython = ov.KernelPython
	}
	return cfg, cfg.Validate()
}

// Validate checks durations and model entries.
func (c Config) Validate() error {
	for _, d := range []struct{ name, v string }{{"cellTimeout", c.CellTimeout}, {"idleTimeout", c.IdleTimeout}} {
		if _, err := time.ParseDuration(d.v); err != nil {
			return fmt.Errorf("config: %s %q is not a duration like \"10m\"", d.name, d.v)
		}
	}
	if t := c.Worktree.Timeout; t != "" {
		if _, err := time.ParseDuration(t); err != nil {
			return fmt.Errorf("config: worktree.timeout %q is not a duration like \"5m\"", t)
		}
	}
	for _, p := range append(append([]string{}, c.Worktree.Copy...), c.Worktree.Link...) {
		if filepath.IsAbs(p) || p == ".." || strings.HasPrefix(p, "../") {
			return fmt.Errorf("config: worktree path %q must be relative to the repository and inside it", p)
		}
	}
	if c.Sandbox != "" && c.Sandbox != "bwrap" {
		return fmt.Errorf("config: sandbox %q: want \"bwrap\" or nothing", c.Sandbox)
	}
	for name, m := range c.Models {
		if m.ToolMode != "" && m.ToolMode != "tools" && m.ToolMode != "fenced" {
			return fmt.Errorf("config: models.%s.toolMode %q: want \"tools\" or \"fenced\"", name, m.ToolMode)
		}
	}
	return nil
}

// ResolveModel returns the named model, or the default one when name is "".
func (c Config) ResolveModel(name string) (string, Model, error) {
	if name == "" {
		name = c.DefaultModel
	}
	if name == "" {
		if len(c.Models) == 1 {
			for n := range c.Models {
				name = n
			}
		} else {
			return "", Model{}, ErrNoModel
		}
	}
	m, ok := c.Models[name]
	if !ok {
		return "", Model{}, fmt.Errorf("unknown model %q: configured models are %s", name, c.modelNames())
	}
	if m.Model == "" {
		m.Model = name
	}
	if m.BaseURL == "" {
		return "", Model{}, fmt.Errorf("model %q has no baseURL: %w", name, ErrNoModel)
	}
	return name, m, nil
}

func (c Config) modelNames() string {
	if len(c.Models) == 0 {
		return "none (" + ErrNoModel.Error() + ")"
	}
	var names []string
	for n := range c.Models {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// Durations parses the duration fields; Validate has checked them.
func (c Config) Durations() (cell, idle time.Duration) {
	cell, _ = time.ParseDuration(c.CellTimeout)
	idle, _ = time.ParseDuration(c.IdleTimeout)
	return cell, idle
}

func mergeFile(cfg *Config, path string) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read config %s: %w", path, err)
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	var layer Config
	if err := dec.Decode(&layer); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	merge(cfg, layer)
	return nil
}

func merge(dst *Config, src Config) {
	if src.DefaultModel != "" {
		dst.DefaultModel = src.DefaultModel
	}
	for n, m := range src.Models {
		if dst.Models == nil {
			dst.Models = map[string]Model{}
		}
		dst.Models[n] = m
	}
	if src.KernelPython != "" {
		dst.KernelPython = src.KernelPython
	}
	if src.MaxTurnSteps != 0 {
		dst.MaxTurnSteps = src.MaxTurnSteps
	}
	if src.OutputBudget != 0 {
		dst.OutputBudget = src.OutputBudget
	}
	if src.CellTimeout != "" {
		dst.CellTimeout = src.CellTimeout
	}
	if src.MaxDepth != 0 {
		dst.MaxDepth = src.MaxDepth
	}
	if src.MaxRunning != 0 {
		dst.MaxRunning = src.MaxRunning
	}
	if src.IdleTimeout != "" {
		dst.IdleTimeout = src.IdleTimeout
	}
	if src.Sandbox != "" {
		dst.Sandbox = src.Sandbox
	}
	if src.AllowNetwork {
		dst.AllowNetwork = true
	}
	if !src.Worktree.Empty() {
		dst.Worktree = src.Worktree
	}
}
