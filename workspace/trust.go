package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/arborhq/arbor/atomicfile"
)

// A repository is untrusted until its user says otherwise. Its arbor.json may set what the
// user's own config may: which Python runs the kernels, a command run in every new worktree,
// how far the sandbox reaches, which endpoint gets the session's conversation and a model's
// key. A cloned repository must not get those by being cloned, so the settings that execute or
// choose where data goes — the guarded ones — take effect only once the user has reviewed them
// and run `arbor trust` (the idea of VS Code's workspace trust and direnv's `allow`). The user
// config and the daemon's flags and environment are the user's own and always trusted.
//
// Trust is recorded per repository, keyed by its real path, with a hash of exactly the guarded
// settings' values: a change to any of them asks again, a change to anything else does not.
// The record lives in $XDG_DATA_HOME/arbor/trust.json, which the CLI and the daemon share and
// the daemon reads again on every load.
//
// Which settings are guarded is the table below, by JSON path: what the setting can do (shown
// to the user) and the values that weaken nothing and need no trust. Guarding a new setting
// (a gate command, an end condition) is one line here. Model entries need code (routeGuards):
// whether the repository chose an entry's endpoint depends on the daemon's overrides, and
// refine.model is guarded only when it names such an entry.
//
// Where data goes is guarded as much as what runs: a model entry's baseURL receives the task,
// every file a cell prints and the whole conversation, from the daemon and so around the
// sandbox's "network": false, key or no key. So is a kernel gateway's URL.

type guard struct {
	why  string
	safe []string // values as fmt.Sprint prints them
}

var guarded = map[string]guard{
	"kernelPython":                  {why: "runs as the kernels' Python, on your machine"},
	"kernels.gateway":               {why: "runs model-written code with your sessions' files on that server, and sends it the token of tokenEnv", safe: []string{"{  }"}}, // {"url": ""}: local kernels
	"worktree.command":              {why: "runs on your machine in every new session worktree"},
	"sandbox":                       {why: "weakens or turns off the sandbox around model-written code", safe: []string{"bwrap", "auto", ""}},
	"allowNetwork":                  {why: "gives model-written code the network", safe: []string{"false"}},
	"network":                       {why: "gives model-written code the network", safe: []string{"false"}},
	"sandboxHome":                   {why: "lets model-written code read these paths of your home directory", safe: []string{"[]"}},
	"kernelEnv":                     {why: "passes these variables of the daemon's environment to model-written code", safe: []string{"[]"}},
	"limits.processes":              {why: "sets how many processes model-written code may run at once (a higher limit lets a fork bomb take more of your machine)"},
	"limits.memory":                 {why: "sets how much memory model-written code may use (a higher limit lets a leak take more of your machine)"},
	"harness.session.gate":          {why: "runs on your machine to judge the agent's proposed harness changes"},
	"harness.workspace.gate":        {why: "runs on your machine to judge the agent's proposed harness changes"},
	"harness.global.gate":           {why: "runs on your machine to judge the agent's proposed harness changes"},
	"harness.session.branchCheck":   {why: "runs on your machine to check the branch of a session that proposes a harness change"},
	"harness.workspace.branchCheck": {why: "runs on your machine to check the branch of a session that proposes a harness change"},
	"harness.global.branchCheck":    {why: "runs on your machine to check the branch of a session that proposes a harness change"},
	"harness.workspace.eval":        {why: "runs an eval suite's setup and hidden checks on your machine to judge the agent's proposed harness changes"},
	"harness.global.eval":           {why: "runs an eval suite's setup and hidden checks on your machine to judge the agent's proposed harness changes"},
	"harness.workspace.policy":      {why: "applies the agent's and /refine's changes to the repository's shared harness without your review", safe: []string{"review"}},
	"harness.global.policy":         {why: "applies the agent's and /refine's changes to your global harness without your review", safe: []string{"review"}},
}

// Setting is one guarded setting a repository's arbor.json sets.
type Setting struct {
	Name  string `json:"name"`  // its path in the file: "worktree.command", "models.x"
	Value string `json:"value"` // its value as JSON, ASCII only, bounded (see maxShown)
	Why   string `json:"why"`   // what it can do
}

// Trust is what a repository's arbor.json asks to be trusted with, and whether it is.
type Trust struct {
	Repo     string    // the repository's real path, which trust is recorded under
	File     string    // its arbor.json
	Settings []Setting // the guarded settings it sets, by name; none: nothing to trust
	Hash     string    // of the settings' full values; "" when there are none
	Trusted  bool      // recorded with this hash, or nothing to trust
	Changed  bool      // recorded with another hash: a guarded setting changed since
}

