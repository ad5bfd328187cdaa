package acp

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/arborhq/arbor/atomicfile"
)

// The modes: what may leave a session's branch for the user's (see the package doc).
const (
	modeReview = "review"
	modeBranch = "branch"
	modeApply  = "apply"
)

var modeList = []struct{ id, name, desc string }{
	{modeReview, "Review", "The agent works on its own branch; after each turn you are asked, with the diff, before its change is applied to your branch."},
	{modeBranch, "Branch only", "The change stays on the session's branch; nothing is applied to yours (review it with `arbor diff`, take it with `arbor accept` or from an editor)."},
	{modeApply, "Apply", "Each turn's change is applied to your branch without asking."},
}

func validMode(m string) bool {
	for _, x := range modeList {
		if x.id == m {
			return true
		}
	}
	return false
}

// sessionState is what the ACP side keeps of a session across connections: its mode, and
// the MCP servers its client asked for (declined).
type sessionState struct {
	Mode       string   `json:"mode"`
	MCPServers []string `json:"mcpServers,omitempty"`
	// Kept is the session head whose change the user chose to keep on the branch: not asked
	// about again until the session makes another checkpoint.
	Kept string `json:"kept,omitempty"`
}

// stateFile is <state>/acp/sessions.json, written whole (temp, fsync, rename) on each change.
// Several `arbor acp` processes may run: each reads the file again before a change.
type stateFile struct {
	path string
	log  *slog.Logger
	mu   sync.Mutex
	mem  map[string]sessionState // without a state directory: this process only
}

func openState(dir string, log *slog.Logger) *stateFile {
	if dir == "" {
		return &stateFile{log: log, mem: map[string]sessionState{}}
	}
	return &stateFile{path: filepath.Join(dir, "acp", "sessions.json"), log: log}
}

// read returns the file's sessions; ok is false when the file exists and does not parse (it
// is then never overwritten: a hand-edit gone wrong is the user's to fix, not to lose).
func (f *stateFile) read() (m map[string]sessionState, ok bool) {
	m = map[string]sessionState{}
	if f.path == "" {
		for k, v := range f.mem {
			m[k] = v
		}
		return m, true
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		return m, true
	}
	if err := json.Unmarshal(b, &m); err != nil {
		f.log.Warn("arbor acp state is unreadable: every session is in review mode until it is fixed or removed", "file", f.path, "err", err)
		return map[string]sessionState{}, false
	}
	return m, true
}

// locked runs fn holding an advisory lock on the file, which other `arbor acp` processes
// take too, so two read-modify-writes never lose each other's change.
func (f *stateFile) locked(fn func()) {
	if f.path == "" {
		fn()
		return
	}
	if err := os.MkdirAll(filepath.Dir(f.path), 0o700); err != nil {
		fn()
		return
	}
	lf, err := os.OpenFile(f.path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		fn()
		return
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err == nil {
		defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
	}
	fn()
}

// get returns a session's state; a session never seen here is in review mode.
func (f *stateFile) get(id string) sessionState {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, _ := f.read()
	st, ok := m[id]
	if !ok || !validMode(st.Mode) {
		st.Mode = modeReview
	}
	return st
}

func (f *stateFile) set(id string, change func(*sessionState)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.locked(func() {
		m, ok := f.read()
		st := m[id]
		if !validMode(st.Mode) {
			st.Mode = modeReview
		}
		change(&st)
		m[id] = st
		if f.path == "" {
			f.mem[id] = st
			return
		}
		if !ok {
			return
		}
		b, _ := json.MarshalIndent(m, "", " ")
		if err := atomicfile.WriteFile(f.path, b, 0o600); err != nil {
			f.log.Warn("write arbor acp state", "file", f.path, "err", err)
		}
	})
}
