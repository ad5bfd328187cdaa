package agents

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/arborhq/arbor/agents/eval"
	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/harness"
	"github.com/arborhq/arbor/workspace"
)

// Proposals: how a change to the harness that is not a direct edit of the session's own scope
// gets decided. The agent (writing a shared scope from the kernel, or any scope under a
// "review" policy) and /refine propose; the proposal is refused at once when it touches what
// the gate relies on or a skill does not import; under "review" it waits for the user
// (arbor proposals accept|reject, the editors); under "apply" the scope's gate decides it.
// Every step is an event in the proposing session's log with the commit ids.

func eventEdits(es []harness.Edit) []event.HarnessEdit {
	out := make([]event.HarnessEdit, 0, len(es))
	for _, e := range es {
		out = append(out, event.HarnessEdit{Op: e.Op, Kind: string(e.Entry.Kind), ID: e.Entry.ID, Title: e.Entry.Title})
	}
	return out
}

// eventVerdict is a gate's verdict as recorded, with the subtree's spending at that moment
// (a point of `arbor progress`).
func (s *Session) eventVerdict(v *harness.Verdict) *event.GateVerdict {
	if v == nil {
		return nil
	}
	spend := s.svc.spend(s)
	return &event.GateVerdict{Command: v.Command, Commit: v.Commit, Passed: v.Passed, ExitCode: v.ExitCode,
		DurationMs: v.DurationMs, TimedOut: v.TimedOut, Output: v.Output, Error: v.Error, Judged: v.Judged, Spend: &spend}
}

// policyFor is the session's policy for a scope.
func (s *Session) policyFor(sc harness.Scope) workspace.HarnessPolicy {
	pol := s.cfg.Harness.For(string(sc))
	if pol.Policy == "" {
		pol.Policy = workspace.Defaults().Harness.For(string(sc)).Policy
	}
	return pol
}

// maxPendingProposals bounds what one session may leave waiting for review in one scope, so
// model code in a loop cannot bury the user's review.
const maxPendingProposals = 32

func (s *Session) pendingProposals(ctx context.Context, st *harness.Store) int {
	ps, err := st.Proposals(ctx, harness.Pending)
	if err != nil {
		return 0
	}
	n := 0
	for _, p := range ps {
		if p.Session == s.meta.ID {
			n++
		}
	}
	return n
}

// propose records p (Author, Edits and provenance set) for scope sc as this session's and lets
// the scope's policy decide it. The proposal it returns says what became of it; an error means
// nothing was recorded (an invalid or stale edit), and is logged as a rejection too.
func (s *Session) propose(ctx context.Context, sc harness.Scope, p harness.Proposal) (harness.Proposal, error) {
	st, err := s.harnessStore(ctx, sc)
	if err != nil {
		return p, err
	}
	if sc == harness.ScopeGlobal && s.svc.isFixture(s.ws.Root) {
		err := fmt.Errorf("%w: an eval task cannot propose to your global harness (it is what the eval measures)", harness.ErrInvalid)
		s.append(ctx, event.HarnessRejected{Scope: string(sc), Author: p.Author, Edits: eventEdits(p.Edits), By: "validation", Reason: err.Error()})
		return p, err
	}
	pol := s.policyFor(sc)
	p.Session = s.meta.ID
	if p.Turn == 0 {
		s.mu.Lock()
		p.Turn = s.turn
		s.mu.Unlock()
	}
	if n := s.pendingProposals(ctx, st); n >= maxPendingProposals {
		err := fmt.Errorf("%w: this session has %d proposals waiting for review in the %s harness; no more until the user decides them (arbor proposals)", harness.ErrInvalid, n, sc)
		s.append(ctx, event.HarnessRejected{Scope: string(sc), Author: p.Author, Edits: eventEdits(p.Edits), By: "validation", Reason: err.Error()})
		return p, err
	}
	p.Advice = s.advice(pol, p.Edits)
	if err := st.Propose(ctx, &p); err != nil {
		s.append(ctx, event.HarnessRejected{Scope: string(sc), Author: p.Author, Edits: eventEdits(p.Edits), By: "validation", Reason: err.Error()})
		return p, err
	}
	s.append(ctx, event.HarnessProposed{Proposal: p.ID, Scope: string(sc), Author: p.Author, Edits: eventEdits(p.Edits),
		Commit: p.Commit, Base: p.Base, Trigger: p.Trigger, Rationale: p.Rationale, Intended: p.Intended, Policy: pol.Policy})
	for _, e := range p.Edits {
		if e.Op == "delete" {
			continue
		}
		if err := s.checkSkill(ctx, e.Entry); err != nil {
			return s.reject(ctx, st, p, "validation", err.Error(), "", nil)
		}
	}
	if pol.Policy != workspace.PolicyApply {
		return p, nil
	}
	return s.decideOnce(ctx, st, p, "policy")
}