// Check returns an *UntrustedError unless t is trusted or all it is not trusted with belongs
// to profiles: those matter only to a run with that profile, which [Config.Profile] refuses.
func (t Trust) Check() error {
	if t.Trusted || !slices.ContainsFunc(t.Settings, func(s Setting) bool { return !isProfileSetting(s) }) {
		return nil
	}
	return &UntrustedError{Trust: t}
}

// UntrustedError refuses what needs a repository's guarded settings before they are trusted.
// Its message names the file, each setting and its value, and the command to run.
type UntrustedError struct {
	Trust Trust
	// Stale: a grant named a hash other than the settings' current one (the file changed
	// after the user reviewed it).
	Stale bool
}

// maxInMessage bounds each value in an error message; the full value is in the file.
const maxInMessage = 200

// maxListed bounds the settings part of a message: the command to run comes first, so a
// message clipped by a transport still says what to do.
const maxListed = 1200

func (e *UntrustedError) Error() string {
	t := e.Trust
	var b strings.Builder
	switch {
	case e.Stale:
		fmt.Fprintf(&b, "%s changed since its settings were reviewed, so nothing was trusted; review them again (arbor trust %s). It now sets:",
			t.File, ShellQuote(t.Repo))
	case t.Changed:
		fmt.Fprintf(&b, "%s changed settings that run commands or send your code, conversation or keys elsewhere since you trusted it; they take effect once you review them and run: arbor trust %s",
			t.File, ShellQuote(t.Repo))
	default:
		fmt.Fprintf(&b, "%s sets settings that run commands or send your code, conversation or keys elsewhere, and this repository is not trusted; they take effect once you review them and run: arbor trust %s",
			t.File, ShellQuote(t.Repo))
	}
	start := b.Len()
	for i, s := range t.Settings {
		line := fmt.Sprintf("\n  %s = %s (%s)", s.Name, clip(s.Value, maxInMessage), s.Why)
		if b.Len()-start+len(line) > maxListed {
			fmt.Fprintf(&b, "\n  and %d more (arbor trust lists them all)", len(t.Settings)-i)
			break
		}
		b.WriteString(line)
	}
	return b.String()
}

// guard finds the guarded settings f sets and whether they are trusted. ov are the daemon's
// overrides, which decide whether a model entry's baseURL is sent a key.
func (f *fileConfig) guard(root, file string, ov Overrides) (Trust, error) {
	t := Trust{Repo: realPath(root), File: file}
	t.Settings = append(tagGuards(reflect.ValueOf(f).Elem(), ""), f.routeGuards(ov)...)
	t.Settings = append(t.Settings, profileGuards(f.profiles)...)
	if len(t.Settings) == 0 {
		t.Trusted = true
		return t, nil
	}
	sort.Slice(t.Settings, func(i, j int) bool { return t.Settings[i].Name < t.Settings[j].Name })
	h := sha256.New()
	for _, s := range t.Settings {
		// Full values, length-prefixed: the hash covers what the user cannot see in a
		// bounded display too.
		fmt.Fprintf(h, "%d:%s%d:%s", len(s.Name), s.Name, len(s.Value), s.Value)
	}
	t.Hash = "sha256:" + hex.EncodeToString(h.Sum(nil))
	for i := range t.Settings {
		t.Settings[i].Value = clip(t.Settings[i].Value, maxShown)
	}
	rec, ok, err := readTrust(TrustPath(), t.Repo)
	if err != nil {
		return t, err
	}
	t.Trusted = ok && rec.Hash == t.Hash
	t.Changed = ok && !t.Trusted
	return t, nil
}

// tagGuards lists the fields of v (a struct, fields addressed as prefix+name) that the
// guarded table names and that are set to an unsafe value, descending into struct pointers.
func tagGuards(v reflect.Value, prefix string) []Setting {
	var out []Setting
	walkGuarded(v, prefix, func(name string, g guard, fv reflect.Value) {
		out = append(out, Setting{Name: name, Value: asciiJSON(reflect.Indirect(fv).Interface()), Why: g.why})
	})
	return out
}

// walkGuarded calls fn for each field of v set to an unsafe value of a guarded setting.
func walkGuarded(v reflect.Value, prefix string, fn func(name string, g guard, fv reflect.Value)) {
	for i := 0; i < v.NumField(); i++ {
		sf, fv := v.Type().Field(i), v.Field(i)
		name := prefix + strings.Split(sf.Tag.Get("json"), ",")[0]
		g, ok := guarded[name]
		if !ok {
			if fv.Kind() == reflect.Pointer && !fv.IsNil() && fv.Elem().Kind() == reflect.Struct {
				walkGuarded(fv.Elem(), name+".", fn)
			}
			continue
		}
		if fv.IsZero() || slices.Contains(g.safe, fmt.Sprint(reflect.Indirect(fv).Interface())) {
			continue // not set in this file, or set to what weakens nothing
		}
		fn(name, g, fv)
	}
}

