package eval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/arborhq/arbor/atomicfile"
)

// Statuses of one task run. An errored run says nothing about the agent (its check could not
// run, its fixture failed to set up, the model was unreachable): it is reported apart and left
// out of success rates.
const (
	Passed  = "passed"
	Failed  = "failed"
	Errored = "errored"
)

// Degenerate-output flags of a task run.
const (
	FlagEmptyDiff    = "empty-diff"          // the session's branch changed nothing
	FlagTestsOnly    = "tests-only"          // every change is to a test or a check file
	FlagCheckTouched = "check-files-touched" // the agent wrote a path the hidden check brings
	// FlagCheckBroke: the check, which runs on the untouched fixture, did not finish or was
	// "not found" on the agent's work (a hang on import, an exit(127)): a failure.
	FlagCheckBroke = "check-broke"
	// FlagShadowsModule: the tree held a module named like one the check brings, the
	// standard library's or a test runner's — removed from the checkout (a check module's
	// shadow) or put after them on the path, and flagged.
	FlagShadowsModule = "shadows-module"
	// FlagProtectedChanged: the branch changed what the check runs with as the fixture has it
	// (its command's files, test and build configuration, the task's protected globs); the
	// check ran with the fixture's.
	FlagProtectedChanged = "protected-changed"
	// FlagUnproven: the check exited 0 but what it reports says otherwise — its runner never
	// reported (the process was ended early), reported failures or no tests, or the output
	// lacks the task's pass pattern: a failure.
	FlagUnproven = "exit-0-unproven"
)

// Run statuses.
const (
	RunRunning = "running"
	RunDone    = "done"
	RunStopped = "stopped" // stopped by the user before every task ran
)

// Run is one `arbor eval run`: what it ran, against which harness and model.
type Run struct {
	ID        string   `json:"id"`
	Repo      string   `json:"repo"` // the repository whose harness is measured
	Suite     string   `json:"suite"`
	SuiteDir  string   `json:"suiteDir"`
	SuiteHash string   `json:"suiteHash"` // of every file of the suite: a changed suite is not the same measurement
	Split     string   `json:"split,omitempty"`
	Tags      []string `json:"tags,omitempty"`
	Tasks     []string `json:"tasks"`
	Repeat    int      `json:"repeat"`
	Parallel  int      `json:"parallel"`
	Model     string   `json:"model"`            // the configured model, or "scripted" for the suite's script
	Script    bool     `json:"script,omitempty"` // the suite's script played the model
	// HarnessRef is what the user asked to measure ("" = the current harness); Harness is the
	// commit of each scope the tasks ran with ("" = the scope was empty).
	HarnessRef string            `json:"harnessRef,omitempty"`
	Harness    map[string]string `json:"harness"`
	Label      string            `json:"label,omitempty"` // what the run is for ("gate base of P…")
	// Sandbox is what confined the tasks' code: "bwrap", or "none: why" (the agent could then
	// read the hidden checks).
	Sandbox string    `json:"sandbox,omitempty"`
	Status  string    `json:"status"`
	Created time.Time `json:"created"`
	Ended   time.Time `json:"ended,omitzero"`
}

// Key names one task run of a run.
func Key(task string, repeat int) string { return fmt.Sprintf("%s#%d", task, repeat) }

// Check is how the hidden check ended.
type Check struct {
	Command    string `json:"command"`
	Passed     bool   `json:"passed"`
	ExitCode   int    `json:"exitCode"`
	TimedOut   bool   `json:"timedOut,omitempty"`
	Output     string `json:"output,omitempty"` // its tail
	Error      string `json:"error,omitempty"`  // it could not run
	DurationMs int64  `json:"durationMs"`
	Commit     string `json:"commit,omitempty"` // of the session branch it checked
	// Judged says how the verdict was reached: "exit code 0 and unittest's report: 3 tests
	// ran, none failed", or why an exit code of 0 did not pass.
	Judged string `json:"judged,omitempty"`
}