// decideOnce decides p unless another decision of it is under way or done: one gate per
// proposal, however many accepts arrive at once. The later callers wait for the first and
// get ErrDecided.
func (s *Session) decideOnce(ctx context.Context, st *harness.Store, p harness.Proposal, by string) (harness.Proposal, error) {
	done := s.svc.lockProposal(p.ID)
	defer done()
	cur, err := st.Proposal(ctx, p.ID)
	if err != nil {
		return p, err
	}
	if cur.Status != harness.Pending {
		return cur, fmt.Errorf("%w: %s is %s", harness.ErrDecided, p.ID, cur.Status)
	}
	return s.decide(ctx, st, cur, by)
}

// lockProposal waits until no other decision of proposal id is under way and claims it; the
// returned func releases it.
func (s *Service) lockProposal(id string) func() {
	s.mu.Lock()
	if s.deciding == nil {
		s.deciding = map[string]chan struct{}{}
	}
	for {
		ch, busy := s.deciding[id]
		if !busy {
			break
		}
		s.mu.Unlock()
		<-ch
		s.mu.Lock()
	}
	ch := make(chan struct{})
	s.deciding[id] = ch
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.deciding, id)
		s.mu.Unlock()
		close(ch)
	}
}

// decide applies a pending proposal of this session once what the scope decides by says so,
// and rejects it when that fails: the branch check (the proposing session's branch is green;
// it says nothing of the edit), then the eval gate (the edit's measured effect). By policy, a
// shared scope's edit applies only on a measured effect: without an eval gate it waits for a
// person, whatever the branch check said.
func (s *Session) decide(ctx context.Context, st *harness.Store, p harness.Proposal, by string) (harness.Proposal, error) {
	pol := s.policyFor(p.Scope)
	var v *harness.Verdict
	observed := ""
	if pol.Gate != "" {
		v = s.runGate(ctx, pol, p.ID)
		observed = v.Summary()
		if !v.Passed || v.Error != "" {
			return s.reject(ctx, st, p, "branch-check", observed, observed, v)
		}
	}
	shared := p.Scope != harness.ScopeSession
	if by == "policy" && shared && pol.Eval == nil {
		return p, nil // waits for a person: nothing measured what the edit does
	}
	if pol.Eval != nil && shared {
		ev := s.runEvalGate(ctx, pol.Eval, p)
		if ev.err != nil {
			// Nothing was measured, so nothing is decided: the proposal waits as it was.
			return p, fmt.Errorf("the eval gate could not measure %s (it stays pending): %w", p.ID, ev.err)
		}
		observed = strings.TrimPrefix(observed+"; "+ev.effect, "; ")
		switch ev.outcome {
		case eval.GateRefuse:
			return s.reject(ctx, st, p, "eval-gate", ev.why, observed, v)
		case eval.GateReview:
			if by == "policy" {
				// The noise cannot tell: a person decides, with the measurement on the proposal.
				return st.NoteMeasurement(ctx, p.ID, observed, v)
			}
			observed += "; the noise left it undecided and " + by + " applied it"
		}
	}
	q, err := st.ApplyProposal(ctx, p.ID, by, v, observed)
	if err != nil {
		return q, err
	}
	s.appliedHarness(ctx, event.HarnessApplied{Proposal: q.ID, Scope: string(q.Scope), Author: q.Author, Edits: eventEdits(q.Edits),
		Commit: q.Applied, By: by, Gate: s.eventVerdict(v), Observed: observed})
	return q, nil
}

func (s *Session) reject(ctx context.Context, st *harness.Store, p harness.Proposal, by, why, observed string, v *harness.Verdict) (harness.Proposal, error) {
	q, err := st.RejectProposal(ctx, p.ID, by, why, observed, v)
	if err != nil {
		return q, err
	}
	s.append(ctx, event.HarnessRejected{Proposal: q.ID, Scope: string(q.Scope), Author: q.Author, Edits: eventEdits(q.Edits),
		By: by, Reason: why, Observed: q.Observed, Gate: s.eventVerdict(v)})
	return q, nil
}

// appliedHarness logs a change that landed on a scope and counts it.
func (s *Session) appliedHarness(ctx context.Context, d event.HarnessApplied) {
	s.mu.Lock()
	s.usage.HarnessEdits++
	s.mu.Unlock()
	s.append(ctx, d)
}

// proposalStores are the object stores proposals of the workspace containing dir live in:
// the repository's common dir (workspace and session scopes), then the global harness.
func (s *Service) proposalStores(ctx context.Context, dir string) ([]string, error) {
	ws, err := s.workspaceFor(dir)
	if err != nil {
		return nil, err
	}
	dirs := []string{ws.Repo.CommonDir()}
	if g, err := s.HarnessStore(ctx, dir, harness.ScopeGlobal, ""); err == nil {
		dirs = append(dirs, g.GitDir())
	} else {
		s.log.Warn("harness: global scope unavailable; its proposals are not listed", "err", err)
	}
	return dirs, nil
}

