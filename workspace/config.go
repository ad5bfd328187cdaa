// Package workspace finds the repository a directory belongs to, loads Arbor's configuration
// for it, and confines paths to it.
//
// Call [Load] with a directory inside a git repository and the daemon's [Overrides]; the
// result merges, in order of precedence, flags and environment (the overrides), the repo's
// arbor.json, the user config ($XDG_CONFIG_HOME/arbor/config.json) and built-in defaults. A
// setting a file leaves out keeps the value below it; one it sets, even to false or 0, wins.
// Every value is checked and parsed once, at load: a bad one is an error naming the file, the
// setting and what was expected.
//
// A repository is untrusted until its user runs `arbor trust` ([GrantTrust]): the settings of
// its arbor.json that run commands or choose where the session's data or a key goes
// (kernelPython, worktree.command, a weaker sandbox, a kernel gateway, a model entry with a
// baseURL — key or not — and refine.model naming one, a profile's completion gate or
// provider) are not applied before, and [Config.Trust] lists them; whatever starts work in the
// repository calls [Trust.Check] (and [Config.Profile] for a profile's) and refuses with an
// [UntrustedError] that names each setting and the command to run; [Config.ResolveModel]
// refuses a left-out model entry the same way. Trust is recorded per repository with a hash of
// those settings (trust.go), so a change to one asks again.
package workspace

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/arborhq/arbor/sandbox"
)

// Model configures one OpenAI-compatible endpoint. A file's entry replaces a lower layer's
// entry of the same name as a whole.
type Model struct {
	BaseURL       string  `json:"baseURL,omitempty"`
	Model         string  `json:"model,omitempty"`     // id sent to the endpoint; defaults to the entry's name
	APIKeyEnv     string  `json:"apiKeyEnv,omitempty"` // the NAME of the variable holding the key
	ContextWindow int     `json:"contextWindow,omitempty"`
	ToolMode      string  `json:"toolMode,omitempty"` // "tools" or "fenced"
	InputPrice    float64 `json:"inputPrice,omitempty"`
	OutputPrice   float64 `json:"outputPrice,omitempty"`
	// Retry is how calls to the endpoint are retried ("retry": {"maxRetries": 2}).
	Retry RetryPolicy `json:"retry,omitzero"`
}

// Config is Arbor's resolved configuration for one repository. The JSON names of its settings
// are those of the files (see layer.go).
type Config struct {
	DefaultModel string
	Models       map[string]Model
	KernelPython string
	// MaxTurnSteps bounds model calls in one turn.
	MaxTurnSteps int
	// OutputBudget is how many bytes of one tool output reach the model (head + tail).
	OutputBudget int
	// HarnessBudget is how many tokens (4 characters each) the harness block after the base
	// prompt may take; 0 means the default (1,500).
	HarnessBudget int
	// CellTimeout bounds one kernel execution ("cellTimeout": "10m").
	CellTimeout time.Duration
	// MaxDepth bounds the session tree: 2 lets the root and its children spawn, 0 none.
	MaxDepth int
	// MaxRunning caps sessions running at once; the rest wait as admitted.
	MaxRunning int
	// IdleTimeout moves an idle session to inactive (kernel snapshotted and stopped),
	// ("idleTimeout": "30m"); 0 never does.
	IdleTimeout time.Duration
	// Sandbox is how kernels and setup commands are confined: SandboxAuto (bubblewrap where
	// the daemon's probe found it works, else unsandboxed with a warning), SandboxBwrap
	// (required: a kernel fails to start without it) or SandboxOff.
	Sandbox string
	// AllowNetwork ("network") gives sandboxed code the host's network; off, it has only a
	// loopback of its own.
	AllowNetwork bool
	// SandboxHome lists paths relative to $HOME that sandboxed code may read; the rest of
	// $HOME, and ~/.ssh always, is invisible.
	SandboxHome []string
	// KernelEnv names variables kernels inherit beyond the built-in allowlist
	// (sandbox.AllowedEnv). A model's apiKeyEnv is never passed, even when named here.
	KernelEnv []string
	// Worktree prepares each new session worktree with what a checkout lacks.
	Worktree WorktreeSetup
	// Harness says, per harness scope, how proposed changes apply ("harness").
	Harness HarnessPolicies
	// Refine configures /refine: its model and when it runs by itself ("refine").
	Refine RefinePolicy
	// Compaction says when a session's context is compacted ("compaction").
	Compaction CompactionPolicy
	// Profiles are the named run settings of "profiles" (profile.go), resolved over the rest
	// of this configuration; [Config.Profile] returns one.
	Profiles map[string]Profile
	// ActiveProfile is the profile [Config.WithProfile] applied; nil is none.
	ActiveProfile *Profile
	// Goals configures how goals keep a session working ("goals").
	Goals GoalPolicy
	// Kernels says where the sessions' kernels run ("kernels", kernels.go).
	Kernels Kernels
	// Worktrees bounds the session worktrees kept on disk ("worktrees", worktrees.go).
	Worktrees Worktrees
	// Limits is the process and memory budget of each kernel and setup command ("limits":
	// {"processes": 1024, "memory": "50%"}, limits.go); zero fields are the defaults.
	Limits sandbox.Limits
	// Trust says which guarded settings the repository's arbor.json sets and whether they
	// are trusted. Untrusted ones were not applied: what starts work in the repository
	// calls Trust.Check first, so the user learns why instead of getting another config.
	Trust Trust
}

