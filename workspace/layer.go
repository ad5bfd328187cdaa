package workspace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/arborhq/arbor/sandbox"
)

// fileConfig is one configuration file (arbor.json, the user config) as written. A nil field
// is absent and keeps the value of the layer below; a plain field could not tell
// `"allowNetwork": false` or `"maxDepth": 0` from a file that does not mention them.
//
// Settings that run commands or weaken the sandbox take effect from a repository's arbor.json
// only once it is trusted: trust.go's guarded table lists them by JSON path.
type fileConfig struct {
	DefaultModel  *string          `json:"defaultModel"`
	Models        map[string]Model `json:"models"` // each entry replaces the lower one of its name
	KernelPython  *string          `json:"kernelPython"`
	MaxTurnSteps  *int             `json:"maxTurnSteps"`
	OutputBudget  *int             `json:"outputBudget"`
	HarnessBudget *int             `json:"harnessBudget"`
	CellTimeout   *string          `json:"cellTimeout"`
	MaxDepth      *int             `json:"maxDepth"`
	MaxRunning    *int             `json:"maxRunning"`
	IdleTimeout   *string          `json:"idleTimeout"`
	Sandbox       *string          `json:"sandbox"`
	AllowNetwork  *bool            `json:"allowNetwork"`
	Network       *bool            `json:"network"`     // the same as allowNetwork, which it replaces
	SandboxHome   []string         `json:"sandboxHome"` // replaces the lower one as a whole
	KernelEnv     []string         `json:"kernelEnv"`   // replaces the lower one as a whole
	Worktree      *fileWorktree    `json:"worktree"`    // replaces the lower one as a whole
	Harness       *fileHarness     `json:"harness"`
	Refine        *fileRefine      `json:"refine"`
	Compaction    *fileCompaction  `json:"compaction"`
	// Profiles are decoded one by one (decodeProfiles), so an error names the profile.
	Profiles map[string]json.RawMessage `json:"profiles"`

	Goals *fileGoals `json:"goals"`

	Kernels *fileKernels `json:"kernels"`

	Worktrees *fileWorktrees `json:"worktrees"`

	Limits *fileLimits `json:"limits"`

	profiles map[string]*fileProfile
}

type fileGoals struct {
	StallAfter   *int    `json:"stallAfter"`
	Backoff      *string `json:"backoff"`
	MaxBackoff   *string `json:"maxBackoff"`
	CheckTimeout *string `json:"checkTimeout"`
}

func (f *fileGoals) apply(dst *GoalPolicy) error {
	if f == nil {
		return nil
	}
	if f.StallAfter != nil {
		if *f.StallAfter < 1 {
			return fmt.Errorf("goals.stallAfter %d: want 1 or more (turns without a change before a goal ends as stalled)", *f.StallAfter)
		}
		dst.StallAfter = *f.StallAfter
	}
	if err := setDuration(&dst.Backoff, f.Backoff, "goals.backoff", "30s", false); err != nil {
		return err
	}
	if err := setDuration(&dst.MaxBackoff, f.MaxBackoff, "goals.maxBackoff", "30m", false); err != nil {
		return err
	}
	return setDuration(&dst.CheckTimeout, f.CheckTimeout, "goals.checkTimeout", "10m", false)
}

type fileHarness struct {
	Session   *fileScopePolicy `json:"session"`
	Workspace *fileScopePolicy `json:"workspace"`
	Global    *fileScopePolicy `json:"global"`
}

type fileScopePolicy struct {
	Policy *string `json:"policy"`
	// BranchCheck is the documented name of the branch check; Gate, its older name, is read too.
	BranchCheck        *string   `json:"branchCheck"`
	BranchCheckTimeout *string   `json:"branchCheckTimeout"`
	Gate               *string   `json:"gate"`
	GateTimeout        *string   `json:"gateTimeout"`
	Protected          []string  `json:"protected"` // replaces the lower one as a whole
	Eval               *EvalGate `json:"eval"`      // replaces the lower one as a whole
}

