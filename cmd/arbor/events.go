package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/server"
)

// printEvent writes one event: a JSON object per line, or a short human form.
func printEvent(w io.Writer, e server.Event, asJSON bool) {
	if asJSON {
		b, _ := json.Marshal(map[string]any{"seq": e.Seq, "ts": e.TS, "type": e.Type, "data": e.Data})
		fmt.Fprintf(w, "%s\n", b)
		return
	}
	ts := e.TS.Local().Format("15:04:05")
	p, err := event.Decode(event.Type(e.Type), e.Data)
	if err != nil {
		fmt.Fprintf(w, "%s %s %s\n", ts, e.Type, string(e.Data))
		return
	}
	if line := eventLine(p); line != "" {
		fmt.Fprintf(w, "%s %s\n", ts, line)
	}
}

// eventLine is the human form of one event; "" for events shown by the ones that follow.
func eventLine(p event.Payload) string {
	switch d := p.(type) {
	case event.SessionCreated:
		line := fmt.Sprintf("session %s created on %s: %s", d.ID, d.Branch, firstLine(d.Task))
		if d.ForkOf != "" {
			line += fmt.Sprintf(" (fork of %s at event %d)", abbrev(d.ForkOf, 8), d.ForkSeq)
		}
		return line
	case event.StateChanged:
		line := "● " + d.State.String()
		if d.Reason != "" {
			line += ": " + d.Reason
		}
		return line
	case event.UserMessage:
		return fmt.Sprintf("%s: %s", orDefault(d.From, "user"), indent(d.Text))
	case event.AssistantMessage:
		var b strings.Builder
		if t := strings.TrimSpace(d.Text); t != "" {
			fmt.Fprintf(&b, "assistant: %s", indent(t))
		}
		for _, c := range d.ToolCalls {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, "python:\n%s", block(c.Code, "    "))
		}
		return b.String()
	case event.Rejected:
		line := fmt.Sprintf("rejected by the user, reverted on the session's branch as %s: %s", abbrev(d.Commit, 10), strings.Join(d.Files, ", "))
		if len(d.Hunks) > 0 {
			line += " (hunks " + strings.Join(d.Hunks, ", ") + ")"
		}
		return line
	case event.ToolOutput:
		// Streamed while the cell ran (┊); the result that follows is what the model saw (│).
		text := strings.TrimRight(d.Text, "\n")
		if d.Stream == "stderr" {
			text = block(text, "stderr ")
		}
		if d.Truncated {
			text += "\n[arbor: the log keeps no more of this cell's streamed output]"
		}
		return block(text, "    ┊ ")
	case event.ToolFinished:
		return fmt.Sprintf("result (%s):\n%s", d.Status, block(strings.TrimRight(d.Output, "\n"), "    │ "))
	case event.Checkpoint:
		line := fmt.Sprintf("checkpoint %s (turn %d)", abbrev(d.Commit, 10), d.Turn)
		if d.Merged != "" {
			line += ", merging subagent " + abbrev(d.Merged, 8)
		}
		return line
	case event.TurnFailed:
		return "turn failed: " + d.Error
	case event.Interrupted:
		return fmt.Sprintf("turn %d interrupted: %s", d.Turn, d.Reason)
	case event.Recovered:
		if d.Worktree != "" {
			return "recovered: worktree " + d.Worktree
		}
		return "recovered after a daemon restart (was " + d.PreviousState.String() + ")"
	case event.Kernel:
		line := "kernel " + d.Event
		if d.PID != 0 {
			line += fmt.Sprintf(" (pid %d)", d.PID)
		}
		for _, v := range []string{d.Restored, d.Summary, d.Error} {
			if v != "" {
				line += ": " + v
			}
		}
		return line
	case event.ModelRetry:
		return fmt.Sprintf("model retry %d: %s", d.Retry, d.Error)
	case event.ModelChanged:
		return fmt.Sprintf("model %s → %s", orDefault(d.From, "(default)"), d.Model)
	case event.SubagentSpawned:
		return fmt.Sprintf("spawned subagent %s on %s: %s", orDefault(d.Name, abbrev(d.ID, 8)), d.Branch, firstLine(d.Task))
	case event.MessageSent:
		var to []string
		for _, r := range d.Receipts {
			to = append(to, fmt.Sprintf("%s %s (%s)", r.Role, orDefault(r.Name, abbrev(r.To, 8)), r.Status))
		}
		return fmt.Sprintf("sent to %s: %s", strings.Join(to, ", "), indent(d.Text))
	case event.Compaction:
		return fmt.Sprintf("context compacted (%d messages summarised, %d kept)", d.Compacted, d.Kept)
	case event.WorktreeSetup:
		if !d.OK {
			return "worktree setup failed: " + d.Error
		}
		return "worktree prepared"
	case event.Forked:
		return fmt.Sprintf("forked from %s at event %d (checkpoint %s)", abbrev(d.Source, 8), d.Seq, abbrev(d.Commit, 10))
	case event.Accepted:
		return fmt.Sprintf("accepted onto %s as %s (%s): %s", d.Branch, abbrev(d.Commit, 10), d.Mode, strings.Join(d.Files, ", "))
	case event.Merged:
		return fmt.Sprintf("merged subagent %s (%s) as %s: %s", abbrev(d.Child, 8), d.Branch, abbrev(d.Commit, 10), strings.Join(d.Files, ", "))
	case event.Discarded:
		switch {
		case d.Archived != "":
			return "discarded; unmerged work kept at " + d.Archived
		case d.BranchDeleted:
			return "discarded; branch " + d.Branch + " deleted"
		}
		return "discarded"
	case event.HarnessProposed:
		line := fmt.Sprintf("harness proposal %s (%s, %s scope, %s): %s", d.Proposal, d.Author, d.Scope, proposalWait(d.Policy), harnessEdits(d.Edits))
		if d.Rationale != "" {
			line += "\n    why: " + indent(d.Rationale)
		}
		return line
	case event.HarnessApplied:
		line := fmt.Sprintf("harness %s scope: %s applied as %s by %s", d.Scope, harnessEdits(d.Edits), abbrev(d.Commit, 10), d.By)
		if d.Proposal != "" {
			line = fmt.Sprintf("harness proposal %s applied by %s as %s: %s", d.Proposal, d.By, abbrev(d.Commit, 10), harnessEdits(d.Edits))
		}
		if d.Observed != "" {
			line += "\n    observed: " + d.Observed
		}
		return line
	case event.HarnessRejected:
		what := "harness change"
		if d.Proposal != "" {
			what = "harness proposal " + d.Proposal
		}
		return fmt.Sprintf("%s rejected by %s: %s", what, d.By, indent(d.Reason))
	case event.HarnessRolledBack:
		return fmt.Sprintf("harness %s scope: %s %s rolled back to %s as %s", d.Scope, d.Kind, d.ID, abbrev(d.To, 10), abbrev(d.Commit, 10))
	case event.Refined:
		if d.Error != "" {
			return fmt.Sprintf("refine (%s scope, events %d–%d) made no proposal: %s", d.Scope, d.FromSeq, d.ToSeq, d.Error)
		}
		return fmt.Sprintf("refine (%s scope, events %d–%d, %d+%d tokens): %d proposals %s", d.Scope, d.FromSeq, d.ToSeq,
			d.Usage.InputTokens, d.Usage.OutputTokens, len(d.Proposals), strings.Join(d.Proposals, ", "))
	case event.GoalSet:
		line := "◎ goal: " + firstLine(d.Objective)
		if b := budgetText(d.TokenBudget, d.TurnBudget, d.WallBudgetMs, d.CostBudget); b != "" {
			line += " (" + b + ")"
		}
		if d.Until != "" {
			line += fmt.Sprintf(", done when `%s` passes", d.Until)
		}
		if d.Replaced {
			line += ", replacing the previous goal"
		}
		return line
	case event.GoalChanged:
		line := "◎ goal " + strings.ReplaceAll(d.Status, "_", " ")
		if d.Reason != "" {
			line += ": " + d.Reason
		}
		return line + fmt.Sprintf(" [%d turns, %s]", d.Turns, spendText(d.Spend))
	case event.GoalWait:
		switch d.Reason {
		case "children":
			return "◎ goal parked until its subagents report: " + strings.Join(d.Children, ", ")
		case "message":
			return "◎ goal parked until a reply to the message it sent arrives"
		}
		return fmt.Sprintf("◎ goal backs off %s after %d turn(s) that changed nothing", time.Duration(d.DelayMs)*time.Millisecond, d.IdleTurns)
	case event.Verified:
		switch {
		case d.Skipped:
			return fmt.Sprintf("✓? end condition `%s` not run again: the worktree is unchanged since it failed", d.Command)
		case d.Passed:
			return fmt.Sprintf("✓ end condition `%s` passed (%d ms) [%s]", d.Command, d.DurationMs, spendText(d.Spend))
		case d.Error != "":
			return fmt.Sprintf("✗ end condition `%s`: %s [%s]", d.Command, d.Error, spendText(d.Spend))
		}
		return fmt.Sprintf("✗ end condition `%s` failed (exit %d) [%s]", d.Command, d.ExitCode, spendText(d.Spend))
	case event.HeartbeatTick:
		if d.Status == "stopped" {
			return fmt.Sprintf("heartbeat %s run %d came after the session stopped; it is no longer scheduled", d.ID, d.Run)
		}
		return fmt.Sprintf("heartbeat %s run %d came while the session was busy: %d run(s) pending, delivered as one when it is free", d.ID, d.Run, d.Pending)
	case event.MessageQueued, event.ToolStarted, event.TurnStarted:
		return "" // shown by the events that follow them
	}
	return fmt.Sprintf("%s %+v", p.EventType(), p)
}

// budgetText lists a goal's budgets; "" when it has none.
func budgetText(tokens int64, turns int, wallMs int64, cost float64) string {
	var parts []string
	if tokens > 0 {
		parts = append(parts, fmt.Sprintf("%d tokens", tokens))
	}
	if turns > 0 {
		parts = append(parts, fmt.Sprintf("%d turns", turns))
	}
	if wallMs > 0 {
		parts = append(parts, (time.Duration(wallMs) * time.Millisecond).String())
	}
	if cost > 0 {
		parts = append(parts, fmt.Sprintf("$%.2f", cost))
	}
	return strings.Join(parts, ", ")
}

func spendText(sp event.Spend) string {
	return fmt.Sprintf("%d tokens, $%.4f, %d model calls", sp.Tokens, sp.CostUSD, sp.ModelCalls)
}

func harnessEdits(es []event.HarnessEdit) string {
	var parts []string
	for _, e := range es {
		parts = append(parts, e.Op+" "+e.Kind+" "+e.ID)
	}
	return strings.Join(parts, ", ")
}

func proposalWait(policy string) string {
	if policy == "review" {
		return "waiting for review: arbor proposals"
	}
	return "applied by policy unless refused"
}

func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n    ") }

func block(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n")
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