// WorktreeSetup lists untracked paths of the main worktree (.env, node_modules, build caches)
// to copy or symlink into each new session worktree, and a command to run there after. The
// paths are relative to the repository and were checked at load to stay inside it.
type WorktreeSetup struct {
	Copy    []string
	Link    []string
	Command string
	// CommandTimeout bounds Command ("timeout": "5m"); 0 means the default of 10 minutes.
	CommandTimeout time.Duration
}

// HarnessPolicies is the policy of each harness scope.
type HarnessPolicies struct {
	Session, Workspace, Global HarnessPolicy
}

// For returns the policy of a scope ("session", "workspace" or "global").
func (h HarnessPolicies) For(scope string) HarnessPolicy {
	switch scope {
	case "session":
		return h.Session
	case "global":
		return h.Global
	}
	return h.Workspace
}

// The harness policies.
const (
	PolicyApply  = "apply"  // a proposal applies once it passes the scope's gate
	PolicyReview = "review" // a proposal waits for the user
)

// HarnessPolicy is how changes to one scope of the harness apply.
type HarnessPolicy struct {
	// Policy is PolicyApply or PolicyReview.
	Policy string
	// Gate is the branch check ("branchCheck", older name "gate"): a command run in the sandbox
	// on a clean checkout of the proposing session's branch with the protected paths as they are
	// at the session's base; a proposal from a red branch is rejected. It says nothing of the
	// edit itself (that is Eval's to measure); "" is none.
	Gate string
	// GateTimeout bounds Gate; 0 means the default of 10 minutes.
	GateTimeout time.Duration
	// Protected lists path globs (beyond the built-in test and verifier patterns) the branch
	// check restores from the session's base and the advice names.
	Protected []string
	// Eval, when set, is an eval slice a proposal must not do worse on before it applies.
	Eval *EvalGate
}

// EvalGate is the eval that judges a harness proposal by its effect: the slice is run with the
// scope as it is and as the proposal would make it, Repeat times each, and the comparison's
// noise decides (agents/eval.Decide): the proposal applies when a drop in success of more than
// MaxSuccessDrop is ruled out and tokens stay within MaxTokenIncrease, is refused when a drop
// or a rise past the bound is measured, and otherwise waits for a person with the measurement.
type EvalGate struct {
	Suite    string   `json:"suite"`              // a suite directory (relative to the repository) or a built-in suite
	Split    string   `json:"split,omitempty"`    // "" = heldout
	Tags     []string `json:"tags,omitempty"`     // the slice: tasks with all these tags
	Repeat   int      `json:"repeat,omitempty"`   // runs per task of each side; 0 = 3
	Parallel int      `json:"parallel,omitempty"` // tasks at a time; 0 = 1
	// Model is the configured model the tasks run on; "" is the proposing session's. A suite's
	// scripted model plays it only where the suite says it is a test of Arbor ("test": true).
	Model string `json:"model,omitempty"`
	// MaxTokenIncrease is the rise in tokens per task allowed, as a fraction (0.1 = 10%);
	// 0 = 0.1.
	MaxTokenIncrease float64 `json:"maxTokenIncrease,omitempty"`
	// MaxSuccessDrop is the drop in mean success an applying proposal must rule out at 95%, as
	// a fraction (0.1 = 10 points); 0 = 0.1.
	MaxSuccessDrop float64 `json:"maxSuccessDrop,omitempty"`
}

// RefinePolicy configures /refine.
type RefinePolicy struct {
	// Model is the configured model refine calls; "" is the session's.
	Model string
	// EveryTurns runs refine by itself after every N-th turn; 0 never.
	EveryTurns int
	// AfterCompaction runs refine by itself after a compaction.
	AfterCompaction bool
	// Cooldown is the least time between two runs refine starts by itself.
	Cooldown time.Duration
}