type fileRefine struct {
	Model           *string `json:"model"`
	EveryTurns      *int    `json:"everyTurns"`
	AfterCompaction *bool   `json:"afterCompaction"`
	Cooldown        *string `json:"cooldown"`
}

func (f *fileScopePolicy) apply(dst *HarnessPolicy, scope string) error {
	if f == nil {
		return nil
	}
	if f.Policy != nil {
		switch *f.Policy {
		case PolicyApply, PolicyReview:
		default:
			return fmt.Errorf("harness.%s.policy %q: want \"apply\" or \"review\"", scope, *f.Policy)
		}
	}
	set(&dst.Policy, f.Policy)
	check, timeout, timeoutKey := f.BranchCheck, f.BranchCheckTimeout, "branchCheckTimeout"
	switch {
	case f.BranchCheck != nil && f.Gate != nil:
		return fmt.Errorf("harness.%s: both \"branchCheck\" and \"gate\" are set; \"gate\" is the older name of \"branchCheck\", keep one", scope)
	case f.Gate != nil:
		check = f.Gate
	}
	switch {
	case f.BranchCheckTimeout != nil && f.GateTimeout != nil:
		return fmt.Errorf("harness.%s: both \"branchCheckTimeout\" and \"gateTimeout\" are set; keep \"branchCheckTimeout\"", scope)
	case f.GateTimeout != nil:
		timeout, timeoutKey = f.GateTimeout, "gateTimeout"
	}
	set(&dst.Gate, check)
	if err := setDuration(&dst.GateTimeout, timeout, "harness."+scope+"."+timeoutKey, "10m", false); err != nil {
		return err
	}
	if e := f.Eval; e != nil {
		switch {
		case scope == "session":
			return fmt.Errorf("harness.session.eval: an eval gate measures the shared harness; set it on harness.workspace or harness.global")
		case strings.TrimSpace(e.Suite) == "":
			return fmt.Errorf("harness.%s.eval: \"suite\" is empty; name a suite directory or a built-in suite such as \"example\"", scope)
		case e.Split != "" && e.Split != "feedback" && e.Split != "heldout":
			return fmt.Errorf("harness.%s.eval.split %q: want \"heldout\" (the default) or \"feedback\"", scope, e.Split)
		case e.Repeat < 0 || e.Parallel < 0:
			return fmt.Errorf("harness.%s.eval: repeat and parallel must be positive", scope)
		case e.MaxTokenIncrease < 0:
			return fmt.Errorf("harness.%s.eval.maxTokenIncrease %g: want a fraction such as 0.1 (10%%)", scope, e.MaxTokenIncrease)
		case e.MaxSuccessDrop < 0 || e.MaxSuccessDrop >= 1:
			return fmt.Errorf("harness.%s.eval.maxSuccessDrop %g: want a fraction below 1 such as 0.1 (10 points)", scope, e.MaxSuccessDrop)
		}
		dst.Eval = e
	}
	if f.Protected != nil {
		for _, g := range f.Protected {
			if _, err := path.Match(g, ""); err != nil || g == "" || strings.HasPrefix(g, "/") {
				return fmt.Errorf("harness.%s.protected %q: want a glob relative to the repository, such as \"ci/**\"", scope, g)
			}
		}
		dst.Protected = f.Protected
	}
	return nil
}

func (f *fileRefine) apply(dst *RefinePolicy) error {
	if f == nil {
		return nil
	}
	set(&dst.Model, f.Model)
	set(&dst.AfterCompaction, f.AfterCompaction)
	if f.EveryTurns != nil {
		if *f.EveryTurns < 0 {
			return fmt.Errorf("refine.everyTurns %d: want 0 (never) or more", *f.EveryTurns)
		}
		dst.EveryTurns = *f.EveryTurns
	}
	return setDuration(&dst.Cooldown, f.Cooldown, "refine.cooldown", "10m", true)
}

