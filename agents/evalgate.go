package agents

import (
	"context"
	"fmt"
	"strings"

	"github.com/arborhq/arbor/agents/eval"
	"github.com/arborhq/arbor/agents/harness"
	"github.com/arborhq/arbor/workspace"
)

// The eval gate of a scope (harness.<scope>.eval): before a proposal applies, the slice runs
// twice — with the scope as it is and as the proposal would make it — and the proposal is
// refused when success goes down or tokens per task rise by more than the allowed fraction.
// What was measured goes into the proposal as its observed effect (and so into the trailer
// of the commit that applies it).

// evalGateVerdict is the outcome of an eval gate.
type evalGateVerdict struct {
	passed bool
	effect string // what was measured, one line
}

// runEvalGate measures proposal p against the scope's head with the gate g.
func (s *Session) runEvalGate(ctx context.Context, g *workspace.EvalGate, p harness.Proposal) evalGateVerdict {
	if s.svc.isFixture(s.ws.Root) {
		return evalGateVerdict{effect: "eval gate: a proposal made inside an eval task is not measured (its harness is a throwaway copy)"}
	}
	base, err := s.svc.evalPins(ctx, s.ws, "")
	if err != nil {
		return evalGateVerdict{effect: "eval gate: the harness as it is: " + err.Error()}
	}
	cand := map[string]string{}
	for k, v := range base {
		cand[k] = v
	}
	// The proposal as it would apply now: its edits on the scope's current head (p.Commit is on
	// the head it was made on, which may have moved since).
	st, err := s.harnessStore(ctx, p.Scope)
	if err != nil {
		return evalGateVerdict{effect: "eval gate: " + err.Error()}
	}
	preview, err := st.Preview(ctx, p)
	if err != nil {
		return evalGateVerdict{effect: "eval gate: the proposal on the harness as it is now: " + err.Error()}
	}
	cand[string(p.Scope)] = preview
	split := g.Split
	if split == "" {
		split = eval.HeldOut
	}
	repeat := max(g.Repeat, 1)
	maxInc := g.MaxTokenIncrease
	if maxInc == 0 {
		maxInc = 0.1
	}
	req := EvalRequest{Dir: s.ws.Root, Suite: g.Suite, Split: split, Tags: g.Tags, Model: g.Model,
		Repeat: repeat, Parallel: max(g.Parallel, 1)}
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
		return evalGateVerdict{effect: "eval gate: " + err.Error()}
	}
	b, err := measure(cand, "eval gate of "+p.ID+": with the proposal")
	if err != nil {
		return evalGateVerdict{effect: "eval gate: " + err.Error()}
	}
	c := eval.Compare(a, b)
	slice := g.Suite + "/" + split
	if len(g.Tags) > 0 {
		slice += "[" + strings.Join(g.Tags, ",") + "]"
	}
	effect := fmt.Sprintf("eval %s: success %.0f%% → %.0f%% (%+.1f points", slice, 100*a.Rate.P, 100*b.Rate.P, 100*c.Success)
	if c.SuccessNoise != nil {
		effect += fmt.Sprintf(", 95%% interval %+.1f ± %.1f", 100*c.SuccessAdjusted, 100**c.SuccessNoise)
	}
	effect += fmt.Sprintf("), tokens per task %d → %d (%+.1f%%); runs %s, %s", a.Mean.Tokens(), b.Mean.Tokens(), 100*c.Tokens, a.Run.ID, b.Run.ID)
	switch {
	case a.Errored+b.Errored > 0:
		return evalGateVerdict{effect: fmt.Sprintf("%s — refused: %d task run(s) errored, so the slice was not measured whole", effect, a.Errored+b.Errored)}
	case a.Run.Status != eval.RunDone || b.Run.Status != eval.RunDone:
		return evalGateVerdict{effect: effect + " — refused: an eval run did not finish"}
	case len(c.Tasks) == 0:
		return evalGateVerdict{effect: effect + " — refused: no task of the slice was measured"}
	case c.Success < -1e-9:
		return evalGateVerdict{effect: effect + " — refused: it lowers success"}
	case c.Tokens > maxInc+1e-9:
		return evalGateVerdict{effect: fmt.Sprintf("%s — refused: tokens per task rise by more than %.0f%%", effect, 100*maxInc)}
	}
	return evalGateVerdict{passed: true, effect: effect}
}

// isFixture reports whether root is an eval task's fixture repository.
func (s *Service) isFixture(root string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.evals.fixtures[root]
	return ok
}