// stripGuarded unsets every guarded setting of f, so an untrusted file applies only the
// rest: the value below (the user config's, or the default) stays.
func (f *fileConfig) stripGuarded(ov Overrides) {
	walkGuarded(reflect.ValueOf(f).Elem(), "", func(_ string, _ guard, fv reflect.Value) {
		fv.Set(reflect.Zero(fv.Type()))
	})
	for _, s := range f.routeGuards(ov) {
		if s.Name == "refine.model" {
			f.Refine.Model = nil // refine calls the session's model, or the user config's choice
			continue
		}
		delete(f.Models, strings.TrimPrefix(s.Name, "models."))
	}
	for name, fp := range f.profiles {
		stripped := *fp
		stripped.stripGuarded(name)
		f.profiles[name] = &stripped
	}
}

// routeGuards lists the model entries of the repository that send data to an endpoint it
// chose (modelGuards), and refine.model when it names one of them.
func (f *fileConfig) routeGuards(ov Overrides) []Setting {
	out := f.modelGuards(ov)
	if f.Refine == nil || f.Refine.Model == nil {
		return out
	}
	name := *f.Refine.Model
	if slices.ContainsFunc(out, func(s Setting) bool { return s.Name == "models."+name }) {
		out = append(out, Setting{Name: "refine.model", Value: asciiJSON(name),
			Why: fmt.Sprintf("has /refine send the session's trajectory (task, cells, outputs) to the repository's model %s (models.%s)", name, name)})
	}
	return out
}

// modelGuards: a model entry of the repository is guarded when, once the overrides are laid
// over it, it has a baseURL and the repository chose where it goes or what it carries: its
// own URL, which gets the task, the files the session reads and the conversation, and any key
// the entry reads (its own variable, or the one ARBOR_API_KEY_ENV names); or the user's URL
// with a variable it names (any of the daemon's variables, say AWS_SECRET_ACCESS_KEY). An
// entry the overrides give the user's URL and key, or one without a URL, sends nothing to a
// place the repository chose and needs no trust.
func (f *fileConfig) modelGuards(ov Overrides) []Setting {
	var out []Setting
	target, overridden := ov.modelTarget()
	for name, m := range f.Models {
		eff, mine := m, overridden && name == target
		if mine && ov.ModelBaseURL != "" {
			eff.BaseURL = ov.ModelBaseURL
		}
		if mine && ov.APIKeyEnv != "" {
			eff.APIKeyEnv = ov.APIKeyEnv
		}
		repoURL := m.BaseURL != "" && eff.BaseURL == m.BaseURL
		repoKey := m.APIKeyEnv != "" && eff.APIKeyEnv == m.APIKeyEnv
		if eff.BaseURL == "" || !repoURL && !repoKey {
			continue
		}
		var why string
		switch {
		case eff.APIKeyEnv == "":
			why = "sends the session's task, what its cells print (your files among it) and the conversation to this URL, from the daemon and so whatever the sandbox's network setting"
		case !repoKey:
			why = fmt.Sprintf("sends the value of $%s, and the session's task, cells and conversation, to this URL (the variable is ARBOR_API_KEY_ENV's, the URL is the repository's)", eff.APIKeyEnv)
		case !repoURL:
			why = fmt.Sprintf("sends the value of $%s to this URL (the URL is ARBOR_MODEL_BASE_URL's, the variable is the repository's)", eff.APIKeyEnv)
		default:
			why = fmt.Sprintf("sends the value of $%s, and the session's task, cells and conversation, to this URL", eff.APIKeyEnv)
		}
		val := asciiJSON(struct {
			BaseURL   string `json:"baseURL"`
			APIKeyEnv string `json:"apiKeyEnv,omitempty"`
		}{eff.BaseURL, eff.APIKeyEnv})
		out = append(out, Setting{Name: "models." + name, Value: val, Why: why})
	}
	return out
}

// maxShown bounds a value as listed: enough for any honest command, and a padded one cannot
// flood an editor's dialog. The hash covers the full value.
const maxShown = 1 << 10

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s... (%d bytes in all: read the file)", s[:n], len(s))
}

// asciiJSON encodes v as JSON with every non-ASCII or control character escaped, so what
// the user reviews cannot hide behind terminal escapes or bidirectional-text tricks.
func asciiJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("%q", fmt.Sprint(v))
	}
	var out strings.Builder
	for _, r := range strings.TrimSuffix(b.String(), "\n") {
		if r < 0x20 || r > 0x7e {
			if r > 0xffff {
				fmt.Fprintf(&out, `\u%04x\u%04x`, 0xd800+((r-0x10000)>>10), 0xdc00+((r-0x10000)&0x3ff))
			} else {
				fmt.Fprintf(&out, `\u%04x`, r)
			}
			continue
		}
		out.WriteRune(r)
	}
	return out.String()
}