// TaskResult is one task run.
type TaskResult struct {
	Task       string            `json:"task"`
	Repeat     int               `json:"repeat"`
	Split      string            `json:"split"`
	Tags       []string          `json:"tags,omitempty"`
	Status     string            `json:"status"`
	Error      string            `json:"error,omitempty"` // why it errored
	Session    string            `json:"session,omitempty"`
	Branch     string            `json:"branch,omitempty"`
	Fixture    string            `json:"fixture,omitempty"` // the task's repository: its branch holds the agent's work
	Check      *Check            `json:"check,omitempty"`
	Claimed    bool              `json:"claimed"` // the model called goal.complete
	Evidence   string            `json:"evidence,omitempty"`
	GoalStatus string            `json:"goalStatus,omitempty"`
	GoalReason string            `json:"goalReason,omitempty"`
	Usage      TaskUsage         `json:"usage"`
	WallMs     int64             `json:"wallMs"`
	Turns      int               `json:"turns"`
	Cells      int64             `json:"cells"`
	Children   int               `json:"children"`
	Harness    map[string]string `json:"harness,omitempty"`
	Model      string            `json:"model,omitempty"`
	Flags      []string          `json:"flags,omitempty"`
	Changed    []string          `json:"changed,omitempty"` // paths the branch changed
	Started    time.Time         `json:"started"`
	Ended      time.Time         `json:"ended"`
}

// FalseClaim is a run whose model said it succeeded and whose check says otherwise.
func (r TaskResult) FalseClaim() bool { return r.Claimed && r.Status == Failed }

// TaskUsage is the executor's spending on one task run (the session and its subtree).
type TaskUsage struct {
	InputTokens       int64   `json:"inputTokens"`
	OutputTokens      int64   `json:"outputTokens"`
	CachedInputTokens int64   `json:"cachedInputTokens"`
	CostUSD           float64 `json:"costUSD"`
	ModelCalls        int64   `json:"modelCalls"`
	// The refines the task's sessions ran (a harness that refines often spends on it), apart
	// from the fields above, which are the executor's.
	RefineCalls   int64   `json:"refineCalls,omitempty"`
	RefineTokens  int64   `json:"refineTokens,omitempty"`
	RefineCostUSD float64 `json:"refineCostUSD,omitempty"`
}

// Tokens is everything the task spent in tokens: input plus output, and its refines'.
func (u TaskUsage) Tokens() int64 { return u.InputTokens + u.OutputTokens + u.RefineTokens }

// Started records that a task run began, so a restart knows which session was its.
type Started struct {
	Task    string    `json:"task"`
	Repeat  int       `json:"repeat"`
	Session string    `json:"session"`
	Fixture string    `json:"fixture"`
	At      time.Time `json:"at"`
}

// Store keeps runs under a repository's git dir: <dir>/<run>/run.json, results.jsonl (one
// result a line, synced before it counts) and started.jsonl.
type Store struct {
	dir string
	mu  sync.Mutex
}

// OpenStore opens (creating) the results store in dir, <git-common-dir>/arbor/eval.
func OpenStore(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("eval results %s: %w", dir, err)
	}
	return &Store{dir: dir}, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// RunDir is where run id keeps its files (its fixtures too).
func (s *Store) RunDir(id string) string { return filepath.Join(s.dir, id) }

// Save writes the run's record.
func (s *Store) Save(r *Run) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.RunDir(r.ID), 0o700); err != nil {
		return fmt.Errorf("eval run %s: %w", r.ID, err)
	}
	if err := atomicfile.WriteFile(filepath.Join(s.RunDir(r.ID), "run.json"), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("eval run %s: %w", r.ID, err)
	}
	return nil
}

// ErrNoRun is returned for a run id the store does not have.
var ErrNoRun = errors.New("no such eval run")

