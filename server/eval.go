package server

import (
	"context"

	"github.com/arborhq/arbor/agents"
	"github.com/arborhq/arbor/agents/eval"
)

// evalRun answers arbor/eval.run: the run starts and goes on in the daemon; its results
// arrive through arbor/eval.results.
func (c *conn) evalRun(ctx context.Context, p EvalRunParams) (*eval.Run, error) {
	repeat := 1
	if p.Repeat != nil {
		repeat = *p.Repeat
	}
	return c.srv.agents.StartEval(ctx, agents.EvalRequest{Dir: p.Dir, Suite: p.Suite, Split: p.Split, Tags: p.Tags,
		Harness: p.Harness, Model: p.Model, Repeat: repeat, Parallel: p.Parallel, Label: p.Label})
}

func (c *conn) evalResults(ctx context.Context, p EvalResultsParams) (*EvalResultsResult, error) {
	if p.Run == "" {
		runs, err := c.srv.agents.EvalRuns(p.Dir)
		if err != nil {
			return nil, err
		}
		if runs == nil {
			runs = []*eval.Run{}
		}
		return &EvalResultsResult{Runs: runs}, nil
	}
	rep, err := c.srv.agents.EvalSummary(p.Dir, p.Run)
	if err != nil {
		return nil, err
	}
	return &EvalResultsResult{Report: rep, Running: c.srv.agents.EvalRunning(rep.Run.ID)}, nil
}

func (c *conn) evalCompare(ctx context.Context, p EvalCompareParams) (*eval.Comparison, error) {
	return c.srv.agents.EvalCompare(p.Dir, p.A, p.B)
}

func (c *conn) evalStop(ctx context.Context, p EvalStopParams) (*eval.Run, error) {
	return c.srv.agents.StopEval(p.Dir, p.Run)
}
