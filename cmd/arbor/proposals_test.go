package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const proposalScript = `{"rules":[
 {"when":{"task":"^share a rule","turn":1},"code":"p = await harness.notes.create('team-rule', 'Team rule', body='Run the tests. Use python3 -m pytest tests/ before you claim.', scope='workspace')\nprint(p['status'], p['proposal'])"},
 {"when":{"task":"^share another","turn":1},"code":"p = await harness.memories.create('db-port', 'The test database', body='It listens on 5433.', scope='workspace')\nprint(p['status'], p['proposal'])"},
 {"when":{"task":"^share"},"text":"proposed"}
],"default":{"text":"ok"}}`

type proposalJSON struct {
	ID, Scope, Author, Session, Status, Reason, DecidedBy, Applied, Diff string
}

// TestProposalsCLI: model code's write to the shared workspace harness waits for review; the
// user lists it, reads its diff, and decides with the real binary. A kill -9 of the daemon
// while it is pending loses nothing and applies nothing; after the restart it is accepted
// once (one commit, carrying its id), a second accept is refused; another proposal is rejected
// with a reason, which the session's log shows.
func TestProposalsCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	script := filepath.Join(e.root, "proposals.json")
	writeFile(t, script, proposalScript)
	fm, url, err := startFakeModel(script)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { fm.Process.Kill(); fm.Wait() }()
	e.vars["ARBOR_MODEL_BASE_URL"] = url
	const ref = "refs/arbor/harness/workspace"

	id := sessionID(t, e.mustArbor("run", "share a rule with the team"))
	pending := func() []proposalJSON {
		t.Helper()
		var ps []proposalJSON
		if err := json.Unmarshal([]byte(e.mustArbor("proposals", "--json").stdout), &ps); err != nil {
			t.Fatal(err)
		}
		return ps
	}
	ps := pending()
	if len(ps) != 1 || ps[0].Scope != "workspace" || ps[0].Author != "agent" || ps[0].Session != id || ps[0].Status != "pending" {
		t.Fatalf("pending = %+v", ps)
	}
	pid := ps[0].ID
	if out := e.mustArbor("proposals").stdout; !strings.Contains(out, pid) || !strings.Contains(out, "create note team-rule") || !strings.Contains(out, "arbor proposals accept|reject PID") {
		t.Errorf("proposals:\n%s", out)
	}
	if out := e.mustArbor("proposals", pid).stdout; !strings.Contains(out, "+Run the tests.") || !strings.Contains(out, "notes/team-rule.md") || !strings.Contains(out, "session "+id) ||
		!strings.Contains(out, "advice:   note team-rule names tests/, a path the checks rely on") {
		// A note naming the tests is advice for the reviewer, not a refusal: it waits, as any.
		t.Errorf("proposals %s:\n%s", pid, out)
	}
	if got := e.git(e.repo, "for-each-ref", ref); got != "" {
		t.Fatalf("the pending proposal moved the workspace ref: %s", got)
	}

	// kill -9 while it is pending; the next command starts a daemon that still has it.
	pidDaemon := e.daemonPID()
	syscall.Kill(pidDaemon, syscall.SIGKILL)
	eventually(t, "the killed daemon to be gone", func() bool { return syscall.Kill(pidDaemon, 0) != nil })
	if ps := pending(); len(ps) != 1 || ps[0].ID != pid || ps[0].Status != "pending" {
		t.Fatalf("after kill -9: %+v", ps)
	}
	if got := e.git(e.repo, "for-each-ref", ref); got != "" {
		t.Fatalf("applied by the restart: %s", got)
	}
	out := e.mustArbor("proposals", "accept", pid).stdout
	if !strings.Contains(out, pid+" applied to the workspace harness") {
		t.Fatalf("accept:\n%s", out)
	}
	if n := strings.Count(e.git(e.repo, "log", "--format=%H", ref), "\n"); n != 1 {
		t.Fatalf("%d commits on the workspace harness, want 1", n)
	}
	if tr := e.git(e.repo, "log", "-1", "--format=%(trailers)", ref); !strings.Contains(tr, "Arbor-Proposal: "+pid) || !strings.Contains(tr, "Arbor-Author: agent") || !strings.Contains(tr, "Arbor-Session: "+id) {
		t.Errorf("trailers:\n%s", tr)
	}
	if got := e.mustArbor("harness", "show", "note", "team-rule").stdout; !strings.Contains(got, "Run the tests.") {
		t.Errorf("the accepted note: %q", got)
	}
	if r := e.arbor("proposals", "accept", pid); r.code == 0 || !strings.Contains(r.stderr, "already decided") {
		t.Errorf("second accept:\n%s", r)
	}
	if n := strings.Count(e.git(e.repo, "log", "--format=%H", ref), "\n"); n != 1 {
		t.Fatalf("a second accept applied again: %d commits", n)
	}

	if tree := e.mustArbor("tree").stdout; !strings.Contains(tree, "harness edits 1") {
		t.Errorf("the accepted proposal is not counted as the session's harness edit:\n%s", tree)
	}

	// Reject, with a reason, from the CLI.
	id2 := sessionID(t, e.mustArbor("run", "share another fact"))
	ps = pending()
	if len(ps) != 1 || ps[0].Session != id2 {
		t.Fatalf("pending = %+v", ps)
	}
	if out := e.mustArbor("proposals", "reject", ps[0].ID, "--reason", "not for this team").stdout; !strings.Contains(out, "rejected: not for this team") {
		t.Errorf("reject:\n%s", out)
	}
	var all []proposalJSON
	json.Unmarshal([]byte(e.mustArbor("proposals", "--status", "all", "--json").stdout), &all)
	if len(all) != 2 || all[0].Status != "rejected" || all[0].DecidedBy != "user" || all[1].Status != "applied" {
		t.Errorf("all = %+v", all)
	}
	if log := e.mustArbor("log", id2).stdout; !strings.Contains(log, "rejected by user: not for this team") || !strings.Contains(log, "waiting for review") {
		t.Errorf("the session's log:\n%s", log)
	}
	if got := e.git(e.repo, "ls-tree", "-r", "--name-only", ref); strings.Contains(got, "db-port") {
		t.Errorf("the rejected memory is in the harness: %s", got)
	}
	// Bad input is named.
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"proposals", "accept", "p00000000"}, "no such proposal"},
		{[]string{"proposals", "reject", "../etc"}, "a proposal id looks like"},
		{[]string{"proposals", "--status", "maybe"}, "want pending, applied, rejected or all"},
		{[]string{"refine", "nosuchsession"}, "nosuchsession"},
	} {
		if r := e.arbor(bad.args...); r.code == 0 || !strings.Contains(r.stderr, bad.want) {
			t.Errorf("arbor %v: want an error naming %q:\n%s", bad.args, bad.want, r)
		}
	}
}