type fileWorktree struct {
	Copy    []string `json:"copy"`
	Link    []string `json:"link"`
	Command string   `json:"command"`
	Timeout *string  `json:"timeout"`
}

// readLayer reads and decodes the file at path; ok is false when there is none. Its errors
// name the file.
func readLayer(path string) (f *fileConfig, ok bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read config %s: %w", path, err)
	}
	f, err = parseLayer(data, path)
	return f, err == nil, err
}

// parseLayer decodes one file's bytes; its errors start with the file's path.
func parseLayer(data []byte, path string) (*fileConfig, error) {
	fc, err := decodeFile(data)
	if err == nil {
		fc.profiles, err = decodeProfiles(fc.Profiles, path)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &fc, nil
}

// decodeFile parses one file strictly: unknown settings and trailing content are errors, and
// a value of the wrong JSON type is named with the type expected.
func decodeFile(data []byte) (fileConfig, error) {
	var f fileConfig
	err := decodeStrict(data, &f)
	return f, err
}

// decodeStrict decodes data into v, refusing unknown keys and trailing content; its errors
// name a value of the wrong type with the type expected, and a syntax error with its line.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.Decode(&struct{}{}) != io.EOF {
		err = errors.New("unexpected content after the settings object")
	}
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return fmt.Errorf("%s: got a JSON %s, want %s", typeErr.Field, typeErr.Value, kindOf(typeErr.Type))
	case errors.As(err, &syntaxErr):
		line := 1 + bytes.Count(data[:min(int(syntaxErr.Offset), len(data))], []byte("\n"))
		return fmt.Errorf("line %d: %w", line, err)
	case errors.Is(err, io.EOF):
		return errors.New("empty file: want a JSON object of settings")
	case err != nil && strings.HasPrefix(err.Error(), "json: unknown field "):
		return fmt.Errorf("unknown setting %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return err
}

func kindOf(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int64:
		return "a whole number"
	case reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "a list"
	default:
		return "an object"
	}
}

func (f fileConfig) apply(cfg *Config, root string) error {
	set(&cfg.DefaultModel, f.DefaultModel)
	set(&cfg.KernelPython, f.KernelPython)
	set(&cfg.AllowNetwork, f.AllowNetwork)
	for name, m := range f.Models {
		if err := checkToolMode(m.ToolMode); err != nil {
			return fmt.Errorf("models.%s.toolMode %w", name, err)
		}
		if cfg.Models == nil {
			cfg.Models = map[string]Model{}
		}
		cfg.Models[name] = m
	}
	if f.Sandbox != nil {
		if err := checkSandbox(*f.Sandbox); err != nil {
			return err
		}
		cfg.Sandbox = sandboxMode(*f.Sandbox)
	}
	if f.Network != nil && f.AllowNetwork != nil && *f.Network != *f.AllowNetwork {
		return fmt.Errorf("network %v and allowNetwork %v disagree: keep only network", *f.Network, *f.AllowNetwork)
	}
	set(&cfg.AllowNetwork, f.Network)
	if f.SandboxHome != nil {
		for _, rel := range f.SandboxHome {
			if err := sandbox.CheckHomeAllow(rel); err != nil {
				return err
			}
		}
		cfg.SandboxHome = f.SandboxHome
	}
	if f.KernelEnv != nil {
		for _, name := range f.KernelEnv {
			if err := checkEnvName(name); err != nil {
				return err
			}
		}
		cfg.KernelEnv = f.KernelEnv
	}
	for _, n := range []struct {
		name     string
		dst, src *int
		min      int
	}{
		{"maxTurnSteps", &cfg.MaxTurnSteps, f.MaxTurnSteps, 1},
		{"outputBudget", &cfg.OutputBudget, f.OutputBudget, 1},
		{"harnessBudget", &cfg.HarnessBudget, f.HarnessBudget, 1},
		{"maxDepth", &cfg.MaxDepth, f.MaxDepth, 0},
		{"maxRunning", &cfg.MaxRunning, f.MaxRunning, 1},
	} {
		if n.src != nil && *n.src < n.min {
			return fmt.Errorf("%s %d: want a whole number of at least %d", n.name, *n.src, n.min)
		}
		set(n.dst, n.src)
	}
	if err := setDuration(&cfg.CellTimeout, f.CellTimeout, "cellTimeout", "10m", false); err != nil {
		return err
	}
	if err := setDuration(&cfg.IdleTimeout, f.IdleTimeout, "idleTimeout", "30m", true); err != nil {
		return err
	}
	if f.Harness != nil {
		for _, sc := range []struct {
			name string
			f    *fileScopePolicy
			dst  *HarnessPolicy
		}{{"session", f.Harness.Session, &cfg.Harness.Session}, {"workspace", f.Harness.Workspace, &cfg.Harness.Workspace}, {"global", f.Harness.Global, &cfg.Harness.Global}} {
			if err := sc.f.apply(sc.dst, sc.name); err != nil {
				return err
			}
		}
	}
	if err := f.Refine.apply(&cfg.Refine); err != nil {
		return err
	}
	if err := f.Compaction.apply(&cfg.Compaction); err != nil {
		return err
	}
	if err := f.Goals.apply(&cfg.Goals); err != nil {
		return err
	}
	if err := f.Kernels.apply(&cfg.Kernels); err != nil {
		return err
	}
	if err := f.Worktrees.apply(&cfg.Worktrees); err != nil {
		return err
	}
	if err := f.Limits.apply(&cfg.Limits); err != nil {
		return err
	}
	if f.Worktree != nil {
		w, err := f.Worktree.resolve(root)
		if err != nil {
			return err
		}
		cfg.Worktree = w
	}
	return nil
}

