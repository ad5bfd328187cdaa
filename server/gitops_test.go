package server

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arborhq/arbor/agents"
	"github.com/arborhq/arbor/agents/model/scripted"
	"github.com/arborhq/arbor/workspace"
	"go.lsp.dev/jsonrpc2"
)

const gitopsScript = `{"rules":[
 {"when":{"turn":1},"code":"open('a.txt','w').write('one\\n')\nopen('main.py','w').write('agent\\n')"}
],"default":{"text":"done"}}`

// TestGitOpsOverProtocol drives fork, per-turn diff, accept and discard through a real daemon
// on a socket, checking the wire types and error codes.
func TestGitOpsOverProtocol(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	ctx := t.Context()
	repo, c := modelDaemon(t, gitopsScript)

	var s Session
	if err := c.Call(ctx, MethodSessionCreate, &SessionCreateParams{Task: "edit things", Dir: repo}, &s); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(90 * time.Second); s.State.String() != StateIdle; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("session never went idle: %+v", s)
		}
		if err := c.Call(ctx, MethodSessionGet, &SessionRef{ID: s.ID}, &s); err != nil {
			t.Fatal(err)
		}
	}

	var d DiffResult
	if err := c.Call(ctx, MethodSessionDiff, &DiffParams{ID: s.ID, Turn: 1}, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Files) != 2 || d.Files[0].Path != "a.txt" || !strings.Contains(d.Patch, "+agent") {
		t.Errorf("turn 1 diff: %+v", d)
	}
	if err := c.Call(ctx, MethodSessionDiff, &DiffParams{ID: s.ID, Turn: 2}, &d); err == nil {
		t.Errorf("turn 2 does not exist, yet diffed")
	}

	var f Session
	if err := c.Call(ctx, MethodSessionFork, &ForkParams{ID: s.ID, Name: "alt"}, &f); err != nil {
		t.Fatal(err)
	}
	if f.State.String() != StateIdle || !strings.HasPrefix(f.Branch, "arbor/alt-") || f.Parent != "" || f.ForkOf != s.ID || f.ForkSeq < s.LastSeq {
		t.Errorf("fork: %+v", f)
	}

	wantCode := func(err error, code jsonrpc2.Code, text string) {
		t.Helper()
		var re *jsonrpc2.Error
		if !errors.As(err, &re) || re.Code != code || !strings.Contains(re.Message, text) {
			t.Errorf("error %v, want code %d naming %q", err, code, text)
		}
	}
	var ar AcceptResult
	wantCode(c.Call(ctx, MethodSessionAccept, &AcceptParams{ID: s.ID, Hunks: []string{"a.txt"}}, &ar), jsonrpc2.InvalidParams, "path#index")
	wantCode(c.Call(ctx, MethodSessionAccept, &AcceptParams{ID: s.ID, Mode: "rebase"}, &ar), jsonrpc2.InvalidParams, "squash")
	os.WriteFile(filepath.Join(repo, "main.py"), []byte("mine\n"), 0o644)
	err := c.Call(ctx, MethodSessionAccept, &AcceptParams{ID: s.ID}, &ar)
	wantCode(err, CodeConflict, "main.py")
	// The data lists the files for an editor to open.
	var re *jsonrpc2.Error
	var cd ConflictData
	if !errors.As(err, &re) || re.Data == nil || json.Unmarshal(*re.Data, &cd) != nil || cd.Kind != "dirty" || strings.Join(cd.Files, ",") != "main.py" || cd.Into == "" {
		t.Errorf("conflict data %+v of %v", cd, err)
	}
	wantCode(c.Call(ctx, MethodSessionMerge, &MergeParams{ID: s.ID}, &ar), CodeInvalidState, "root session")
	wantCode(c.Call(ctx, MethodSessionMerge, &MergeParams{ID: s.ID, Resolutions: map[string]string{"../x": "y"}}, &ar), jsonrpc2.InvalidParams, "relative")
	var rr RejectResult
	wantCode(c.Call(ctx, MethodSessionReject, &RejectParams{ID: s.ID, Hunks: []string{"a.txt#x"}}, &rr), jsonrpc2.InvalidParams, "path#index")
	wantCode(c.Call(ctx, MethodSessionReject, &RejectParams{ID: s.ID, Files: []string{"nope.txt"}}, &rr), jsonrpc2.InternalError, "nope.txt is not in the diff")
	wantCode(c.Call(ctx, MethodSessionReject, &RejectParams{ID: "nosuch"}, &rr), CodeUnknownSession, "nosuch")

	if err := c.Call(ctx, MethodSessionAccept, &AcceptParams{ID: s.ID, Files: []string{"a.txt"}}, &ar); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(gitRun(t, repo, "rev-parse", "HEAD")); got != ar.Commit || strings.Join(ar.Files, ",") != "a.txt" {
		t.Errorf("accept result %+v, HEAD %s", ar, got)
	}
	// What was accepted leaves the remaining diff; all still has it. Rejecting the rest
	// reverts main.py on the session's branch.
	if err := c.Call(ctx, MethodSessionDiff, &DiffParams{ID: s.ID}, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Files) != 1 || d.Files[0].Path != "main.py" || d.Accepted == "" || d.Accepted != d.Base {
		t.Errorf("remaining diff after accepting a.txt: %+v", d)
	}
	var all DiffResult
	if err := c.Call(ctx, MethodSessionDiff, &DiffParams{ID: s.ID, All: true}, &all); err != nil || len(all.Files) != 2 || all.Accepted != "" {
		t.Errorf("the whole diff: %+v %v", all, err)
	}
	if err := c.Call(ctx, MethodSessionReject, &RejectParams{ID: s.ID, Files: []string{"main.py"}, Head: d.Head}, &rr); err != nil {
		t.Fatal(err)
	}
	if got := gitRun(t, repo, "show", s.Branch+":main.py"); strings.Contains(got, "agent") || strings.Join(rr.Files, ",") != "main.py" {
		t.Errorf("main.py on the session's branch after the reject: %q (%+v)", got, rr)
	}
	if err := c.Call(ctx, MethodSessionDiff, &DiffParams{ID: s.ID}, &d); err != nil || len(d.Files) != 0 {
		t.Errorf("remaining after the reject: %+v %v", d.Files, err)
	}

	var dr DiscardResult
	if err := c.Call(ctx, MethodSessionDiscard, &DiscardParams{ID: s.ID}, &dr); err != nil {
		t.Fatal(err)
	}
	// Only the fork's branch holds the rest of the session's commits, and a session branch is
	// discarded the same way: the work is archived.
	if dr.Session.State.String() != StateStopped || !dr.WorktreeRemoved || !dr.BranchDeleted || dr.Archived == "" ||
		!dr.Session.Discarded || dr.Session.Archived != dr.Archived {
		t.Errorf("discard: %+v", dr)
	}
	if err := c.Call(ctx, MethodSessionDiscard, &DiscardParams{ID: f.ID}, &dr); err != nil {
		t.Fatal(err)
	}
	if dr.Archived != "refs/arbor/archive/"+f.Branch {
		t.Errorf("discarding the fork, the last holder of the work: %+v", dr)
	}
}

