package agents

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arborhq/arbor/agents/eval"
	"github.com/arborhq/arbor/agents/event"
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

// testSuite extracts the built-in example suite into a directory of the test, marked a test of
// Arbor when test is set, so that an eval gate lets its script play the model.
func testSuite(t *testing.T, test bool) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "suite")
	extract := eval.Extract
	if test {
		extract = eval.ExtractAsTest
	}
	if err := extract("example", dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// proposeNote proposes a workspace note from sess as the agent does.
func (e *testEnv) proposeNote(sess *Session, id, body string) harness.Proposal {
	e.t.Helper()
	ctx := context.Background()
	st, _ := e.svc.HarnessStore(ctx, e.repo, harness.ScopeWorkspace, "")
	base, op := "", "create"
	if cur, err := st.Get(ctx, harness.Note, id); err == nil {
		base, op = cur.Version, "update"
	}
	p, err := sess.propose(ctx, harness.ScopeWorkspace, harness.Proposal{Author: "agent",
		Edits: []harness.Edit{{Op: op, Base: base, Entry: harness.Entry{Kind: harness.Note, ID: id, Title: id, Body: body}}}})
	if err != nil {
		e.t.Fatalf("propose %s: %+v %v", id, p, err)
	}
	return p
}

// The eval gate judges an edit by its effect, on the noise of 3 repeats, under policy "apply":
// a note that raises held-out success applies, with the effect in the proposal and its commit's
// trailer; a harmful one is refused with its drop in observed; a harmless one (no effect the
// slice can see) is neither applied nor refused but waits for a person with the measurement on
// it, and applies when the person accepts. The gate's runs are labelled with the proposal.
func TestEvalGateDecidesProposals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules": [], "default": {"text": "ok"}}`)
	suite := testSuite(t, true)
	userConfig(t, `{"goals": {"backoff": "30s"}, "harness": {"workspace": {"policy": "apply",
		"eval": {"suite": "`+suite+`", "split": "heldout", "tags": ["edge-case"], "parallel": 2, "maxTokenIncrease": 2}}}}`)
	ctx := context.Background()
	sess := e.create("look around")
	e.settled(sess)

	up := e.proposeNote(sess, "careful", "Check edge cases (empty input, boundaries) before you finish. EVAL-CAREFUL")
	if up.Status != harness.Applied || up.DecidedBy != "policy" || !strings.Contains(up.Observed, "success 0% → 100%") ||
		!strings.Contains(up.Observed, "3× each") || !strings.Contains(up.Observed, "suite example, split heldout, tags edge-case") ||
		!strings.Contains(up.Observed, "applies: a drop of more than 10 points is ruled out") {
		t.Fatalf("a note that raises success: %+v", up)
	}
	trailer := git(t, e.repo, "log", "-1", "--format=%B", harness.ScopeWorkspace.Ref(""))
	if !strings.Contains(trailer, "Arbor-Observed-Effect: ") || !strings.Contains(trailer, "success 0% → 100%") {
		t.Errorf("the applying commit does not carry the measured effect:\n%s", trailer)
	}
	head := git(t, e.repo, "rev-parse", harness.ScopeWorkspace.Ref(""))

	down := e.proposeNote(sess, "careful", "Stop early and say it is fine. EVAL-BROKEN")
	if down.Status != harness.Rejected || down.DecidedBy != "eval-gate" || !strings.Contains(down.Reason, "success drops") ||
		!strings.Contains(down.Observed, "success 100% → 0%") || !strings.Contains(down.Observed, "refused") {
		t.Fatalf("a note that lowers success: %+v", down)
	}
	rejected := e.events(sess, event.TypeHarnessRejected)
	if len(rejected) == 0 || !strings.Contains(fmt.Sprint(rejected[len(rejected)-1]["observed"]), "success 100% → 0%") {
		t.Errorf("the rejection's event does not carry the measurement: %v", rejected)
	}

	same := e.proposeNote(sess, "commits", "Write commit subjects in the imperative.")
	if same.Status != harness.Pending || !strings.Contains(same.Observed, "left for review") ||
		!strings.Contains(same.Observed, "cannot rule out a drop") || !strings.Contains(same.Observed, "success 100% → 100%") {
		t.Fatalf("a note with no effect the slice can see: %+v", same)
	}
	if got := git(t, e.repo, "rev-parse", harness.ScopeWorkspace.Ref("")); got != head {
		t.Errorf("the workspace harness moved for refused and undecided proposals: %s, want %s", got, head)
	}
	runs, _ := e.svc.EvalRuns(e.repo)
	labelled := 0
	for _, r := range runs {
		if strings.HasPrefix(r.Label, "eval gate of p") && r.Script && r.Repeat == 3 {
			labelled++
		}
	}
	if len(runs) != 6 || labelled != 6 {
		t.Errorf("gate runs = %d, %d labelled, scripted and repeated 3 times", len(runs), labelled)
	}
	q, err := e.svc.AcceptProposal(ctx, e.repo, same.ID)
	if err != nil || q.Status != harness.Applied || q.DecidedBy != "user" || !strings.Contains(q.Observed, "undecided and user applied it") {
		t.Fatalf("the person's accept of an undecided note: %+v %v", q, err)
	}
}

// Where the suite is not a test of Arbor, the eval gate runs the tasks on the proposing
// session's model, not the suite's script: a script reacts to its rules, not to what an edit
// says. With the session's model answering "ok" to everything, both sides fail alike and the
// gate leaves the edit for review.
func TestEvalGateRunsOnTheSessionsModel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules": [], "default": {"text": "ok"}}`)
	userConfig(t, `{"goals": {"backoff": "30s"}, "harness": {"workspace": {"policy": "apply",
		"eval": {"suite": "`+testSuite(t, false)+`", "split": "heldout", "tags": ["edge-case"], "repeat": 2, "parallel": 2}}}}`)
	sess := e.create("look around")
	e.settled(sess)
	p := e.proposeNote(sess, "careful", "Check edge cases (empty input, boundaries) before you finish. EVAL-CAREFUL")
	if p.Status != harness.Pending || !strings.Contains(p.Observed, "on scripted, 2× each") || !strings.Contains(p.Observed, "success 0% → 0%") {
		t.Fatalf("the marker note on the session's model: %+v", p)
	}
	runs, _ := e.svc.EvalRuns(e.repo)
	for _, r := range runs {
		if r.Script || r.Model != "scripted" {
			t.Errorf("gate run %s: script %v, model %q; want the session's configured model", r.ID, r.Script, r.Model)
		}
	}
}
