package server

import (
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.lsp.dev/jsonrpc2"
)

// TestHarnessOverProtocol drives every arbor/harness.* method against a real repository and
// checks each result against the git CLI: what put writes is what `git show` reads, history
// carries the user's trailer, a stale write is refused with CodeStale naming the current
// version, a rollback is a new commit, and bad input gets InvalidParams or CodeNotFound with a
// message naming what exists.
func TestHarnessOverProtocol(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	d := startTestDaemon(t, "")
	repo := filepath.Join(t.TempDir(), "repo")
	gitInit(t, repo, map[string]string{"main.py": "print('hi')\n"})
	c := dialClient(t, d.sock)
	ctx := t.Context()
	ws := HarnessScope{Dir: repo}
	rpcErr := func(err error, code int64, text string) *jsonrpc2.Error {
		t.Helper()
		var e *jsonrpc2.Error
		if !errors.As(err, &e) {
			t.Fatalf("want a JSON-RPC error %d, got %v", code, err)
		}
		if int64(e.Code) != code || !strings.Contains(e.Message, text) {
			t.Fatalf("error %d %q, want %d containing %q", e.Code, e.Message, code, text)
		}
		return e
	}

	note := HarnessEntry{Kind: "note", ID: "tests-first", Title: "Run the tests first", Body: "Before changing code, run the tests."}
	v1, err := HarnessPut.Call(ctx, c, HarnessPutParams{HarnessScope: ws, Entry: note})
	if err != nil || len(v1.Version) != 40 || v1.Unchanged {
		t.Fatalf("put = %+v, %v", v1, err)
	}
	if got := gitRun(t, repo, "show", "refs/arbor/harness/workspace:notes/tests-first.md"); got != "# Run the tests first\n\nBefore changing code, run the tests.\n" {
		t.Fatalf("git show of the note: %q", got)
	}
	if got := strings.TrimSpace(gitRun(t, repo, "log", "-1", "--format=%(trailers:key=Arbor-Author,valueonly)", "refs/arbor/harness/workspace")); got != "user" {
		t.Fatalf("author trailer %q, want user", got)
	}
	got, err := HarnessGet.Call(ctx, c, HarnessGetParams{HarnessScope: ws, Kind: "notes", ID: "tests-first"})
	if err != nil || got.Title != note.Title || got.Body != note.Body || got.Version != v1.Version || got.Kind != "note" {
		t.Fatalf("get = %+v, %v", got, err)
	}

	// Creating what exists, and updating from a version no longer current, are both stale.
	_, err = HarnessPut.Call(ctx, c, HarnessPutParams{HarnessScope: ws, Entry: note})
	rpcErr(err, CodeStale, "already exists")
	edited := note
	edited.Body = "Run `make test` before changing code."
	v2, err := HarnessPut.Call(ctx, c, HarnessPutParams{HarnessScope: ws, Entry: edited, Base: v1.Version})
	if err != nil || v2.Version == v1.Version {
		t.Fatalf("update = %+v, %v", v2, err)
	}
	edited.Body = "a concurrent edit"
	_, err = HarnessPut.Call(ctx, c, HarnessPutParams{HarnessScope: ws, Entry: edited, Base: v1.Version})
	e := rpcErr(err, CodeStale, v2.Version[:12])
	var stale HarnessStale
	if e.Data == nil || json.Unmarshal(*e.Data, &stale) != nil || stale.Current != v2.Version || stale.Read != v1.Version || stale.ID != "tests-first" {
		t.Fatalf("stale data %v: %+v", e.Data, stale)
	}
	// Storing what is there is no new version; an abbreviated base is accepted.
	edited.Body = "Run `make test` before changing code."
	same, err := HarnessPut.Call(ctx, c, HarnessPutParams{HarnessScope: ws, Entry: edited, Base: v2.Version[:12]})
	if err != nil || same.Version != v2.Version || !same.Unchanged {
		t.Fatalf("put of the same = %+v, %v", same, err)
	}

	old, err := HarnessGet.Call(ctx, c, HarnessGetParams{HarnessScope: ws, Kind: "note", ID: "tests-first", Version: v1.Version[:10]})
	if err != nil || old.Body != note.Body || old.Version != v1.Version {
		t.Fatalf("get at v1 = %+v, %v", old, err)
	}
	hist, err := HarnessHistory.Call(ctx, c, HarnessHistoryParams{HarnessScope: ws, Kind: "note", ID: "tests-first"})
	if err != nil || len(hist.Versions) != 2 || hist.Versions[0].Commit != v2.Version || hist.Versions[1].Commit != v1.Version ||
		hist.Versions[0].Change.Author != "user" || !strings.HasPrefix(hist.Versions[1].Subject, "create note tests-first") {
		t.Fatalf("history = %+v, %v", hist, err)
	}
	diff, err := HarnessDiff.Call(ctx, c, HarnessDiffParams{HarnessScope: ws, Kind: "note", ID: "tests-first", From: v1.Version})
	if err != nil || diff.From != v1.Version || diff.To != v2.Version ||
		!strings.Contains(diff.Patch, "-Before changing code, run the tests.") || !strings.Contains(diff.Patch, "+Run `make test` before changing code.") {
		t.Fatalf("diff = %+v, %v", diff, err)
	}
	if want := gitRun(t, repo, "diff", v1.Version, v2.Version, "--", "notes/tests-first.md"); diff.Patch != want {
		t.Fatalf("diff differs from git's:\n%s\nwant:\n%s", diff.Patch, want)
	}

	rb, err := HarnessRollback.Call(ctx, c, HarnessRollbackParams{HarnessScope: ws, Kind: "note", ID: "tests-first", Version: v1.Version})
	if err != nil || rb.Version == v2.Version || rb.Unchanged {
		t.Fatalf("rollback = %+v, %v", rb, err)
	}
	if got := gitRun(t, repo, "show", "refs/arbor/harness/workspace:notes/tests-first.md"); !strings.Contains(got, note.Body) {
		t.Fatalf("after rollback git shows %q", got)
	}
	if n := strings.Count(gitRun(t, repo, "log", "--format=%H", "refs/arbor/harness/workspace"), "\n"); n != 3 {
		t.Fatalf("%d commits after the rollback, want 3 (history is never rewritten)", n)
	}
	again, err := HarnessRollback.Call(ctx, c, HarnessRollbackParams{HarnessScope: ws, Kind: "note", ID: "tests-first", Version: v1.Version})
	if err != nil || !again.Unchanged {
		t.Fatalf("rollback to what is there = %+v, %v", again, err)
	}

	skill := HarnessEntry{Kind: "skill", ID: "fmt_check", Title: "Check formatting", Body: "Runs gofmt -l.", Module: "def run():\n    return 0\n"}
	agent := HarnessEntry{Kind: "subagent", ID: "reviewer", Title: "Reviewer", Spec: &HarnessSpec{Instructions: "Review the diff.", Model: "m", MaxTurnSteps: 3}}
	for _, en := range []HarnessEntry{skill, agent, {Kind: "memory", ID: "layout", Title: "Layout", Body: "Code lives in src/."}} {
		if _, err := HarnessPut.Call(ctx, c, HarnessPutParams{HarnessScope: ws, Entry: en}); err != nil {
			t.Fatalf("put %s: %v", en.ID, err)
		}
	}
	list, err := HarnessList.Call(ctx, c, HarnessListParams{HarnessScope: ws})
	var ids []string
	for _, en := range list.Entries {
		ids = append(ids, en.Kind+"/"+en.ID)
	}
	if err != nil || strings.Join(ids, " ") != "note/tests-first memory/layout skill/fmt_check subagent/reviewer" ||
		list.Scope != "workspace" || list.Ref != "refs/arbor/harness/workspace" || list.Head == "" {
		t.Fatalf("list = %v %+v, %v", ids, list, err)
	}
	if list.Entries[3].Spec == nil || *list.Entries[3].Spec != *agent.Spec || list.Entries[2].Module != skill.Module {
		t.Fatalf("list lost content: %+v", list.Entries)
	}
	if notes, err := HarnessList.Call(ctx, c, HarnessListParams{HarnessScope: ws, Kind: "memory"}); err != nil || len(notes.Entries) != 1 {
		t.Fatalf("list of memories = %+v, %v", notes, err)
	}

	cur, _ := HarnessGet.Call(ctx, c, HarnessGetParams{HarnessScope: ws, Kind: "note", ID: "tests-first"})
	del, err := HarnessDelete.Call(ctx, c, HarnessDeleteParams{HarnessScope: ws, Kind: "note", ID: "tests-first", Base: cur.Version})
	if err != nil || del.Version == "" {
		t.Fatalf("delete = %+v, %v", del, err)
	}
	if out, err := exec.Command("git", "-C", repo, "cat-file", "-e", "refs/arbor/harness/workspace:notes/tests-first.md").CombinedOutput(); err == nil {
		t.Fatalf("the note is still in the tree after delete: %s", out)
	}
	_, err = HarnessGet.Call(ctx, c, HarnessGetParams{HarnessScope: ws, Kind: "memory", ID: "nope"})
	rpcErr(err, CodeNotFound, "has memory entries layout")
	_, err = HarnessGet.Call(ctx, c, HarnessGetParams{HarnessScope: ws, Kind: "note", ID: "tests-first"})
	rpcErr(err, CodeNotFound, "has no note entries")
	_, err = HarnessDelete.Call(ctx, c, HarnessDeleteParams{HarnessScope: ws, Kind: "note", ID: "tests-first", Base: cur.Version})
	rpcErr(err, CodeStale, "was deleted")

	// Bad input: each names what was wrong.
	_, err = HarnessGet.Call(ctx, c, HarnessGetParams{HarnessScope: ws, Kind: "rule", ID: "x"})
	rpcErr(err, int64(jsonrpc2.InvalidParams), "want note, memory, skill or subagent")
	_, err = HarnessList.Call(ctx, c, HarnessListParams{HarnessScope: HarnessScope{Dir: repo, Scope: "team"}})
	rpcErr(err, int64(jsonrpc2.InvalidParams), "want session, workspace or global")
	_, err = HarnessPut.Call(ctx, c, HarnessPutParams{HarnessScope: ws, Entry: HarnessEntry{Kind: "note", ID: "Bad Id", Title: "t", Body: "b"}})
	rpcErr(err, int64(jsonrpc2.InvalidParams), "an id is")
	_, err = HarnessPut.Call(ctx, c, HarnessPutParams{HarnessScope: ws, Entry: HarnessEntry{Kind: "note", ID: "big", Title: "t", Body: strings.Repeat("x", 70<<10)}})
	rpcErr(err, int64(jsonrpc2.InvalidParams), "over the limit")
	_, err = HarnessGet.Call(ctx, c, HarnessGetParams{HarnessScope: ws, Kind: "note", ID: "x", Version: "deadbeef"})
	rpcErr(err, CodeNotFound, `no version "deadbeef" in the workspace harness`)
	// A commit of the repository is no version of its harness, though they share objects.
	repoHead := strings.TrimSpace(gitRun(t, repo, "rev-parse", "HEAD"))
	_, err = HarnessRollback.Call(ctx, c, HarnessRollbackParams{HarnessScope: ws, Kind: "note", ID: "x", Version: repoHead})
	rpcErr(err, CodeNotFound, "no version")
	_, err = HarnessHistory.Call(ctx, c, HarnessHistoryParams{HarnessScope: ws, Kind: "note"})
	rpcErr(err, int64(jsonrpc2.InvalidParams), "by kind and id")
	all, err := HarnessHistory.Call(ctx, c, HarnessHistoryParams{HarnessScope: ws})
	if n := strings.Count(gitRun(t, repo, "log", "--format=%H", "refs/arbor/harness/workspace"), "\n"); err != nil || len(all.Versions) != n || all.Versions[0].Commit != del.Version {
		t.Fatalf("scope history = %d versions (git log: %d), %v", len(all.Versions), n, err)
	}
	whole, err := HarnessDiff.Call(ctx, c, HarnessDiffParams{HarnessScope: ws})
	if err != nil || !strings.Contains(whole.Patch, "+++ b/memories/layout.md") || !strings.Contains(whole.Patch, "+++ b/subagents/reviewer.json") {
		t.Fatalf("diff of the whole scope from its start = %+v, %v", whole, err)
	}
	_, err = HarnessList.Call(ctx, c, HarnessListParams{HarnessScope: HarnessScope{Scope: "session"}})
	rpcErr(err, int64(jsonrpc2.InvalidParams), "needs a session id")
	_, err = HarnessList.Call(ctx, c, HarnessListParams{HarnessScope: HarnessScope{Scope: "session", Session: "nosuch"}})
	rpcErr(err, CodeUnknownSession, "nosuch")
	_, err = HarnessList.Call(ctx, c, HarnessListParams{HarnessScope: HarnessScope{Dir: t.TempDir()}})
	rpcErr(err, CodeNotRepository, "")

	// The global scope lives outside any repository.
	g := HarnessScope{Scope: "global"}
	if _, err := HarnessPut.Call(ctx, c, HarnessPutParams{HarnessScope: g, Entry: note}); err != nil {
		t.Fatalf("global put: %v", err)
	}
	gl, err := HarnessList.Call(ctx, c, HarnessListParams{HarnessScope: g})
	if err != nil || len(gl.Entries) != 1 || gl.Ref != "refs/arbor/harness/global" {
		t.Fatalf("global list = %+v, %v", gl, err)
	}
	if wl, _ := HarnessList.Call(ctx, c, HarnessListParams{HarnessScope: ws, Kind: "note"}); len(wl.Entries) != 0 {
		t.Fatalf("the global note shows in the workspace scope: %+v", wl.Entries)
	}
}