func dialClient(t testing.TB, sock string) *Client {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		nc, err := Dial(t.Context(), DialOptions{Socket: sock})
		if err == nil {
			c := NewClient(t.Context(), nc, nil)
			if err := c.Call(t.Context(), "initialize", map[string]any{"capabilities": map[string]any{}}, nil); err != nil {
				t.Fatal(err)
			}
			return c
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
}

// gitInit makes dir a repository with files in one commit on main. The repository names its own
// user, as a user's would: tests run with GIT_CONFIG_GLOBAL=/dev/null, and Accept and Merge
// refuse without an identity.
func gitInit(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"config", "user.name", "t"}, {"config", "user.email", "t@t"}, {"add", "."}, {"commit", "-qm", "init"}} {
		gitRun(t, dir, args...)
	}
}

func gitRun(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// modelDaemon is a real daemon on a socket over a service whose sessions call the scripted
// model of script, and a repository to work in; everything stops at the end of the test.
func modelDaemon(t *testing.T, script string) (repo string, c *Client) {
	t.Helper()
	repo, sock := modelDaemonWith(t, script, DaemonOptions{})
	return repo, dialClient(t, sock)
}

// modelDaemonWith starts the daemon with opts (Socket and Agents filled in) and returns its
// socket, for a test that dials its own clients.
func modelDaemonWith(t *testing.T, script string, opts DaemonOptions) (repo, sock string) {
	t.Helper()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	sc, err := scripted.Parse([]byte(script), t.Name())
	if err != nil {
		t.Fatal(err)
	}
	mctx, stopModel := context.WithCancel(context.Background())
	url, wait, err := scripted.Serve(mctx, "127.0.0.1:0", sc, nil)
	if err != nil {
		stopModel()
		t.Fatal(err)
	}
	repo = filepath.Join(t.TempDir(), "repo")
	gitInit(t, repo, map[string]string{"main.py": "print('hi')\n"})
	svc, err := agents.New(agents.Options{StateDir: t.TempDir(), PlainKernels: true,
		Overrides: workspace.Overrides{ModelBaseURL: url, Model: "scripted", KernelPython: "/usr/bin/python3"}})
	if err != nil {
		t.Fatal(err)
	}
	sock = filepath.Join(t.TempDir(), "arbor.sock")
	dctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	opts.Socket, opts.Agents = sock, svc
	go func() { done <- RunDaemon(dctx, opts) }()
	t.Cleanup(func() {
		stop()
		<-done
		svc.Close(context.Background())
		stopModel()
		wait()
	})
	return repo, sock
}
