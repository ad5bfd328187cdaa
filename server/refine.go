package server

import (
	"context"
	"time"

	"github.com/arborhq/arbor/agents"
	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/harness"
)

// The arbor/refine.* handlers: /refine runs and the proposals they (and model code) make.

func (c *conn) refineRun(ctx context.Context, p RefineRunParams) (*RefineRunResult, error) {
	if p.Session == "" {
		return nil, errInvalidParams{msg: "arbor/refine.run: name the session to refine"}
	}
	sc := harness.ScopeSession
	if p.Scope != "" {
		var err error
		if sc, err = harness.ParseScope(p.Scope); err != nil {
			return nil, errInvalidParams{msg: err.Error()}
		}
	}
	out, err := c.srv.agents.Refine(ctx, p.Session, agents.RefineRequest{Focus: p.Focus, Scope: sc, Trigger: "user"})
	if err != nil {
		return nil, err
	}
	res := &RefineRunResult{Scope: string(out.Scope), FromSeq: out.FromSeq, ToSeq: out.ToSeq, Model: out.Model,
		Calls: out.Calls, InputTokens: out.Usage.InputTokens, OutputTokens: out.Usage.OutputTokens,
		Summary: out.Summary, Error: out.Error, Proposals: []Proposal{}}
	for _, q := range out.Proposals {
		res.Proposals = append(res.Proposals, toProposal(q, ""))
	}
	return res, nil
}

func (c *conn) proposalDir(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	c.mu.Lock()
	dir = c.rootDir
	c.mu.Unlock()
	if dir == "" {
		return "", errInvalidParams{msg: "arbor/refine: no dir given and the client has no root folder"}
	}
	return dir, nil
}

func (c *conn) refineProposals(ctx context.Context, p ProposalsParams) (*ProposalsResult, error) {
	dir, err := c.proposalDir(p.Dir)
	if err != nil {
		return nil, err
	}
	status := p.Status
	switch status {
	case "":
		status = harness.Pending
	case "all":
		status = ""
	case harness.Pending, harness.Applied, harness.Rejected:
	default:
		return nil, errInvalidParams{msg: "arbor/refine.proposals: status " + clip(p.Status, maxEcho) + ": want pending, applied, rejected or all"}
	}
	ps, err := c.srv.agents.Proposals(ctx, dir, status)
	if err != nil {
		return nil, err
	}
	res := &ProposalsResult{Proposals: make([]Proposal, 0, len(ps))}
	for _, q := range ps {
		res.Proposals = append(res.Proposals, toProposal(q, ""))
	}
	return res, nil
}

func (c *conn) refineProposal(ctx context.Context, p ProposalRef) (*Proposal, error) {
	dir, err := c.proposalDir(p.Dir)
	if err != nil {
		return nil, err
	}
	q, diff, err := c.srv.agents.Proposal(ctx, dir, p.ID)
	if err != nil {
		return nil, err
	}
	out := toProposal(q, diff)
	return &out, nil
}

func (c *conn) refineAccept(ctx context.Context, p ProposalDecideParams) (*Proposal, error) {
	dir, err := c.proposalDir(p.Dir)
	if err != nil {
		return nil, err
	}
	q, err := c.srv.agents.AcceptProposal(ctx, dir, p.ID)
	if err != nil {
		return nil, err
	}
	c.log.Info("proposal accepted", "proposal", q.ID, "status", q.Status, "applied", q.Applied)
	out := toProposal(q, "")
	return &out, nil
}

func (c *conn) refineReject(ctx context.Context, p ProposalDecideParams) (*Proposal, error) {
	dir, err := c.proposalDir(p.Dir)
	if err != nil {
		return nil, err
	}
	q, err := c.srv.agents.RejectProposal(ctx, dir, p.ID, p.Reason)
	if err != nil {
		return nil, err
	}
	c.log.Info("proposal rejected", "proposal", q.ID)
	out := toProposal(q, "")
	return &out, nil
}

func toProposal(q harness.Proposal, diff string) Proposal {
	out := Proposal{ID: q.ID, Scope: string(q.Scope), Ref: q.Ref, Author: q.Author, Session: q.Session, Turn: q.Turn,
		Trigger: q.Trigger, Rationale: q.Rationale, Intended: q.Intended, Base: q.Base, Commit: q.Commit,
		Created: q.Created, Status: q.Status, Reason: q.Reason, DecidedBy: q.DecidedBy, Applied: q.Applied,
		Observed: q.Observed, Advice: q.Advice, Diff: diff, Edits: make([]ProposalEdit, 0, len(q.Edits))}
	if !q.Decided.IsZero() {
		d := q.Decided.In(time.UTC)
		out.Decided = &d
	}
	for _, e := range q.Edits {
		out.Edits = append(out.Edits, ProposalEdit{Op: e.Op, Kind: string(e.Entry.Kind), ID: e.Entry.ID, Title: e.Entry.Title, Base: e.Base})
	}
	if v := q.Gate; v != nil {
		out.Gate = &event.GateVerdict{Command: v.Command, Commit: v.Commit, Passed: v.Passed, ExitCode: v.ExitCode,
			DurationMs: v.DurationMs, TimedOut: v.TimedOut, Output: v.Output, Error: v.Error}
	}
	return out
}