// Load reads run id. An id may be a unique prefix, or "latest".
func (s *Store) Load(id string) (*Run, error) {
	full, err := s.resolve(id)
	if err != nil {
		return nil, err
	}
	var r Run
	b, err := os.ReadFile(filepath.Join(s.RunDir(full), "run.json"))
	if err != nil {
		return nil, fmt.Errorf("eval run %s: %w", full, err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("eval run %s: run.json: %w", full, err)
	}
	return &r, nil
}

func (s *Store) resolve(id string) (string, error) {
	runs, err := s.List()
	if err != nil {
		return "", err
	}
	if id == "latest" {
		if len(runs) == 0 {
			return "", fmt.Errorf("%w: there are no eval runs in %s yet", ErrNoRun, s.dir)
		}
		return runs[len(runs)-1].ID, nil
	}
	var match []string
	for _, r := range runs {
		if r.ID == id {
			return id, nil
		}
		if strings.HasPrefix(r.ID, id) {
			match = append(match, r.ID)
		}
	}
	switch len(match) {
	case 1:
		return match[0], nil
	case 0:
		return "", fmt.Errorf("%w %q; `arbor eval results` lists the runs", ErrNoRun, id)
	default:
		return "", fmt.Errorf("eval run %q is ambiguous: %s", id, strings.Join(match, ", "))
	}
}

// List returns every run, oldest first. Directories without a readable run.json are skipped.
func (s *Store) List() ([]*Run, error) {
	des, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("eval results %s: %w", s.dir, err)
	}
	var out []*Run
	for _, d := range des {
		if !d.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(s.dir, d.Name(), "run.json"))
		if err != nil {
			continue
		}
		var r Run
		if json.Unmarshal(b, &r) == nil && r.ID == d.Name() {
			out = append(out, &r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// Append records a finished task run durably. A later result for the same task and repeat
// replaces the earlier one (a run resumed after a restart re-runs what was interrupted).
func (s *Store) Append(run string, r TaskResult) error {
	return s.appendLine(run, "results.jsonl", r)
}

// MarkStarted records that a task run began in session.
func (s *Store) MarkStarted(run string, st Started) error {
	return s.appendLine(run, "started.jsonl", st)
}

func (s *Store) appendLine(run, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	path := filepath.Join(s.RunDir(run), name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("eval run %s: %w", run, err)
	}
	line := append(b, '\n')
	// A line a crash or a full disk cut short is ended first, so this record is a line of its
	// own (the torn one is skipped when read).
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, fi.Size()-1); err == nil && last[0] != '\n' {
			line = append([]byte{'\n'}, line...)
		}
	}
	_, err = f.Write(line)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("eval run %s: record %s: %w", run, name, err)
	}
	return nil
}

// Results returns the run's results, the latest per task and repeat, by task then repeat. A
// torn last line (a crash mid-write) is skipped.
func (s *Store) Results(run string) ([]TaskResult, error) {
	var rs []TaskResult
	if err := readLines(filepath.Join(s.RunDir(run), "results.jsonl"), func(b []byte) {
		var r TaskResult
		if json.Unmarshal(b, &r) == nil && r.Task != "" {
			rs = append(rs, r)
		}
	}); err != nil {
		return nil, err
	}
	latest := map[string]int{}
	var out []TaskResult
	for _, r := range rs {
		k := Key(r.Task, r.Repeat)
		if i, ok := latest[k]; ok {
			out[i] = r
			continue
		}
		latest[k] = len(out)
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Task != out[j].Task {
			return out[i].Task < out[j].Task
		}
		return out[i].Repeat < out[j].Repeat
	})
	return out, nil
}

// StartedRuns returns the latest start record per task and repeat.
func (s *Store) StartedRuns(run string) (map[string]Started, error) {
	out := map[string]Started{}
	err := readLines(filepath.Join(s.RunDir(run), "started.jsonl"), func(b []byte) {
		var st Started
		if json.Unmarshal(b, &st) == nil && st.Task != "" {
			out[Key(st.Task, st.Repeat)] = st
		}
	})
	return out, err
}

func readLines(path string, f func([]byte)) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
			f(line)
		}
	}
	return sc.Err()
}
