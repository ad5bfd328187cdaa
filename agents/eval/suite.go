// Package eval measures a harness on tasks: suites of small repositories with a prompt and a
// hidden check, results kept per run, reports with confidence intervals over repeats, and a
// comparison of two runs that says whether a difference exceeds the noise the repeats measure.
// It is the pure half — loading, statistics, the results store, degenerate-output flags; the
// runner that drives sessions is agents.Service.RunEval.
//
// # Suite layout
//
//	suite.json                  {"name", "seed", "splits": {"feedback": [ids], "heldout": [ids]},
//	                             "limits": {"turns", "tokens", "wall"}, "checkTimeout", "script"}
//	tasks/<id>/task.json        {"prompt", "setup", "limits", "tags", "check", "checkTimeout",
//	                             "pass", "protected", "description"}
//	tasks/<id>/repo/…           the fixture's files (committed as the task's first commit), or
//	tasks/<id>/repo.bundle      a git bundle cloned instead
//	tasks/<id>/check/…          files the check needs (hidden tests): never in the fixture, copied
//	                            over a clean checkout of the session's branch just before the check
//
// "script" names a scripted-model script (agents/model/scripted) in the suite directory: the
// model a run uses when no model is named. Limits in a task override the suite's, which
// override the defaults ([DefaultLimits]). Every task in a split must exist and have a check.
package eval

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Split names.
const (
	Feedback = "feedback"
	HeldOut  = "heldout"
)

// Limits bound one task's session: its goal's turn, token and wall budgets.
type Limits struct {
	Turns  int      `json:"turns,omitempty"`
	Tokens int64    `json:"tokens,omitempty"`
	Wall   Duration `json:"wall,omitempty"`
}

// DefaultLimits apply where neither the task nor the suite sets a limit.
var DefaultLimits = Limits{Turns: 8, Tokens: 400_000, Wall: Duration(10 * time.Minute)}

// DefaultCheckTimeout bounds a hidden check when neither task nor suite does.
const DefaultCheckTimeout = 5 * time.Minute

func (l Limits) over(base Limits) Limits {
	if l.Turns == 0 {
		l.Turns = base.Turns
	}
	if l.Tokens == 0 {
		l.Tokens = base.Tokens
	}
	if l.Wall == 0 {
		l.Wall = base.Wall
	}
	return l
}

// Duration is a time.Duration written as "90s", "10m".
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"90s\" or \"10m\", not %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %v", s, err)
	}
	if v < 0 {
		return fmt.Errorf("duration %q: want a positive duration", s)
	}
	*d = Duration(v)
	return nil
}

// Suite is a loaded suite.
type Suite struct {
	Dir          string              `json:"-"`
	Name         string              `json:"name"`
	Seed         int64               `json:"seed"`
	Description  string              `json:"description,omitempty"`
	Splits       map[string][]string `json:"splits"`
	Limits       Limits              `json:"limits,omitempty"`
	CheckTimeout Duration            `json:"checkTimeout,omitempty"`
	Script       string              `json:"script,omitempty"`
	// Test says the suite tests Arbor itself: its script plays the model also where an eval
	// gate judges a harness edit (elsewhere a gate runs on a configured model, since a script
	// reacts to its rules, not to what an edit says).
	Test  bool             `json:"test,omitempty"`
	Tasks map[string]*Task `json:"-"`
}

// Task is one task of a suite.
type Task struct {
	ID           string   `json:"-"`
	Dir          string   `json:"-"`
	Prompt       string   `json:"prompt"`
	Setup        string   `json:"setup,omitempty"`
	Limits       Limits   `json:"limits,omitempty"`
	Tags         []string `json:"tags,omitempty"`
	Check        string   `json:"check"`
	CheckTimeout Duration `json:"checkTimeout,omitempty"`
	Description  string   `json:"description,omitempty"` // for the suite's reader; not shown to the agent
	// Pass is a regular expression the check's output must match for a pass, besides its exit
	// code of 0 (and its runner's report, where the judge runs the runner).
	Pass string `json:"pass,omitempty"`
	// Protected are globs (** for any depth) of paths the agent may not change: the check
	// runs with them as the fixture has them, besides the check's files, the files its
	// command names and the test and build configuration every check restores.
	Protected []string `json:"protected,omitempty"`
	// CheckFiles are the paths (slash-separated, relative) under check/: the hidden files the
	// check brings.
	CheckFiles []string `json:"-"`
	Bundle     bool     `json:"-"` // the fixture is repo.bundle, not repo/
}

