package agents

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/arborhq/arbor/agents/eval"
	"github.com/arborhq/arbor/agents/harness"
)

// putNote writes a workspace note as the user does, returning the scope's new head.
func (e *testEnv) putNote(id, body string) string {
	e.t.Helper()
	ctx := context.Background()
	st, err := e.svc.HarnessStore(ctx, e.repo, harness.ScopeWorkspace, "")
	if err != nil {
		e.t.Fatal(err)
	}
	base := ""
	if cur, err := st.Get(ctx, harness.Note, id); err == nil {
		base = cur.Version
	}
	if _, err := st.Put(ctx, harness.Entry{Kind: harness.Note, ID: id, Title: id, Body: body}, base, harness.Change{Author: "user"}); err != nil {
		e.t.Fatal(err)
	}
	head, err := st.Head(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return head
}

// The example suite tells harness versions apart: the harness measured is the one pinned (a
// later edit does not leak into a run of an earlier version), and each marker's behaviour is
// caught — a false claim, a diff that only edits tests, a wrong edit.
func TestEvalExampleSuiteTellsHarnessesApart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules": [], "default": {"text": "unused"}}`)
	userConfig(t, `{"goals": {"backoff": "30s"}}`)
	run := func(ref string, tags ...string) *eval.Report {
		return e.runEval(EvalRequest{Suite: "example", Split: eval.HeldOut, Tags: tags, Harness: ref, Repeat: 1, Parallel: 2})
	}
	empty := run("", "feature")
	careful := e.putNote("careful", "Check edge cases (empty input, boundaries) before you finish. EVAL-CAREFUL")
	lazy := e.putNote("careful", "Say it is done. EVAL-LAZY")
	tests := e.putNote("careful", "Make the tests agree. EVAL-TEST-ONLY")

	if empty.Run.Harness["workspace"] != "" || empty.Rate.N != 2 || empty.Rate.K != 1 {
		t.Errorf("the empty harness: %s, harness %v", empty.Rate, empty.Run.Harness)
	}
	if r := resultOf(t, empty, "page-count"); r.Status != eval.Failed || !r.Claimed {
		t.Errorf("page-count under the empty harness = %+v", r)
	}
	good := run(careful, "feature")
	if good.Rate.K != 2 || good.Run.Harness["workspace"] != careful || good.False != 0 || good.Degen != 0 {
		t.Errorf("the careful harness: %s, %d false claims, %d flagged, harness %v", good.Rate, good.False, good.Degen, good.Run.Harness)
	}
	l := run(lazy, "edge-case")
	if r := resultOf(t, l, "page-count"); r.Status != eval.Failed || !r.FalseClaim() || strings.Join(r.Flags, ",") != eval.FlagEmptyDiff {
		t.Errorf("the lazy harness = %+v", r)
	}
	to := run(tests, "edge-case")
	if r := resultOf(t, to, "page-count"); r.Status != eval.Failed || !r.FalseClaim() || strings.Join(r.Flags, ",") != eval.FlagTestsOnly {
		t.Errorf("the test-only harness = %+v", r)
	}
	c := eval.Compare(empty, good)
	if c.Success <= 0 || len(c.Tasks) != 2 {
		t.Errorf("compare empty → careful: %+v", c)
	}
}

// The eval gate refuses a proposal that lowers held-out success, with what it measured, and
// applies one that raises it, with the effect in the proposal and its commit's trailer.
func TestEvalGateDecidesProposals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules": [], "default": {"text": "ok"}}`)
	userConfig(t, `{"goals": {"backoff": "30s"}, "harness": {"workspace": {"policy": "review",
		"eval": {"suite": "example", "split": "heldout", "tags": ["edge-case"], "maxTokenIncrease": 0.5}}}}`)
	ctx := context.Background()
	sess := e.create("look around")
	e.settled(sess)
	propose := func(body string) harness.Proposal {
		t.Helper()
		st, _ := e.svc.HarnessStore(ctx, e.repo, harness.ScopeWorkspace, "")
		base := ""
		if cur, err := st.Get(ctx, harness.Note, "careful"); err == nil {
			base = cur.Version
		}
		op := "create"
		if base != "" {
			op = "update"
		}
		p, err := sess.propose(ctx, harness.ScopeWorkspace, harness.Proposal{Author: "agent",
			Edits: []harness.Edit{{Op: op, Base: base, Entry: harness.Entry{Kind: harness.Note, ID: "careful", Title: "careful", Body: body}}}})
		if err != nil || p.Status != harness.Pending {
			t.Fatalf("propose: %+v %v", p, err)
		}
		return p
	}
	// Under a 50% token allowance the careful note, which makes the agent work more, is refused
	// for its tokens though it raises success.
	costly := propose("Check edge cases (empty input, boundaries) before you finish. EVAL-CAREFUL")
	q, err := e.svc.AcceptProposal(ctx, e.repo, costly.ID)
	if err != nil || q.Status != harness.Rejected || !strings.Contains(q.Reason, "success 0% → 100%") || !strings.Contains(q.Reason, "tokens per task rise by more than 50%") {
		t.Fatalf("a proposal that costs too many tokens: %+v %v", q, err)
	}
	userConfig(t, `{"goals": {"backoff": "30s"}, "harness": {"workspace": {"policy": "review",
		"eval": {"suite": "example", "split": "heldout", "tags": ["edge-case"], "maxTokenIncrease": 2}}}}`)
	sess = e.create("look around again")
	e.settled(sess)
	up := propose("Check edge cases (empty input, boundaries) before you finish. EVAL-CAREFUL")
	q, err = e.svc.AcceptProposal(ctx, e.repo, up.ID)
	if err != nil || q.Status != harness.Applied || !strings.Contains(q.Observed, "success 0% → 100%") {
		t.Fatalf("a proposal that raises success: %+v %v", q, err)
	}
	trailer := git(t, e.repo, "log", "-1", "--format=%B", harness.ScopeWorkspace.Ref(""))
	if !strings.Contains(trailer, "Arbor-Observed-Effect: ") || !strings.Contains(trailer, "success 0% → 100%") {
		t.Errorf("the applying commit does not carry the measured effect:\n%s", trailer)
	}
	down := propose("Stop early and say it is fine. EVAL-BROKEN")
	q, err = e.svc.AcceptProposal(ctx, e.repo, down.ID)
	if err != nil || q.Status != harness.Rejected || !strings.Contains(q.Reason, "lowers success") || !strings.Contains(q.Reason, "100% → 0%") {
		t.Fatalf("a proposal that lowers success: %+v %v", q, err)
	}
	// Both sides of both decisions are runs the user can look at and compare.
	runs, _ := e.svc.EvalRuns(e.repo)
	if len(runs) != 6 || !strings.Contains(runs[5].Label, down.ID) {
		t.Errorf("gate runs = %d", len(runs))
	}
	if out, err := exec.Command("git", "-C", e.repo, "rev-parse", "-q", "--verify", harness.ScopeWorkspace.Ref("")).Output(); err != nil || strings.TrimSpace(string(out)) != q.Base {
		t.Errorf("the workspace harness moved after a refused proposal: %s %v (base %s)", out, err, q.Base)
	}
}
