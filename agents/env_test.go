package agents

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/model/scripted"
	"github.com/arborhq/arbor/workspace"
)

// userConfigs maps each test to the user config file of its service (a test's own, so tests
// run in parallel).
var userConfigs sync.Map // *testing.T → string

// testEnv is a real git repository, a scripted model over HTTP and a Service with real
// kernels.
type testEnv struct {
	t      *testing.T
	svc    *Service
	repo   string
	script *scripted.Script
	url    string // the scripted model's base URL
}

func newEnv(t *testing.T, script string) *testEnv {
	t.Helper()
	return newEnvIn(t, script, filepath.Join(t.TempDir(), "repo"))
}

// newEnvIn is newEnv with the repository (and so the sessions' worktrees and event logs, which
// live in its .git/arbor) at repo.
func newEnvIn(t *testing.T, script, repo string) *testEnv {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	s, err := scripted.Parse([]byte(script), t.Name())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	url, wait, err := scripted.Serve(ctx, "127.0.0.1:0", s, nil)
	if err != nil {
		t.Fatal(err)
	}
	gitInit(t, repo, map[string]string{"main.py": "print('hi')\n"})
	userConf := filepath.Join(t.TempDir(), "config.json") // see userConfig
	userConfigs.Store(t, userConf)
	t.Cleanup(func() { userConfigs.Delete(t) })
	svc, err := New(Options{StateDir: t.TempDir(),
		Overrides: workspace.Overrides{ModelBaseURL: url, Model: "scripted", KernelPython: "/usr/bin/python3", UserConfig: userConf}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := svc.Close(context.Background()); err != nil {
			t.Errorf("close service: %v", err)
		}
		cancel()
		wait()
	})
	return &testEnv{t: t, svc: svc, repo: repo, script: s, url: url}
}

func gitInit(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	for name, body := range files {
		os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644)
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"config", "user.name", "t"}, {"config", "user.email", "t@t"}, {"add", "."}, {"commit", "-qm", "init"}} {
		git(t, dir, args...)
	}
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// waitFor polls cond; the limit only guards against a hang.
func (e *testEnv) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// trust trusts the repository's arbor.json as it is now, as `arbor trust --yes` does.
func (e *testEnv) trust() {
	e.t.Helper()
	tr, err := workspace.TrustOf(e.repo, e.svc.Overrides())
	if err == nil {
		_, err = workspace.GrantTrust(e.repo, e.svc.Overrides(), tr.Hash)
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *testEnv) create(task string) *Session {
	e.t.Helper()
	s, err := e.svc.Create(context.Background(), CreateRequest{Task: task, Dir: e.repo})
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// settled waits until the session and all its descendants are idle (or failed/stopped) with
// nothing pending.
func (e *testEnv) settled(s *Session) {
	e.t.Helper()
	e.waitFor("session tree to settle", func() bool { return e.quiet(s) })
}

func (e *testEnv) quiet(s *Session) bool {
	s.mu.Lock()
	busy := s.holder != free || len(s.pending) > 0
	s.mu.Unlock()
	if busy || s.State() == Running || s.State() == Admitted {
		return false
	}
	for _, c := range s.childIDs() {
		cs, err := e.svc.Get(c)
		if err != nil || !e.quiet(cs) {
			return false
		}
	}
	return true
}

// events returns the session's events of one type, decoded.
func (e *testEnv) events(s *Session, typ event.Type) []map[string]any {
	e.t.Helper()
	recs, err := s.Events(0)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []map[string]any
	for _, r := range recs {
		if r.Type == string(typ) {
			var d map[string]any
			json.Unmarshal(r.Data, &d)
			out = append(out, d)
		}
	}
	return out
}
