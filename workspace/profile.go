package workspace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"sort"
	"strings"
	"time"
)

// A profile is a named bundle of run settings — model and provider, tool mode, compaction,
// refine and retry policy, step and cell limits, a completion gate and resource limits — that
// a run picks by name (`arbor run --profile NAME`), so an evaluation runs the same way every
// time and its session records what it ran with.
//
// Profiles are defined under "profiles" in arbor.json and in the user config. A profile is
// whole: a name the user config defines replaces the repository's profile of that name (the
// other way round from the other settings), so a cloned repository can never redefine a
// profile the user relies on, and the user can adapt a repository's profile to their machine.
// What a profile leaves out is the configuration's value, resolved at load: [Config.Profile]
// returns every setting the run will have.
//
// A repository's profile may run a command (its completion gate, "until") and route a key
// (its "provider"): those are guarded settings (see trust.go). They do not stop sessions that
// use no profile; a profile that sets them is refused, with the command to run, until the
// repository is trusted.

// Profile is a resolved profile: each setting as the run will have it.
type Profile struct {
	Name   string
	Source string // the file that defines it
	// Model is the configured model the run's sessions use unless one is named; "" is the
	// configuration's default.
	Model string
	// Provider, when the profile sets one, is the model entry Model names as the profile
	// changes it: the configured entry (if any) with the provider's settings laid over it.
	Provider *Model
	// ToolMode, when set, is the tool mode of every model the run calls.
	ToolMode     string
	Compaction   CompactionPolicy
	Refine       RefinePolicy
	Retry        RetryPolicy // of every model the run calls
	MaxTurnSteps int
	CellTimeout  time.Duration
	// Until is the completion gate: a command run in the session's worktree after each turn
	// of an autonomous run; it passing ends the run. "" is none.
	Until string
	// CheckTimeout bounds one run of Until; 0 is the run's default.
	CheckTimeout time.Duration
	// The resource limits of an autonomous run; 0 is none.
	MaxTurns  int
	MaxTokens int64
	MaxWall   time.Duration
	MaxCost   float64 // USD

	// untrusted lists the profile's guarded settings that were not applied: the repository is
	// not trusted with them.
	untrusted []Setting
}

// Untrusted lists the guarded settings of the profile that the repository is not trusted
// with; [Config.Profile] refuses such a profile.
func (p Profile) Untrusted() []Setting { return p.untrusted }

// CompactionPolicy says when compaction shrinks a session's context ("compaction").
type CompactionPolicy struct {
	// Threshold compacts once the next request's estimate passes this share of the model's
	// context window (0.7 by default). A compaction leaves at most 4/7 of it (0.4 of the
	// window by default), so compactions are at least 3/7 of it apart.
	Threshold float64
	// Keep is how many of the latest messages stay verbatim at most (6 by default): fewer
	// when they do not fit what a compaction leaves, never fewer than the latest exchange.
	Keep int
}

// RetryPolicy is how a model client retries a failed call (429, 5xx, timeouts, a cut stream),
// as a model entry's or a profile's "retry".
type RetryPolicy struct {
	// MaxRetries is the retries after the first attempt; nil is the client's default (4),
	// 0 none.
	MaxRetries *int
	// Backoff is the delay before the first retry, doubled per retry with jitter; 0 is the
	// client's default (500ms).
	Backoff time.Duration
	// Timeout bounds one attempt, the whole stream included; 0 is the client's default (5m).
	Timeout time.Duration
}

type retryJSON struct {
	MaxRetries *int    `json:"maxRetries,omitempty"`
	Backoff    *string `json:"backoff,omitempty"`
	Timeout    *string `json:"timeout,omitempty"`
}

