package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/model"
	"github.com/arborhq/arbor/kernel"
)

// Compaction keeps the model's context (L1) within its window. Raw events are never removed:
// a compaction record holds the summary and how many recent messages stayed verbatim.
//
// Every compaction costs a model call and breaks the prompt prefix a provider caches, so it
// cuts rarely and deep: it starts when the next request's estimate passes the threshold
// ("compaction.threshold", 0.7 of the window by default) and leaves a context of at most
// compactTo of the threshold (0.4 of the window by default) — the system prompt, the summary
// message (bounded by the window) and as many of the latest messages as fit, at most
// "compaction.keep". So at least 3/7 of the threshold (0.3 of the window) fills up before the
// next one. Between compactions the conversation only grows at its end: the summary message
// and what was kept stay byte for byte the prefix of every request until the next one.
const (
	compactAt      = 0.7     // compact when the estimate passes this share of the window (the default of "compaction.threshold")
	compactTo      = 4.0 / 7 // share of the threshold a compaction leaves (0.4 of the window at the default threshold)
	keepRecent     = 6       // messages kept verbatim after a compaction, at most (the default of "compaction.keep")
	maxSummary     = 6000    // bytes: summaries cannot grow by feeding on themselves
	summaryShare   = 0.08    // of the window (in tokens): what the summary may take of a small window
	maxHistoryText = 0.5     // share of the window the summariser may read
	summaryHeading = "[Summary of this session's earlier work, written when the context was compacted]"
)

const summarisePrompt = `Summarise this agent's history so it can continue the task with only your summary and its most recent messages. Use these headings: Goal; Decisions; Progress; Open work; Files touched. Be specific (names, paths, values). At most %d words.`

// compactionLimits are the window, the threshold and keep of the session's model and policy.
func (s *Session) compactionLimits(client *model.Client) (window int64, threshold float64, keep int) {
	window = int64(client.Config().ContextWindow)
	if window <= 0 {
		window = model.DefaultContextWindow
	}
	threshold, keep = s.cfg.Compaction.Threshold, s.cfg.Compaction.Keep
	if threshold <= 0 || threshold >= 1 {
		threshold = compactAt
	}
	if keep < 1 {
		keep = keepRecent
	}
	return window, threshold, keep
}

// maybeCompact compacts when the next request would pass the threshold, or always with force
// (after the server refused with a context overflow). It is only called between model calls,
// never in the middle of a tool call.
func (s *Session) maybeCompact(ctx context.Context, client *model.Client, force bool) error {
	s.mu.Lock()
	system := systemPrompt(s.meta) + s.harness.block // what complete sends
	s.mu.Unlock()
	conv := s.conversation()
	window, threshold, keep := s.compactionLimits(client)
	limit := threshold * float64(window)
	if !force && float64(client.EstimateTokens(model.Request{System: system, Messages: conv})) < limit {
		return nil
	}
	s.awaitCheckpoint() // the last cell's checkpoint is recorded before the compaction
	// What the compacted context holds whatever is kept: the system prompt and the summary
	// message, its summary at its bound. The rest of compactTo of the limit is for the
	// latest messages.
	summaryBytes := min(maxSummary, int(summaryShare*float64(window)*4))
	vars := s.liveVariables(ctx)
	bound := summaryMessage(s.task(), strings.Repeat("x", summaryBytes), vars)
	fixed := client.EstimateTokens(model.Request{System: system, Messages: []model.Message{{Role: model.RoleUser, Content: bound}}})
	cut := cutPoint(conv, keep, int64(compactTo*limit)-fixed)
	if cut <= 0 {
		if force {
			return errors.New("the context overflowed and there is nothing older to compact; the latest messages alone are too large")
		}
		return nil
	}
	history := renderHistory(conv[:cut], int(maxHistoryText*float64(window)*4))
	words := max(summaryBytes/7, 30) // about 7 bytes a word, with its space
	reply, err := client.Complete(ctx, model.Request{
		System:   "You write precise working summaries of a coding agent's session.",
		Messages: []model.Message{{Role: "user", Content: fmt.Sprintf(summarisePrompt, words) + "\n\n" + history}},
	}, nil)
	if err != nil {
		return fmt.Errorf("compaction: %w", err)
	}
	summary := truncateUTF8(strings.TrimSpace(reply.Text), summaryBytes)
	kept := len(conv) - cut
	text := summaryMessage(s.task(), summary, vars)
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

// truncateUTF8 cuts s to at most n bytes, on a character boundary, marking the cut.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = " …"
	n = max(n-len(mark), 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + mark
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

// cutPoint picks how many leading messages to summarise. It keeps the latest messages that
// fit in budget tokens, at most keep of them, and always the latest exchange (the last
// assistant message with its tool results, or the last user message); the cut is moved back
// so a tool call is never separated from its results.
func cutPoint(conv []model.Message, keep int, budget int64) int {
	start := len(conv) - 1
	for start > 0 && conv[start].Role == model.RoleTool {
		start--
	}
	used := messageTokens(conv[start:])
	for start > 0 {
		prev := start - 1
		for prev > 0 && conv[prev].Role == model.RoleTool {
			prev--
		}
		t := messageTokens(conv[prev:start])
		if len(conv)-prev > keep || used+t > budget {
			break
		}
		start, used = prev, used+t
	}
	return start
}

// messageTokens estimates msgs at 4 characters a token plus their framing, the way
// model.Client.EstimateTokens counts a request.
func messageTokens(msgs []model.Message) int64 {
	var n int64
	for _, m := range msgs {
		chars := len(m.Content)
		for _, c := range m.ToolCalls {
			args, _ := json.Marshal(map[string]string{"code": c.Code})
			chars += len(args)
		}
		n += int64((chars+3)/4) + 4
	}
	return n
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
