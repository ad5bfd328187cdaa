package server

import "github.com/arborhq/arbor/agents"

// sessionResult is a session as a request's result.
func sessionResult(in agents.Info) *Session {
	s := toSession(in)
	return &s
}

func toSession(in agents.Info) Session {
	return Session{
		ID: in.ID, Parent: in.Parent, Name: in.Name, Task: in.Task, State: in.State,
		Error: in.Error, Model: in.Model, Branch: in.Branch, Worktree: in.Worktree,
		BaseCommit: in.BaseCommit, ForkOf: in.ForkOf, ForkSeq: in.ForkSeq, Workspace: in.Workspace, Created: in.Created, LastSeq: in.LastSeq,
		Usage: toUsage(in.Usage), Total: toUsage(in.Total), Children: in.Children, Goal: goalBrief(in.Goal),
		Profile: in.Profile, Discarded: in.Discarded, Archived: in.Archived,
		WorktreeReleased: in.WorktreeReleased, WorktreeQueued: in.WorktreeQueued, WorktreeWriting: in.WorktreeWriting,
	}
}

func goalBrief(g *agents.Goal) *GoalBrief {
	if g == nil {
		return nil
	}
	return &GoalBrief{Objective: g.Objective, Status: g.Status, Waiting: g.Waiting, Until: g.Until}
}

func toUsage(u agents.Usage) Usage {
	return Usage{
		ModelCalls: u.ModelCalls, InputTokens: u.InputTokens, CachedInputTokens: u.CachedInputTokens, OutputTokens: u.OutputTokens,
		CostUSD: u.CostUSD, KernelExecs: u.KernelExecs, Messages: u.Messages,
		HumanInterventions: u.HumanInterventions, Retries: u.Retries, HarnessEdits: u.HarnessEdits,
		RefineCalls: u.RefineCalls, RefineInputTokens: u.RefineInputTokens, RefineOutputTokens: u.RefineOutputTokens,
		RefineCostUSD: u.RefineCostUSD,
	}
}
