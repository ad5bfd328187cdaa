package agents

import (
	"context"
	"fmt"
	"strings"

	"github.com/arborhq/arbor/agents/eval"
	"github.com/arborhq/arbor/agents/harness"
	"github.com/arborhq/arbor/workspace"
)

// The eval gate of a scope (harness.<scope>.eval): the edit is judged by its effect. The slice
// runs with the scope as it is and as the proposal would make it, Repeat times each, on a real
// model — the gate's, else the proposing session's; a suite's script only where the suite is a
// test of Arbor — and eval.Decide reads the comparison against its noise: apply, refuse, or
// leave the decision to a person with the measurement on the proposal. What was measured goes
// into the proposal as its observed effect (and so into the trailer of the commit that applies
// it); the two runs are labelled with the proposal, for `arbor eval results`.

// evalGateDefaultRepeat is how many times each side runs each task when the gate sets none.
const evalGateDefaultRepeat = 3

// evalGateVerdict is the outcome of an eval gate.
type evalGateVerdict struct {
	outcome eval.GateOutcome
	why     string // the decision's clause
	effect  string // what was measured and what it decided, one line
	err     error  // nothing was measured
}

// runEvalGate measures proposal p against the scope's head with the gate g.
func (s *Session) runEvalGate(ctx context.Context, g *workspace.EvalGate, p harness.Proposal) evalGateVerdict {
	failed := func(format string, a ...any) evalGateVerdict { return evalGateVerdict{err: fmt.Errorf(format, a...)} }
	if s.svc.isFixture(s.ws.Root) {
		return failed("a proposal made inside an eval task is not measured (its harness is a throwaway copy)")
	}
	base, err := s.svc.evalPins(ctx, s.ws, "")
	if err != nil {
		return failed("the harness as it is: %w", err)
	}
	cand := map[string]string{}
	for k, v := range base {
		cand[k] = v
	}
	// The proposal as it would apply now: its edits on the scope's current head (p.Commit is on
	// the head it was made on, which may have moved since).
	st, err := s.harnessStore(ctx, p.Scope)
	if err != nil {
		return failed("%w", err)
	}
	preview, err := st.Preview(ctx, p)
	if err != nil {
		return failed("the proposal on the harness as it is now: %w", err)
	}
	cand[string(p.Scope)] = preview
	split := g.Split
	if split == "" {
		split = eval.HeldOut
	}
	bounds := eval.DefaultGateBounds
	if g.MaxTokenIncrease > 0 {
		bounds.MaxTokenIncrease = g.MaxTokenIncrease
	}
	if g.MaxSuccessDrop > 0 {
		bounds.MaxSuccessDrop = g.MaxSuccessDrop
	}
	repeat := g.Repeat
	if repeat == 0 {
		repeat = evalGateDefaultRepeat
	}
	_, sessionModel := s.modelClient()
	req := EvalRequest{Dir: s.ws.Root, Suite: g.Suite, Split: split, Tags: g.Tags, Model: g.Model,
		Repeat: repeat, Parallel: max(g.Parallel, 1), gate: true, fallbackModel: sessionModel}
	measure := func(pins map[string]string, label string) (*eval.Report, error) {
		r := req
		r.pins, r.Label = pins, label
		run, err := s.svc.StartEval(ctx, r)
		if err != nil {
			return nil, err
		}
		if err := s.svc.WaitEval(ctx, run.ID); err != nil {
			s.svc.StopEval(s.ws.Root, run.ID) // nobody waits for it any more
			return nil, err
		}
		return s.svc.EvalSummary(s.ws.Root, run.ID)
	}
	a, err := measure(base, "eval gate of "+p.ID+": the harness as it is")
	if err != nil {
		return failed("%w", err)
	}
	b, err := measure(cand, "eval gate of "+p.ID+": with the proposal")
	if err != nil {
		return failed("%w", err)
	}
	c := eval.Compare(a, b)
	slice := fmt.Sprintf("suite %s, split %s", a.Run.Suite, split)
	if len(g.Tags) > 0 {
		slice += ", tags " + strings.Join(g.Tags, ",")
	}
	on := a.Run.Model
	if a.Run.Script {
		on = "the suite's scripted model"
	}
	effect := fmt.Sprintf("eval of %s on %s, %d× each: success %.0f%% → %.0f%% (%+.1f points", slice, on, repeat, 100*a.Rate.P, 100*b.Rate.P, 100*c.Success)
	if c.SuccessNoise != nil {
		effect += fmt.Sprintf(", adjusted %+.1f ± %.1f at 95%%", 100*c.SuccessAdjusted, 100**c.SuccessNoise)
	}
	effect += fmt.Sprintf("), tokens per task %d → %d (%+.1f%%", a.Mean.Tokens(), b.Mean.Tokens(), 100*c.Tokens)
	if c.TokensNoise != nil {
		effect += fmt.Sprintf(" ± %.1f", 100**c.TokensNoise)
	}
	effect += fmt.Sprintf("); runs %s, %s", a.Run.ID, b.Run.ID)
	outcome, why := eval.Decide(c, bounds)
	switch {
	case a.Errored+b.Errored > 0:
		outcome, why = eval.GateReview, fmt.Sprintf("%d task run(s) errored, so the slice was not measured whole", a.Errored+b.Errored)
	case a.Run.Status != eval.RunDone || b.Run.Status != eval.RunDone:
		outcome, why = eval.GateReview, "an eval run did not finish"
	}
	word := map[eval.GateOutcome]string{eval.GateApply: "applies", eval.GateRefuse: "refused", eval.GateReview: "left for review"}[outcome]
	return evalGateVerdict{outcome: outcome, why: why, effect: fmt.Sprintf("%s — %s: %s", effect, word, why)}
}

// isFixture reports whether root is an eval task's fixture repository.
func (s *Service) isFixture(root string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.evals.fixtures[root]
	return ok
}