func (fw fileWorktree) resolve(root string) (WorktreeSetup, error) {
	w := WorktreeSetup{Command: fw.Command}
	for _, list := range []struct {
		name string
		src  []string
		dst  *[]string
	}{{"copy", fw.Copy, &w.Copy}, {"link", fw.Link, &w.Link}} {
		for _, p := range list.src {
			rel, err := repoPath(root, p)
			if err != nil {
				return w, fmt.Errorf("worktree.%s %q: %w", list.name, p, err)
			}
			*list.dst = append(*list.dst, rel)
		}
	}
	if err := setDuration(&w.CommandTimeout, fw.Timeout, "worktree.timeout", "5m", false); err != nil {
		return w, err
	}
	return w, nil
}

// repoPath checks a path arbor.json names in the repository: relative, not the repository
// itself nor its .git, and inside it even through symlinks (they would copy or link what lies
// outside into every session worktree). It returns the path cleaned.
func repoPath(root, p string) (string, error) {
	if filepath.IsAbs(p) {
		return "", errors.New("want a path relative to the repository")
	}
	rel := filepath.Clean(p)
	if rel == "." {
		return "", errors.New("want a path inside the repository, not the repository itself")
	}
	if first, _, _ := strings.Cut(filepath.ToSlash(rel), "/"); first == ".git" {
		return "", errors.New("want a path outside .git")
	}
	if _, err := Confine(root, rel); err != nil {
		return "", err
	}
	return rel, nil
}

// setDuration parses a duration setting once, here, so a bad one fails the load naming it.
func setDuration(dst *time.Duration, src *string, name, example string, zeroOK bool) error {
	if src == nil {
		return nil
	}
	d, err := time.ParseDuration(*src)
	switch {
	case err != nil:
		return fmt.Errorf("%s %q: want a Go duration such as %q", name, *src, example)
	case d < 0 || d == 0 && !zeroOK:
		return fmt.Errorf("%s %q: want a positive Go duration such as %q", name, *src, example)
	}
	*dst = d
	return nil
}

func set[T any](dst *T, src *T) {
	if src != nil {
		*dst = *src
	}
}
