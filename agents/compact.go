package agents

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/model"
	"github.com/arborhq/arbor/kernel"
)

// Compaction keeps the model's context (L1) within its window. Raw events are never removed:
// a compaction record holds the summary and how many recent messages stayed verbatim.
const (
	compactAt      = 0.7  // compact when the estimate passes this share of the window (the default of "compaction.threshold")
	keepRecent     = 6    // messages kept verbatim after a compaction, at least (the default of "compaction.keep")
	maxSummary     = 6000 // bytes: summaries cannot grow by feeding on themselves
	maxHistoryText = 0.5  // share of the window the summariser may read
	summaryHeading = "[Summary of this session's earlier work, written when the context was compacted]"
)

const summarisePrompt = `Summarise this agent's history so it can continue the task with only your summary and its most recent messages. Use these headings: Goal; Decisions; Progress; Open work; Files touched. Be specific (names, paths, values). At most 600 words.`

// maybeCompact compacts when the next request would pass the threshold, or always with force
// (after the server refused with a context overflow). It is only called between model calls,
// never in the middle of a tool call.
func (s *Session) maybeCompact(ctx context.Context, force bool) error {
	req := model.Request{System: systemPrompt(s.meta), Messages: s.conversation()}
	window := s.client.Config().ContextWindow
	if window <= 0 {
		window = model.DefaultContextWindow
	}
	threshold, keep := s.cfg.Compaction.Threshold, s.cfg.Compaction.Keep
	if threshold <= 0 || threshold >= 1 {
		threshold = compactAt
	}
	if keep < 1 {
		keep = keepRecent
	}
	if !force && float64(s.client.EstimateTokens(req)) < threshold*float64(window) {
		return nil
	}
	conv := req.Messages
	cut := cutPoint(conv, keep)
	if cut <= 0 {
		if force {
			return errors.New("the context overflowed and there is nothing older to compact; the latest messages alone are too large")
		}
		return nil
	}
	history := renderHistory(conv[:cut], int(maxHistoryText*float64(window)*4))
	reply, err := s.client.Complete(ctx, model.Request{
		System:   "You write precise working summaries of a coding agent's session.",
		Messages: []model.Message{{Role: "user", Content: summarisePrompt + "\n\n" + history}},
	}, nil)
	if err != nil {
		return fmt.Errorf("compaction: %w", err)
	}
	summary := strings.TrimSpace(reply.Text)
	if len(summary) > maxSummary {
		summary = summary[:maxSummary] + " …"
	}
	vars := s.liveVariables(ctx)
	kept := len(conv) - cut
	text := summaryMessage(s.meta.Task, summary, vars)
	s.mu.Lock()
	s.usage.ModelCalls++
	s.usage.addTokens(usageEvent(reply.Usage))
	s.conv = append([]model.Message{{Role: "user", Content: text}}, s.conv[len(s.conv)-kept:]...)
	s.mu.Unlock()
	s.svc.spent(s) // compaction's call counts against the goals above
	_, err = s.append(ctx, event.Compaction{
		Summary: summary, LiveVariables: vars, Compacted: cut, Kept: kept,
		Forced: force, Usage: usageEvent(reply.Usage),
	})
	if err == nil {
		s.maybeRefine("compaction", 0)
	}
	return err
}

// summaryMessage opens a compacted context: the task verbatim (it is what the session is
// for), then the summary and the live variables.
func summaryMessage(task, summary, vars string) string {
	text := task + "\n\n" + summaryHeading + "\n" + summary
	if vars != "" {
		text += "\n\nLive kernel variables (still defined; inspect them instead of recomputing): " + vars
	}
	return text
}

// cutPoint picks how many leading messages to summarise: all but the most recent ones, moved
// back so a tool call is never separated from its results.
func cutPoint(conv []model.Message, keep int) int {
	cut := len(conv) - keep
	for cut > 0 && conv[cut].Role == "tool" {
		cut--
	}
	return cut
}

// renderHistory turns messages into text for the summariser, keeping the newest part when it
// is too long (older parts are usually covered by an earlier summary at the top).
func renderHistory(msgs []model.Message, limit int) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "### %s\n%s\n", m.Role, m.Content)
		for _, c := range m.ToolCalls {
			fmt.Fprintf(&b, "```python\n%s\n```\n", c.Code)
		}
	}
	h := b.String()
	if len(h) > limit && limit > 0 {
		h = summaryHead(msgs) + "\n[… middle of the history omitted …]\n" + h[len(h)-limit:]
	}
	return h
}

func summaryHead(msgs []model.Message) string {
	if len(msgs) > 0 && strings.Contains(msgs[0].Content, summaryHeading) {
		c := msgs[0].Content
		if len(c) > maxSummary {
			c = c[:maxSummary]
		}
		return c
	}
	return ""
}

// liveVariables lists the user's kernel variables, if the kernel is up.
func (s *Session) liveVariables(ctx context.Context) string {
	k := s.kernel.current()
	if k == nil {
		return ""
	}
	res, err := k.Execute(ctx, "print(', '.join(sorted(k for k, v in globals().items() if not k.startswith('_') and k not in ('In', 'Out', 'exit', 'quit', 'get_ipython') and type(v).__name__ != 'module')))", kernel.ExecOptions{})
	if err != nil || res.Status != "ok" {
		return ""
	}
	v := strings.TrimSpace(res.Text)
	if len(v) > 2000 {
		v = v[:2000] + " …"
	}
	return v
}