// GoalPolicy configures goals and autonomous runs.
type GoalPolicy struct {
	// StallAfter ends a goal as stalled after this many turns in a row that changed nothing
	// (no file, no message, no new child).
	StallAfter int
	// Backoff is the wait before the continuation after the first turn that changed nothing;
	// it doubles with each further one, up to MaxBackoff.
	Backoff, MaxBackoff time.Duration
	// CheckTimeout bounds an end-condition command that does not set its own.
	CheckTimeout time.Duration
}

// Empty reports whether there is nothing to set up.
func (w WorktreeSetup) Empty() bool { return len(w.Copy) == 0 && len(w.Link) == 0 && w.Command == "" }

// Overrides come from the daemon's flags and environment and beat every file.
type Overrides struct {
	ModelBaseURL string // ARBOR_MODEL_BASE_URL
	Model        string // ARBOR_MODEL
	APIKeyEnv    string // ARBOR_API_KEY_ENV
	KernelPython string // ARBOR_KERNEL_PYTHON
	// UserConfig is the user's config file; "" is [UserConfigPath]. (Tests give each
	// service its own.)
	UserConfig string
}

// OverridesFromEnv reads the ARBOR_* variables of DESIGN's configuration table. Flags, set on
// the result, beat them.
func OverridesFromEnv() Overrides {
	return Overrides{
		ModelBaseURL: os.Getenv("ARBOR_MODEL_BASE_URL"),
		Model:        os.Getenv("ARBOR_MODEL"),
		APIKeyEnv:    os.Getenv("ARBOR_API_KEY_ENV"),
		KernelPython: os.Getenv("ARBOR_KERNEL_PYTHON"),
	}
}

// The sandbox modes.
const (
	SandboxAuto  = "auto"
	SandboxBwrap = "bwrap"
	SandboxOff   = "off"
)

func checkSandbox(mode string) error {
	switch mode {
	case "", SandboxAuto, SandboxBwrap, SandboxOff:
		return nil
	}
	return fmt.Errorf("sandbox %q: want \"auto\" (the default), \"bwrap\" or \"off\"", mode)
}

// sandboxMode maps the old spelling of auto, "", to it.
func sandboxMode(mode string) string {
	if mode == "" {
		return SandboxAuto
	}
	return mode
}

func checkEnvName(name string) error {
	if name == "" || strings.ContainsAny(name, "=\x00") {
		return fmt.Errorf("kernelEnv %q: want a variable name", name)
	}
	if strings.HasPrefix(name, "ARBOR_") {
		return fmt.Errorf("kernelEnv %q: Arbor's own settings are never passed to kernels", name)
	}
	return nil
}

// KeyEnvs lists the variables the configured models read their API keys from: never passed to
// model-written code.
func (c Config) KeyEnvs() []string {
	var names []string
	for _, m := range c.Models {
		if m.APIKeyEnv != "" {
			names = append(names, m.APIKeyEnv)
		}
	}
	if g := c.Kernels.Gateway; g != nil && g.TokenEnv != "" {
		names = append(names, g.TokenEnv)
	}
	sort.Strings(names)
	return names
}

// Defaults are the built-in values under every layer.
func Defaults() Config {
	return Config{
		Sandbox:      SandboxAuto,
		MaxTurnSteps: 40,
		OutputBudget: 8 << 10,
		CellTimeout:  10 * time.Minute,
		MaxDepth:     2,
		MaxRunning:   8,
		IdleTimeout:  30 * time.Minute,
		Harness: HarnessPolicies{
			Session:   HarnessPolicy{Policy: PolicyApply},
			Workspace: HarnessPolicy{Policy: PolicyReview},
			Global:    HarnessPolicy{Policy: PolicyReview},
		},
		Refine:     RefinePolicy{Cooldown: 10 * time.Minute},
		Compaction: CompactionPolicy{Threshold: 0.7, Keep: 6},
		Goals:      GoalPolicy{StallAfter: 3, Backoff: 30 * time.Second, MaxBackoff: 30 * time.Minute, CheckTimeout: 10 * time.Minute},
	}
}

// ErrNoModel means no model is configured; its message says how to configure one.
var ErrNoModel = errors.New("no model configured: set ARBOR_MODEL_BASE_URL and ARBOR_MODEL " +
	"(and ARBOR_API_KEY_ENV, the name of the variable holding the key), or add \"models\" and " +
	"\"defaultModel\" to arbor.json; `arbor demo` runs on the built-in scripted model")