// MarshalJSON writes the policy as a file sets it, durations as Go durations.
func (r RetryPolicy) MarshalJSON() ([]byte, error) {
	var j retryJSON
	j.MaxRetries = r.MaxRetries
	if r.Backoff != 0 {
		j.Backoff = ptr(r.Backoff.String())
	}
	if r.Timeout != 0 {
		j.Timeout = ptr(r.Timeout.String())
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads "retry": {"maxRetries": 2, "backoff": "1s", "timeout": "5m"}; an unknown
// key or a bad value is an error naming it.
func (r *RetryPolicy) UnmarshalJSON(data []byte) error {
	var j retryJSON
	if err := decodeStrict(data, &j); err != nil {
		return fmt.Errorf("retry: %w", err)
	}
	return j.apply(r)
}

func (j retryJSON) apply(r *RetryPolicy) error {
	if j.MaxRetries != nil {
		if *j.MaxRetries < 0 {
			return fmt.Errorf("retry.maxRetries %d: want 0 (none) or more", *j.MaxRetries)
		}
		r.MaxRetries = ptr(*j.MaxRetries)
	}
	if err := setDuration(&r.Backoff, j.Backoff, "retry.backoff", "500ms", false); err != nil {
		return err
	}
	return setDuration(&r.Timeout, j.Timeout, "retry.timeout", "5m", false)
}

// fileProfile is one profile as a file writes it.
type fileProfile struct {
	Model        *string         `json:"model"`
	Provider     *Model          `json:"provider"`
	ToolMode     *string         `json:"toolMode"`
	Compaction   *fileCompaction `json:"compaction"`
	Refine       *fileRefine     `json:"refine"`
	Retry        *retryJSON      `json:"retry"`
	MaxTurnSteps *int            `json:"maxTurnSteps"`
	CellTimeout  *string         `json:"cellTimeout"`
	Until        *string         `json:"until"`
	CheckTimeout *string         `json:"checkTimeout"`
	MaxTurns     *int            `json:"maxTurns"`
	MaxTokens    *int64          `json:"maxTokens"`
	MaxWall      *string         `json:"maxWall"`
	MaxCost      *float64        `json:"maxCost"`

	source    string
	untrusted []Setting // guarded settings stripped from it
}

type fileCompaction struct {
	Threshold *float64 `json:"threshold"`
	Keep      *int     `json:"keep"`
}

func (f *fileCompaction) apply(dst *CompactionPolicy) error {
	if f == nil {
		return nil
	}
	if f.Threshold != nil && (*f.Threshold <= 0 || *f.Threshold >= 1) {
		return fmt.Errorf("compaction.threshold %v: want a share of the context window between 0 and 1, such as 0.7", *f.Threshold)
	}
	if f.Keep != nil && *f.Keep < 1 {
		return fmt.Errorf("compaction.keep %d: want at least 1 message kept verbatim", *f.Keep)
	}
	set(&dst.Threshold, f.Threshold)
	set(&dst.Keep, f.Keep)
	return nil
}

var profileName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// profileKeys lists what a profile may set, for the error about one that is not.
const profileKeys = "model, provider, toolMode, compaction, refine, retry, maxTurnSteps, cellTimeout, until, checkTimeout, maxTurns, maxTokens, maxWall, maxCost"

// decodeProfiles parses a file's "profiles" strictly; each error names the profile.
func decodeProfiles(raw map[string]json.RawMessage, source string) (map[string]*fileProfile, error) {
	if raw == nil {
		return nil, nil
	}
	out := make(map[string]*fileProfile, len(raw))
	for _, name := range sortedKeys(raw) {
		if !profileName.MatchString(name) {
			return nil, fmt.Errorf("profiles %q: want a name of letters, digits, '.', '_' and '-' (at most 64)", name)
		}
		data := bytes.TrimSpace(raw[name])
		if len(data) == 0 || data[0] != '{' {
			return nil, fmt.Errorf("profiles.%s: want an object of settings (%s)", name, profileKeys)
		}
		fp := &fileProfile{source: source}
		if err := decodeStrict(data, fp); err != nil {
			if strings.HasPrefix(err.Error(), "unknown setting ") {
				return nil, fmt.Errorf("profiles.%s: %w; a profile sets %s", name, err, profileKeys)
			}
			return nil, fmt.Errorf("profiles.%s: %w", name, err)
		}
		out[name] = fp
	}
	return out, nil
}

// resolve lays the profile over base, the configuration it applies to, checking each value;
// errors name the profile and the setting.
func (fp *fileProfile) resolve(name string, base Config) (Profile, error) {
	p := Profile{
		Name: name, Source: fp.source, Model: base.defaultModelName(),
		Compaction: base.Compaction, Refine: base.Refine,
		MaxTurnSteps: base.MaxTurnSteps, CellTimeout: base.CellTimeout,
		untrusted: fp.untrusted,
	}
	wrap := func(err error) (Profile, error) { return Profile{}, fmt.Errorf("profiles.%s.%w", name, err) }
	set(&p.Model, fp.Model)
	if fp.Provider != nil {
		if p.Model == "" {
			p.Model = name
		}
		if err := checkToolMode(fp.Provider.ToolMode); err != nil {
			return wrap(fmt.Errorf("provider.toolMode %w", err))
		}
		m := overlayModel(base.Models[p.Model], *fp.Provider)
		p.Provider = &m
	}
	// A repository's own entry left out until trusted is no error here: using the profile is
	// refused for it (ResolveModel).
	if _, ok := base.Models[p.Model]; p.Model != "" && !ok && p.Provider == nil && !base.untrustedModel(p.Model) {
		return wrap(fmt.Errorf("model %q: unknown model; configured models are %s", p.Model, base.modelNames()))
	}
	if fp.ToolMode != nil {
		if err := checkToolMode(*fp.ToolMode); err != nil {
			return wrap(fmt.Errorf("toolMode %w", err))
		}
		p.ToolMode = *fp.ToolMode
	}
	if fp.Retry != nil {
		if err := fp.Retry.apply(&p.Retry); err != nil {
			return wrap(err)
		}
	}
	if err := fp.Compaction.apply(&p.Compaction); err != nil {
		return wrap(err)
	}
	if err := fp.Refine.apply(&p.Refine); err != nil {
		return wrap(err)
	}
	for _, n := range []struct {
		key string
		dst *int
		src *int
	}{{"maxTurnSteps", &p.MaxTurnSteps, fp.MaxTurnSteps}, {"maxTurns", &p.MaxTurns, fp.MaxTurns}} {
		if n.src != nil && *n.src < 1 {
			return wrap(fmt.Errorf("%s %d: want a whole number of at least 1", n.key, *n.src))
		}
		set(n.dst, n.src)
	}
	if fp.MaxTokens != nil && *fp.MaxTokens < 1 {
		return wrap(fmt.Errorf("maxTokens %d: want a whole number of at least 1", *fp.MaxTokens))
	}
	set(&p.MaxTokens, fp.MaxTokens)
	if fp.MaxCost != nil && !(*fp.MaxCost > 0) {
		return wrap(fmt.Errorf("maxCost %v: want a positive amount of US dollars, such as 5", *fp.MaxCost))
	}
	set(&p.MaxCost, fp.MaxCost)
	if fp.Until != nil && strings.TrimSpace(*fp.Until) == "" {
		return wrap(fmt.Errorf("until %q: want a shell command, such as \"make test\"", *fp.Until))
	}
	set(&p.Until, fp.Until)
	for _, d := range []struct {
		key, example string
		dst          *time.Duration
		src          *string
	}{{"cellTimeout", "10m", &p.CellTimeout, fp.CellTimeout}, {"checkTimeout", "10m", &p.CheckTimeout, fp.CheckTimeout}, {"maxWall", "2h", &p.MaxWall, fp.MaxWall}} {
		if err := setDuration(d.dst, d.src, d.key, d.example, false); err != nil {
			return wrap(err)
		}
	}
	return p, nil
}

// overlayModel lays the settings over sets onto m.
func overlayModel(m, over Model) Model {
	for _, f := range []struct {
		dst *string
		src string
	}{{&m.BaseURL, over.BaseURL}, {&m.Model, over.Model}, {&m.APIKeyEnv, over.APIKeyEnv}, {&m.ToolMode, over.ToolMode}} {
		if f.src != "" {
			*f.dst = f.src
		}
	}
	if over.ContextWindow != 0 {
		m.ContextWindow = over.ContextWindow
	}
	if over.InputPrice != 0 {
		m.InputPrice = over.InputPrice
	}
	if over.OutputPrice != 0 {
		m.OutputPrice = over.OutputPrice
	}
	if over.Retry != (RetryPolicy{}) {
		m.Retry = over.Retry
	}
	return m
}

// defaultModelName is the model a session uses when none is named: the default, or the only
// configured one.
func (c Config) defaultModelName() string {
	if c.DefaultModel != "" || len(c.Models) != 1 {
		return c.DefaultModel
	}
	for n := range c.Models {
		return n
	}
	return ""
}

// profileGuards lists the guarded settings of a repository's profiles: the completion gate
// runs a command, and a provider decides where the conversation and a key go.
func profileGuards(profiles map[string]*fileProfile) []Setting {
	var out []Setting
	for _, name := range sortedKeys(profiles) {
		out = append(out, profiles[name].guards(name)...)
	}
	return out
}

func (fp *fileProfile) guards(name string) []Setting {
	var out []Setting
	if fp.Until != nil && *fp.Until != "" {
		out = append(out, Setting{Name: "profiles." + name + ".until", Value: asciiJSON(*fp.Until),
			Why: "runs on your machine after each turn of a run with this profile, to judge whether it is done"})
	}
	if pv := fp.Provider; pv != nil && (pv.BaseURL != "" || pv.APIKeyEnv != "") {
		why := "sends the conversation of a run with this profile to this URL"
		switch {
		case pv.BaseURL == "":
			why = fmt.Sprintf("sends the value of $%s to the URL of the model it changes", pv.APIKeyEnv)
		case pv.APIKeyEnv != "":
			why = fmt.Sprintf("sends the conversation of a run with this profile, and the value of $%s, to this URL", pv.APIKeyEnv)
		}
		val := asciiJSON(struct {
			BaseURL   string `json:"baseURL,omitempty"`
			APIKeyEnv string `json:"apiKeyEnv,omitempty"`
		}{pv.BaseURL, pv.APIKeyEnv})
		out = append(out, Setting{Name: "profiles." + name + ".provider", Value: val, Why: why})
	}
	return out
}

// stripGuarded unsets the guarded settings of an untrusted repository's profile, keeping
// which they were so that asking for the profile says why it is refused.
func (fp *fileProfile) stripGuarded(name string) {
	fp.untrusted = fp.guards(name)
	if len(fp.untrusted) == 0 {
		return
	}
	fp.Until = nil
	if fp.Provider != nil {
		pv := *fp.Provider
		pv.BaseURL, pv.APIKeyEnv = "", ""
		fp.Provider = &pv
	}
}

// isProfileSetting reports whether a guarded setting belongs to a profile: it matters only to
// a run with that profile.
func isProfileSetting(s Setting) bool { return strings.HasPrefix(s.Name, "profiles.") }

// resolveProfiles resolves the user config's and the repository's profiles over cfg; the
// user's replace the repository's of the same name.
func resolveProfiles(cfg Config, layers ...map[string]*fileProfile) (map[string]Profile, error) {
	merged := map[string]*fileProfile{}
	for _, l := range layers {
		maps.Copy(merged, l)
	}
	if len(merged) == 0 {
		return nil, nil
	}
	out := make(map[string]Profile, len(merged))
	for _, name := range sortedKeys(merged) {
		p, err := merged[name].resolve(name, cfg)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", merged[name].source, err)
		}
		out[name] = p
	}
	return out, nil
}

// Profile returns the named profile. An unknown name is an error listing the defined ones; a
// profile of the repository whose guarded settings are not trusted is an *UntrustedError
// naming them.
func (c Config) Profile(name string) (Profile, error) {
	p, ok := c.Profiles[name]
	if !ok {
		return Profile{}, fmt.Errorf("unknown profile %q: %s", name, c.profileNames())
	}
	if len(p.untrusted) > 0 {
		t := c.Trust
		t.Settings = p.untrusted
		return Profile{}, fmt.Errorf("profile %s: %w", name, &UntrustedError{Trust: t})
	}
	return p, nil
}

func (c Config) profileNames() string {
	if len(c.Profiles) == 0 {
		return `no profiles are defined (add "profiles" to arbor.json or the user config)`
	}
	return "the defined profiles are " + strings.Join(sortedKeys(c.Profiles), ", ")
}

// ProfileNames lists the defined profiles, sorted.
func (c Config) ProfileNames() []string { return sortedKeys(c.Profiles) }

// WithProfile returns c running with p: its model as the default (and its provider as that
// model's entry), its tool mode and retry policy on every model, and its compaction, refine,
// step and cell settings. The completion gate and the resource limits are the caller's to
// enforce; ActiveProfile carries them.
func (c Config) WithProfile(p Profile) Config {
	c.Models = maps.Clone(c.Models)
	if p.Provider != nil {
		if c.Models == nil {
			c.Models = map[string]Model{}
		}
		c.Models[p.Model] = *p.Provider
	}
	if p.Model != "" {
		c.DefaultModel = p.Model
	}
	for n, m := range c.Models {
		if p.ToolMode != "" {
			m.ToolMode = p.ToolMode
		}
		if p.Retry != (RetryPolicy{}) {
			m.Retry = p.Retry
		}
		c.Models[n] = m
	}
	// A profile read back from an older record may lack a setting: the configuration's stays.
	if p.Compaction.Threshold > 0 {
		c.Compaction.Threshold = p.Compaction.Threshold
	}
	if p.Compaction.Keep > 0 {
		c.Compaction.Keep = p.Compaction.Keep
	}
	if p.MaxTurnSteps > 0 {
		c.MaxTurnSteps = p.MaxTurnSteps
	}
	if p.CellTimeout > 0 {
		c.CellTimeout = p.CellTimeout
	}
	c.Refine = p.Refine
	c.ActiveProfile = &p
	return c
}

// Recorded returns a profile a session recorded, as it may apply again now (after a restart):
// as recorded, except that the guarded settings of a repository's profile stay only while
// the repository still trusts them with the same values. The error, when not nil, says what
// was left out and why; the profile returned is usable either way.
func (c Config) Recorded(p Profile) (Profile, error) {
	if p.Source != c.Trust.File || len((&fileProfile{Until: nonEmpty(p.Until), Provider: p.Provider}).guards(p.Name)) == 0 {
		return p, nil
	}
	cur, err := c.Profile(p.Name)
	if err == nil && cur.Until == p.Until && sameRoute(cur.Provider, p.Provider) {
		return p, nil
	}
	if err == nil {
		err = fmt.Errorf("profile %s: its command or provider changed in %s since the session started", p.Name, c.Trust.File)
	}
	p.Until = ""
	if p.Provider != nil {
		pv := *p.Provider
		if cur.Provider != nil {
			pv.BaseURL, pv.APIKeyEnv = cur.Provider.BaseURL, cur.Provider.APIKeyEnv
		} else {
			pv.BaseURL, pv.APIKeyEnv = c.Models[p.Model].BaseURL, c.Models[p.Model].APIKeyEnv
		}
		p.Provider = &pv
	}
	return p, fmt.Errorf("%w; the session goes on without the profile's completion gate and provider", err)
}

func sameRoute(a, b *Model) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.BaseURL == b.BaseURL && a.APIKeyEnv == b.APIKeyEnv
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// profileJSON is a resolved profile as recorded and shown: the keys of the file, durations
// as Go durations.
type profileJSON struct {
	Name         string         `json:"name"`
	Source       string         `json:"source,omitempty"`
	Model        string         `json:"model,omitempty"`
	Provider     *Model         `json:"provider,omitempty"`
	ToolMode     string         `json:"toolMode,omitempty"`
	Compaction   compactionJSON `json:"compaction"`
	Refine       refineJSON     `json:"refine"`
	Retry        RetryPolicy    `json:"retry"`
	MaxTurnSteps int            `json:"maxTurnSteps,omitempty"`
	CellTimeout  string         `json:"cellTimeout,omitempty"`
	Until        string         `json:"until,omitempty"`
	CheckTimeout string         `json:"checkTimeout,omitempty"`
	MaxTurns     int            `json:"maxTurns,omitempty"`
	MaxTokens    int64          `json:"maxTokens,omitempty"`
	MaxWall      string         `json:"maxWall,omitempty"`
	MaxCost      float64        `json:"maxCost,omitempty"`
}

type compactionJSON struct {
	Threshold float64 `json:"threshold,omitempty"`
	Keep      int     `json:"keep,omitempty"`
}

type refineJSON struct {
	Model           string `json:"model,omitempty"`
	EveryTurns      int    `json:"everyTurns,omitempty"`
	AfterCompaction bool   `json:"afterCompaction,omitempty"`
	Cooldown        string `json:"cooldown,omitempty"`
}

func durationJSON(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// MarshalJSON writes the profile with every setting it runs with, as a file would set it.
func (p Profile) MarshalJSON() ([]byte, error) {
	return json.Marshal(profileJSON{
		Name: p.Name, Source: p.Source, Model: p.Model, Provider: p.Provider, ToolMode: p.ToolMode,
		Compaction: compactionJSON{p.Compaction.Threshold, p.Compaction.Keep},
		Refine:     refineJSON{p.Refine.Model, p.Refine.EveryTurns, p.Refine.AfterCompaction, durationJSON(p.Refine.Cooldown)},
		Retry:      p.Retry, MaxTurnSteps: p.MaxTurnSteps, CellTimeout: durationJSON(p.CellTimeout),
		Until: p.Until, CheckTimeout: durationJSON(p.CheckTimeout),
		MaxTurns: p.MaxTurns, MaxTokens: p.MaxTokens, MaxWall: durationJSON(p.MaxWall), MaxCost: p.MaxCost,
	})
}

// UnmarshalJSON reads what MarshalJSON wrote (a session's record of its profile).
func (p *Profile) UnmarshalJSON(data []byte) error {
	var j profileJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return fmt.Errorf("profile record: %w", err)
	}
	out := Profile{
		Name: j.Name, Source: j.Source, Model: j.Model, Provider: j.Provider, ToolMode: j.ToolMode,
		Compaction: CompactionPolicy{j.Compaction.Threshold, j.Compaction.Keep},
		Refine:     RefinePolicy{Model: j.Refine.Model, EveryTurns: j.Refine.EveryTurns, AfterCompaction: j.Refine.AfterCompaction},
		Retry:      j.Retry, MaxTurnSteps: j.MaxTurnSteps, Until: j.Until,
		MaxTurns: j.MaxTurns, MaxTokens: j.MaxTokens, MaxCost: j.MaxCost,
	}
	for _, d := range []struct {
		key string
		dst *time.Duration
		src string
	}{{"refine.cooldown", &out.Refine.Cooldown, j.Refine.Cooldown}, {"cellTimeout", &out.CellTimeout, j.CellTimeout},
		{"checkTimeout", &out.CheckTimeout, j.CheckTimeout}, {"maxWall", &out.MaxWall, j.MaxWall}} {
		if d.src == "" {
			continue
		}
		v, err := time.ParseDuration(d.src)
		if err != nil {
			return fmt.Errorf("profile record: %s %q: %w", d.key, d.src, err)
		}
		*d.dst = v
	}
	*p = out
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func ptr[T any](v T) *T { return &v }
