package harness

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func proposeNote(t *testing.T, st *Store, id, body, base string) Proposal {
	t.Helper()
	op := "create"
	if base != "" {
		op = "update"
	}
	p := Proposal{Author: "refine", Session: "s1", Turn: 2, Trigger: []uint64{7, 9}, Rationale: "the tests were skipped twice",
		Intended: "the tests run first", Edits: []Edit{{Op: op, Base: base, Entry: Entry{Kind: Note, ID: id, Title: "Tests first", Body: body}}}}
	if err := st.Propose(t.Context(), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProposalPendingThenApplied(t *testing.T) {
	t.Parallel()
	st, repo := newRepoStore(t)
	ctx := t.Context()
	p := proposeNote(t, st, "tests-first", "Run the tests before each commit.", "")
	if p.Status != Pending || p.Commit == "" || p.Scope != ScopeWorkspace || !strings.HasPrefix(p.ID, "p") {
		t.Fatalf("proposal = %+v", p)
	}
	// Pending changes nothing of the scope; the diff is there for review, and git sees it.
	if h, _ := st.Head(ctx); h != "" {
		t.Fatalf("head moved to %s by a proposal", h)
	}
	d, err := st.ProposalDiff(ctx, p)
	if err != nil || !strings.Contains(d, "+Run the tests before each commit.") || !strings.Contains(d, "notes/tests-first.md") {
		t.Fatalf("diff = %q, %v", d, err)
	}
	if s := gitOut(t, repo, "show", "refs/arbor/proposals/"+p.ID+":notes/tests-first.md"); !strings.Contains(s, "Run the tests") {
		t.Errorf("git show of the proposal ref = %q", s)
	}
	ps, err := st.Proposals(ctx, Pending)
	if err != nil || len(ps) != 1 || ps[0].ID != p.ID {
		t.Fatalf("pending = %+v, %v", ps, err)
	}
	v := &Verdict{Command: "true", Passed: true, DurationMs: 12}
	got, err := st.ApplyProposal(ctx, p.ID, "user", v, v.Summary())
	if err != nil || got.Status != Applied || got.Applied == "" || got.DecidedBy != "user" {
		t.Fatalf("apply = %+v, %v", got, err)
	}
	e, err := st.Get(ctx, Note, "tests-first")
	if err != nil || e.Version != got.Applied {
		t.Fatalf("entry = %+v, %v; want version %s", e, err, got.Applied)
	}
	tr := gitOut(t, repo, "log", "-1", "--format=%(trailers)", "refs/arbor/harness/workspace")
	for _, want := range []string{"Arbor-Author: refine", "Arbor-Trigger: 7,9", "Arbor-Proposal: " + p.ID, "Arbor-Observed-Effect: branch check `true` passed"} {
		if !strings.Contains(tr, want) {
			t.Errorf("trailers %q lack %q", tr, want)
		}
	}
	// Decided once.
	if _, err := st.ApplyProposal(ctx, p.ID, "user", nil, ""); !errors.Is(err, ErrDecided) {
		t.Fatalf("second apply: %v, want ErrDecided", err)
	}
	if _, err := st.RejectProposal(ctx, p.ID, "user", "no", "", nil); !errors.Is(err, ErrDecided) {
		t.Fatalf("reject after apply: %v, want ErrDecided", err)
	}
}

func TestProposalRejectedAndStale(t *testing.T) {
	t.Parallel()
	st, _ := newRepoStore(t)
	ctx := t.Context()
	v1, err := st.Put(ctx, Entry{Kind: Note, ID: "n", Title: "T", Body: "one"}, "", user)
	if err != nil {
		t.Fatal(err)
	}
	p := proposeNote(t, st, "n", "two", v1)
	r := proposeNote(t, st, "n", "three", v1)
	got, err := st.RejectProposal(ctx, r.ID, "gate", "the gate failed", "", &Verdict{Command: "make test", ExitCode: 2})
	if err != nil || got.Status != Rejected || got.Reason != "the gate failed" || !strings.Contains(got.Observed, "failed (exit 2)") {
		t.Fatalf("reject = %+v, %v", got, err)
	}
	// The entry changes under the pending proposal: applying it is refused as stale, and it
	// stays pending.
	if _, err := st.Put(ctx, Entry{Kind: Note, ID: "n", Title: "T", Body: "edited by the user"}, v1, user); err != nil {
		t.Fatal(err)
	}
	var stale *StaleError
	if _, err := st.ApplyProposal(ctx, p.ID, "user", nil, ""); !errors.As(err, &stale) {
		t.Fatalf("apply of a stale proposal: %v, want a StaleError", err)
	}
	if q, _ := st.Proposal(ctx, p.ID); q.Status != Pending {
		t.Fatalf("after a stale apply: %s, want pending", q.Status)
	}
	// Bad input, named.
	if err := st.Propose(ctx, &Proposal{Author: "refine"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty proposal: %v", err)
	}
	if err := st.Propose(ctx, &Proposal{Author: "refine", Edits: []Edit{{Op: "create", Entry: Entry{Kind: Skill, ID: "s", Title: "S"}}}}); err == nil || !strings.Contains(err.Error(), "edit 1") {
		t.Errorf("skill without a module: %v", err)
	}
	if _, err := st.Proposal(ctx, "../../etc"); !errors.Is(err, ErrNoProposal) {
		t.Errorf("path as an id: %v", err)
	}
	if _, err := st.Proposal(ctx, "p00000000"); !errors.Is(err, ErrNoProposal) || !strings.Contains(err.Error(), "p00000000") {
		t.Errorf("unknown id: %v", err)
	}
}

// A crash between the scope's commit and the proposal's record (the daemon killed there) must
// neither lose the application nor apply it twice: the trailer finds it.
func TestProposalCrashBetweenCommitAndRecord(t *testing.T) {
	t.Parallel()
	st, _ := newRepoStore(t)
	ctx := t.Context()
	p := proposeNote(t, st, "n", "body", "")
	applied, err := st.ApplyProposal(ctx, p.ID, "policy", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	// Put the record back as ApplyProposal saved it just before its commit: what a kill -9
	// after update-ref leaves.
	before := applied
	before.Status, before.Applied, before.Decided = Pending, "", time.Time{}
	if err := st.saveProposal(before); err != nil {
		t.Fatal(err)
	}
	head, _ := st.Head(ctx)
	st2, _ := Open(st.gitDir, st.ref) // a restarted daemon
	got, err := st2.Proposal(ctx, p.ID)
	if err != nil || got.Status != Applied || got.Applied != applied.Applied || got.DecidedBy != "policy" {
		t.Fatalf("after the crash: %+v, %v; want applied by %s", got, err, applied.Applied)
	}
	if _, err := st2.ApplyProposal(ctx, p.ID, "user", nil, ""); !errors.Is(err, ErrDecided) {
		t.Fatalf("apply again: %v", err)
	}
	if h, _ := st2.Head(ctx); h != head {
		t.Fatalf("head moved from %s to %s: applied twice", head, h)
	}
}

// Concurrent decisions on one proposal: exactly one wins.
func TestProposalDecidedOnceUnderRace(t *testing.T) {
	t.Parallel()
	st, _ := newRepoStore(t)
	ctx := t.Context()
	p := proposeNote(t, st, "n", "body", "")
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, _ := Open(st.gitDir, st.ref)
			var err error
			if i%2 == 0 {
				_, err = s.ApplyProposal(ctx, p.ID, "user", nil, "")
			} else {
				_, err = s.RejectProposal(ctx, p.ID, "user", "no", "", nil)
			}
			if err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			} else if !errors.Is(err, ErrDecided) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d decisions won, want 1", wins)
	}
	hist, _ := st.History(ctx, "", "")
	if len(hist) > 1 {
		t.Fatalf("%d commits on the scope, want at most 1", len(hist))
	}
}