// Load merges the configuration for the repository whose top level is root. The
// repository's guarded settings (see [Trust]) are applied only when trusted; Config.Trust
// says which there are.
func Load(root string, ov Overrides) (Config, error) {
	cfg := Defaults()
	var userProfiles, repoProfiles, unchecked map[string]*fileProfile
	if p := cmp.Or(ov.UserConfig, UserConfigPath()); p != "" {
		f, ok, err := readLayer(p)
		if err != nil {
			return cfg, err
		}
		if ok {
			if err := f.apply(&cfg, root); err != nil {
				return cfg, fmt.Errorf("%s: %w", p, err)
			}
			userProfiles = f.profiles
		}
	}
	file := filepath.Join(root, "arbor.json")
	cfg.Trust = Trust{Repo: realPath(root), File: file, Trusted: true}
	f, ok, err := readLayer(file)
	if err != nil {
		return cfg, err
	}
	if ok {
		// Every value is checked, guarded or not, trusted or not: a bad one fails the load.
		scratch := cfg
		scratch.Models = maps.Clone(cfg.Models)
		if err := f.apply(&scratch, root); err != nil {
			return cfg, fmt.Errorf("%s: %w", file, err)
		}
		if cfg.Trust, err = f.guard(root, file, ov); err != nil {
			return cfg, err
		}
		if cfg.Trust.Trusted {
			scratch.Trust = cfg.Trust
			cfg = scratch
		} else {
			unchecked = maps.Clone(f.profiles) // stripping replaces the entries, not these
			f.stripGuarded(ov)
			if err := f.apply(&cfg, root); err != nil {
				return cfg, fmt.Errorf("%s: %w", file, err)
			}
		}
		repoProfiles = f.profiles
	}
	ov.apply(&cfg)
	if _, err := resolveProfiles(cfg, unchecked); err != nil {
		return cfg, err
	}
	if cfg.Profiles, err = resolveProfiles(cfg, repoProfiles, userProfiles); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// modelTarget names the model entry the overrides edit, if they edit one.
func (ov Overrides) modelTarget() (string, bool) {
	if ov.ModelBaseURL == "" && ov.Model == "" {
		return "", false
	}
	if ov.Model == "" {
		return "default", true
	}
	return ov.Model, true
}

func (ov Overrides) apply(cfg *Config) {
	if name, ok := ov.modelTarget(); ok {
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
}

// Validate checks the invariants every layer's values were checked against at load, for a
// Config built another way.
func (c Config) Validate() error {
	for _, n := range []struct {
		name string
		v    int
		min  int
	}{{"maxTurnSteps", c.MaxTurnSteps, 1}, {"outputBudget", c.OutputBudget, 1}, {"maxDepth", c.MaxDepth, 0}, {"maxRunning", c.MaxRunning, 1}} {
		if n.v < n.min {
			return fmt.Errorf("config: %s %d: want at least %d", n.name, n.v, n.min)
		}
	}
	if c.CellTimeout <= 0 {
		return fmt.Errorf("config: cellTimeout %v: want a positive duration", c.CellTimeout)
	}
	if c.IdleTimeout < 0 || c.Worktree.CommandTimeout < 0 {
		return errors.New("config: idleTimeout and worktree.timeout cannot be negative")
	}
	if err := checkSandbox(c.Sandbox); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	for name, m := range c.Models {
		if err := checkToolMode(m.ToolMode); err != nil {
			return fmt.Errorf("config: models.%s.toolMode %w", name, err)
		}
	}
	return nil
}

func checkToolMode(mode string) error {
	if mode != "" && mode != "tools" && mode != "fenced" {
		return fmt.Errorf("%q: want \"tools\" or \"fenced\"", mode)
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
	if !ok && c.untrustedModel(name) {
		// The repository's own entry, left out until trusted: say so, not "unknown".
		return "", Model{}, fmt.Errorf("model %q: %w", name, &UntrustedError{Trust: c.Trust})
	}
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

// untrustedModel reports whether name is a model entry of the repository left out because it
// is not trusted.
func (c Config) untrustedModel(name string) bool {
	return !c.Trust.Trusted && slices.ContainsFunc(c.Trust.Settings, func(s Setting) bool { return s.Name == "models."+name })
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

// Durations returns CellTimeout and IdleTimeout.
func (c Config) Durations() (cell, idle time.Duration) { return c.CellTimeout, c.IdleTimeout }