// ShellQuote quotes s for a POSIX shell when it needs quoting.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:@,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func realPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// TrustPath is $XDG_DATA_HOME/arbor/trust.json (or ~/.local/share/arbor/trust.json).
func TrustPath() string {
	if d := DataDir(); d != "" {
		return filepath.Join(d, "trust.json")
	}
	return ""
}

// TrustRecord is one trusted repository.
type TrustRecord struct {
	Repo     string    `json:"repo"`
	Hash     string    `json:"hash"`
	Settings []Setting `json:"settings"` // as the user reviewed them
	Granted  time.Time `json:"granted"`
}

type trustFile struct {
	Repos map[string]TrustRecord `json:"repos"`
}

func loadTrustFile(path string) (trustFile, error) {
	tf := trustFile{Repos: map[string]TrustRecord{}}
	if path == "" {
		return tf, errors.New("trust store: no home directory and no XDG_DATA_HOME to keep it in")
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return tf, nil
	}
	if err == nil {
		err = json.Unmarshal(data, &tf)
	}
	if err != nil {
		// Fail closed, and say what to do: nothing is trusted until the file is fixed.
		return tf, fmt.Errorf("trust store %s: %w (fix it, or remove it and trust your repositories again)", path, err)
	}
	if tf.Repos == nil {
		tf.Repos = map[string]TrustRecord{}
	}
	return tf, nil
}

func readTrust(path, repo string) (TrustRecord, bool, error) {
	tf, err := loadTrustFile(path)
	if err != nil {
		return TrustRecord{}, false, err
	}
	rec, ok := tf.Repos[repo]
	return rec, ok, nil
}

// updateTrust edits the store under an exclusive lock (the CLI and the daemon share it) and
// writes it whole with atomicfile.
func updateTrust(path string, edit func(tf *trustFile)) error {
	if path == "" {
		return errors.New("trust store: no home directory and no XDG_DATA_HOME to keep it in")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("trust store: %w", err)
	}
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("trust store: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("trust store: lock %s: %w", lock.Name(), err)
	}
	tf, err := loadTrustFile(path)
	if err != nil {
		return err
	}
	edit(&tf)
	data, err := json.MarshalIndent(tf, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("trust store: %w", err)
	}
	return nil
}

// TrustOf reads the guarded settings of the arbor.json of the repository whose top level is
// root, as the daemon with overrides ov would load it, and whether they are trusted.
func TrustOf(root string, ov Overrides) (Trust, error) {
	file := filepath.Join(root, "arbor.json")
	f, ok, err := readLayer(file)
	if err != nil {
		return Trust{}, err
	}
	if !ok {
		return Trust{Repo: realPath(root), File: file, Trusted: true}, nil
	}
	return f.guard(root, file, ov)
}

// GrantTrust trusts the repository's guarded settings, provided their hash is still hash —
// exactly what the user reviewed; otherwise it returns an *UntrustedError with Stale set and
// the settings as they are now.
func GrantTrust(root string, ov Overrides, hash string) (Trust, error) {
	t, err := TrustOf(root, ov)
	if err != nil {
		return t, err
	}
	if t.Hash != hash {
		return t, &UntrustedError{Trust: t, Stale: true}
	}
	if len(t.Settings) == 0 {
		return t, nil
	}
	err = updateTrust(TrustPath(), func(tf *trustFile) {
		tf.Repos[t.Repo] = TrustRecord{Repo: t.Repo, Hash: t.Hash, Settings: t.Settings, Granted: time.Now().UTC()}
	})
	if err != nil {
		return t, err
	}
	t.Trusted, t.Changed = true, false
	return t, nil
}

// RevokeTrust forgets the trust of the repository at root (its real path); it reports
// whether there was any.
func RevokeTrust(root string) (bool, error) {
	repo, had := realPath(root), false
	err := updateTrust(TrustPath(), func(tf *trustFile) {
		_, had = tf.Repos[repo]
		delete(tf.Repos, repo)
	})
	return had, err
}

// TrustedRepos lists the trusted repositories by path.
func TrustedRepos() ([]TrustRecord, error) {
	tf, err := loadTrustFile(TrustPath())
	if err != nil {
		return nil, err
	}
	out := make([]TrustRecord, 0, len(tf.Repos))
	for _, r := range tf.Repos {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Repo < out[j].Repo })
	return out, nil
}