var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// Load reads and checks the suite in dir. Its errors name the file and what is wrong.
func Load(dir string) (*Suite, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	manifest := filepath.Join(abs, "suite.json")
	var s Suite
	if err := readStrict(manifest, &s); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("suite %s: no suite.json there (a suite is a directory with suite.json and tasks/<id>/task.json)", dir)
		}
		return nil, fmt.Errorf("suite %s: %w", manifest, err)
	}
	s.Dir = abs
	if strings.TrimSpace(s.Name) == "" {
		return nil, fmt.Errorf("suite %s: \"name\" is empty", manifest)
	}
	if len(s.Splits) == 0 {
		return nil, fmt.Errorf("suite %s: no splits; want \"splits\": {\"feedback\": [task ids], \"heldout\": [task ids]}", manifest)
	}
	if s.Limits.Turns < 0 || s.Limits.Tokens < 0 {
		return nil, fmt.Errorf("suite %s: limits must be positive", manifest)
	}
	for name := range s.Splits {
		if name != Feedback && name != HeldOut {
			return nil, fmt.Errorf("suite %s: unknown split %q; the splits are %q and %q", manifest, name, Feedback, HeldOut)
		}
	}
	if s.Script != "" {
		p := filepath.Join(abs, filepath.FromSlash(s.Script))
		if !inside(abs, p) {
			return nil, fmt.Errorf("suite %s: script %q is outside the suite directory", manifest, s.Script)
		}
		if fi, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("suite %s: script %q: %v", manifest, s.Script, err)
		} else if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("suite %s: script %q is not a file", manifest, s.Script)
		}
	}
	s.Tasks = map[string]*Task{}
	inSplit := map[string]string{}
	for _, name := range []string{Feedback, HeldOut} {
		for _, id := range s.Splits[name] {
			if prev, dup := inSplit[id]; dup {
				return nil, fmt.Errorf("suite %s: task %q is in %s and in %s; a task belongs to one split", manifest, id, prev, name)
			}
			inSplit[id] = name
			t, err := loadTask(abs, id)
			if err != nil {
				return nil, err
			}
			t.Limits = t.Limits.over(s.Limits.over(DefaultLimits))
			if t.CheckTimeout == 0 {
				t.CheckTimeout = s.CheckTimeout
			}
			if t.CheckTimeout == 0 {
				t.CheckTimeout = Duration(DefaultCheckTimeout)
			}
			s.Tasks[id] = t
		}
	}
	return &s, nil
}

func loadTask(suite, id string) (*Task, error) {
	if !idPattern.MatchString(id) {
		return nil, fmt.Errorf("suite %s: task id %q: want lower-case letters, digits, '.', '_' or '-' (at most 64)", suite, id)
	}
	dir := filepath.Join(suite, "tasks", id)
	file := filepath.Join(dir, "task.json")
	t := &Task{ID: id, Dir: dir}
	if err := readStrict(file, t); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("task %s: %s does not exist", id, file)
		}
		return nil, fmt.Errorf("task %s: %s: %w", id, file, err)
	}
	if strings.TrimSpace(t.Prompt) == "" {
		return nil, fmt.Errorf("task %s: %s has no \"prompt\"", id, file)
	}
	if strings.TrimSpace(t.Check) == "" {
		return nil, fmt.Errorf("task %s: %s has no \"check\": every task needs a hidden check command that decides its verdict", id, file)
	}
	if t.Limits.Turns < 0 || t.Limits.Tokens < 0 {
		return nil, fmt.Errorf("task %s: %s: limits must be positive", id, file)
	}
	if _, err := regexp.Compile(t.Pass); err != nil {
		return nil, fmt.Errorf("task %s: %s: \"pass\" %q is not a regular expression: %v", id, file, t.Pass, err)
	}
	for _, g := range t.Protected {
		if g == "" || strings.HasPrefix(g, "/") || strings.Contains("/"+g+"/", "/../") {
			return nil, fmt.Errorf("task %s: %s: protected glob %q: want a path inside the fixture", id, file, g)
		}
	}
	repoInfo, errRepo := os.Stat(filepath.Join(dir, "repo"))
	_, errBundle := os.Stat(filepath.Join(dir, "repo.bundle"))
	if errRepo == nil && !repoInfo.IsDir() {
		return nil, fmt.Errorf("task %s: %s is not a directory: repo/ holds the fixture's files (or use repo.bundle)", id, filepath.Join(dir, "repo"))
	}
	switch {
	case errRepo == nil && errBundle == nil:
		return nil, fmt.Errorf("task %s: both repo/ and repo.bundle in %s; keep one fixture", id, dir)
	case errBundle == nil:
		t.Bundle = true
	case errRepo != nil:
		return nil, fmt.Errorf("task %s: no fixture in %s: want repo/ (the files) or repo.bundle (a git bundle)", id, dir)
	}
	checkDir := filepath.Join(dir, "check")
	if fi, err := os.Stat(checkDir); err == nil && fi.IsDir() {
		err := filepath.WalkDir(checkDir, func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err // directories, and links a check may not bring
			}
			rel, _ := filepath.Rel(checkDir, p)
			t.CheckFiles = append(t.CheckFiles, filepath.ToSlash(rel))
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("task %s: %v", id, err)
		}
		sort.Strings(t.CheckFiles)
	}
	return t, nil
}

// Select returns the ids of a split ("" = every task), sorted, keeping only tasks that carry
// every tag given.
func (s *Suite) Select(split string, tags []string) ([]string, error) {
	var ids []string
	switch split {
	case "":
		for id := range s.Tasks {
			ids = append(ids, id)
		}
	case Feedback, HeldOut:
		ids = append(ids, s.Splits[split]...)
	default:
		return nil, fmt.Errorf("unknown split %q: want %s or %s", split, Feedback, HeldOut)
	}
	var out []string
	for _, id := range ids {
		if hasTags(s.Tasks[id].Tags, tags) {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return nil, fmt.Errorf("suite %s: no task in split %q with tags %v", s.Name, orAll(split), tags)
	}
	return out, nil
}

func orAll(split string) string {
	if split == "" {
		return "all"
	}
	return split
}

func hasTags(have, want []string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			found = found || h == w
		}
		if !found {
			return false
		}
	}
	return true
}

// SplitOf names the split task id is in.
func (s *Suite) SplitOf(id string) string {
	for name, ids := range s.Splits {
		for _, x := range ids {
			if x == id {
				return name
			}
		}
	}
	return ""
}

func readStrict(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	return nil
}

func inside(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