// Proposals lists the proposals of the workspace containing dir, of its sessions and of the
// global scope, with status ("" for all), newest first.
func (s *Service) Proposals(ctx context.Context, dir, status string) ([]harness.Proposal, error) {
	dirs, err := s.proposalStores(ctx, dir)
	if err != nil {
		return nil, err
	}
	out := []harness.Proposal{}
	for _, d := range dirs {
		ps, err := harness.ProposalsIn(ctx, d, status)
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.After(out[j].Created) })
	return out, nil
}

// Proposal returns one proposal and its diff.
func (s *Service) Proposal(ctx context.Context, dir, id string) (harness.Proposal, string, error) {
	st, p, err := s.findProposal(ctx, dir, id)
	if err != nil {
		return p, "", err
	}
	d, err := st.ProposalDiff(ctx, p)
	return p, d, err
}

func (s *Service) findProposal(ctx context.Context, dir, id string) (*harness.Store, harness.Proposal, error) {
	if err := harness.CheckProposalID(id); err != nil {
		return nil, harness.Proposal{}, err
	}
	dirs, err := s.proposalStores(ctx, dir)
	if err != nil {
		return nil, harness.Proposal{}, err
	}
	for _, d := range dirs {
		st, p, err := harness.OpenProposal(ctx, d, id)
		if errors.Is(err, harness.ErrNoProposal) {
			continue
		}
		return st, p, err
	}
	return nil, harness.Proposal{}, fmt.Errorf("%w %q in the repository at %s, its sessions or the global harness; arbor proposals --status all lists them", harness.ErrNoProposal, id, dirs[0])
}

// AcceptProposal is the user's accept: the scope's gate still decides (it judges the change
// independently of whoever accepts it), then the change applies. A proposal whose session is
// gone applies only where its scope has no gate (the person accepting is what decides); where
// it has one, the gate cannot run without the session and the accept is refused.
func (s *Service) AcceptProposal(ctx context.Context, dir, id string) (harness.Proposal, error) {
	st, p, err := s.findProposal(ctx, dir, id)
	if err != nil {
		return p, err
	}
	if p.Status != harness.Pending {
		return p, fmt.Errorf("%w: %s is %s", harness.ErrDecided, id, p.Status)
	}
	sess, err := s.Get(p.Session)
	if err == nil {
		return sess.decideOnce(ctx, st, p, "user")
	}
	// The proposing session is gone: no branch for a gate to check out, and no log.
	ws, err := s.workspaceFor(dir)
	if err != nil {
		return p, err
	}
	cfg, err := ws.config(s.overridesFor(ws.Root))
	if err != nil {
		return p, err
	}
	pol := cfg.Harness.For(string(p.Scope))
	var gates []string
	if pol.Gate != "" {
		gates = append(gates, fmt.Sprintf("the branch check %q", pol.Gate))
	}
	if pol.Eval != nil && p.Scope != harness.ScopeSession {
		gates = append(gates, "the eval gate")
	}
	if len(gates) > 0 {
		return p, fmt.Errorf("%w: %s was proposed by session %s, which is gone, and the %s harness decides by %s, which needs that session: not applied; reject it (arbor proposals reject %s) or have a live session propose it again",
			harness.ErrInvalid, id, p.Session, p.Scope, strings.Join(gates, " and "), id)
	}
	done := s.lockProposal(id)
	defer done()
	if cur, err := st.Proposal(ctx, id); err != nil || cur.Status != harness.Pending {
		if err == nil {
			err = fmt.Errorf("%w: %s is %s", harness.ErrDecided, id, cur.Status)
		}
		return cur, err
	}
	return st.ApplyProposal(ctx, id, "user", nil, "")
}

// RejectProposal is the user's reject, with an optional reason.
func (s *Service) RejectProposal(ctx context.Context, dir, id, reason string) (harness.Proposal, error) {
	st, p, err := s.findProposal(ctx, dir, id)
	if err != nil {
		return p, err
	}
	if reason == "" {
		reason = "rejected by the user"
	}
	sess, err := s.Get(p.Session)
	if err != nil {
		return st.RejectProposal(ctx, id, "user", reason, "", nil)
	}
	return sess.reject(ctx, st, p, "user", reason, "", nil)
}

// RolledBack records in a session's log that the user rolled back an entry of a scope it
// reads; sessions that are not running here are left alone.
func (s *Service) RolledBack(ctx context.Context, session string, d event.HarnessRolledBack) {
	if sess, err := s.Get(session); err == nil {
		sess.append(ctx, d)
	}
}
