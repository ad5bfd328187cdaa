package acp

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/server"
)

// streamTail is how much of a running cell's streamed output its tool call shows: the newest
// part (the whole output is in the cell's result and the session's log).
const streamTail = 16 << 10

// session is one daemon session open on this ACP connection.
type session struct {
	a   *Agent
	id  string
	cwd string

	mu        sync.Mutex
	lastSeq   uint64 // the newest event translated
	replaying bool   // session/load: the history is being replayed as updates
	replayTo  uint64 // the session's last seq when the load attached
	replayed  chan struct{}
	cells     map[string]*cell // by the model's call id
	turn      *turn            // the prompt in flight, if any
	notice    string           // told at the next prompt (declined MCP servers)
	plan      string           // the plan last sent, to send only changes
	children  []childRef       // from subagent_spawned, before the tree names them
}

type childRef struct{ id, name, task string }

// cell is one Python tool call as ACP shows it.
type cell struct {
	acpID  string
	code   string
	out    []byte // the newest streamTail bytes streamed
	cut    bool   // older output was dropped from out
	status sdk.ToolCallStatus
}

func newSession(a *Agent, info server.Session, cwd string) *session {
	return &session{a: a, id: info.ID, cwd: cwd, cells: map[string]*cell{}, replayed: make(chan struct{})}
}

// reset forgets what was translated, before a replay from the start (mu held).
func (s *session) reset() {
	s.lastSeq = 0
	s.cells = map[string]*cell{}
	s.plan = ""
	s.children = nil
	select {
	case <-s.replayed:
		s.replayed = make(chan struct{})
	default:
	}
}

// onEvent translates one event of the session into updates and follows the prompt's turn.
// Events at or before the last one seen are dropped (a reattach may send them again).
func (s *session) onEvent(ev server.Event) {
	var updates []sdk.SessionUpdate
	var finished, replayDone chan struct{}
	func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if ev.Seq <= s.lastSeq {
			return
		}
		s.lastSeq = ev.Seq
		updates = s.translate(ev)
		if t := s.turn; t != nil && !t.closed {
			if t.awaiting {
				t.backlog = append(t.backlog, ev) // followed once the send names its message
			} else {
				finished = s.follow(ev)
			}
		}
		if s.replaying && s.replayTo > 0 && ev.Seq >= s.replayTo {
			s.replaying = false
			replayDone = s.replayed
		}
	}()
	meta := map[string]any{"arbor": map[string]any{"session": s.id, "seq": ev.Seq, "event": ev.Type}}
	for _, u := range updates {
		s.a.out.push(sdk.SessionNotification{SessionId: sdk.SessionId(s.id), Update: u, Meta: meta})
	}
	if finished != nil {
		close(finished)
	}
	if replayDone != nil {
		close(replayDone)
	}
}

// translate maps one event to the updates a client shows (mu held).
func (s *session) translate(ev server.Event) []sdk.SessionUpdate {
	p, err := event.Decode(event.Type(ev.Type), ev.Data)
	if err != nil {
		return nil
	}
	switch d := p.(type) {
	case event.UserMessage:
		if d.Via == "inbox" {
			return nil // read by the agent's code from its inbox, not a message of the conversation
		}
		if t := s.turn; t != nil && !s.replaying && (t.queuedSeq != 0 && d.QueuedSeq == t.queuedSeq ||
			t.awaiting && d.From == "user" && strings.TrimSpace(d.Text) == t.text) {
			return nil // this client's own prompt: it shows it already
		}
		switch d.From {
		case "user", "task", "":
			return []sdk.SessionUpdate{sdk.UpdateUserMessageText(d.Text)}
		default:
			return []sdk.SessionUpdate{sdk.UpdateAgentThoughtText(fmt.Sprintf("message from %s:\n%s", d.From, d.Text))}
		}
	case event.AssistantMessage:
		var out []sdk.SessionUpdate
		if d.Text != "" {
			out = append(out, sdk.UpdateAgentMessageText(d.Text))
		}
		for _, c := range d.ToolCalls {
			cl := &cell{acpID: fmt.Sprintf("%s@%d", c.ID, ev.Seq), code: c.Code, status: sdk.ToolCallStatusPending}
			s.cells[c.ID] = cl
			out = append(out, sdk.StartToolCall(sdk.ToolCallId(cl.acpID), cellTitle(c.Code),
				sdk.WithStartKind(sdk.ToolKindExecute), sdk.WithStartStatus(sdk.ToolCallStatusPending),
				sdk.WithStartContent([]sdk.ToolCallContent{codeContent(c.Code)}),
				sdk.WithStartRawInput(map[string]any{"code": c.Code})))
		}
		return out
	case event.ToolStarted:
		cl := s.cellFor(d.CallID, d.Code, ev.Seq)
		cl.status = sdk.ToolCallStatusInProgress
		return []sdk.SessionUpdate{sdk.UpdateToolCall(sdk.ToolCallId(cl.acpID), sdk.WithUpdateStatus(sdk.ToolCallStatusInProgress))}
	case event.ToolOutput:
		cl := s.cellFor(d.CallID, "", ev.Seq)
		cl.out = append(cl.out, d.Text...)
		if len(cl.out) > streamTail {
			cl.out = append([]byte(nil), cl.out[len(cl.out)-streamTail:]...)
			cl.cut = true
		}
		text := string(cl.out)
		if cl.cut {
			text = "…\n" + text
		}
		return []sdk.SessionUpdate{sdk.UpdateToolCall(sdk.ToolCallId(cl.acpID),
			sdk.WithUpdateContent([]sdk.ToolCallContent{codeContent(cl.code), outputContent(text)}))}
	case event.ToolFinished:
		cl := s.cellFor(d.CallID, "", ev.Seq)
		st := sdk.ToolCallStatusCompleted
		if d.Status != "ok" {
			st = sdk.ToolCallStatusFailed
		}
		cl.status = st
		out := d.Output
		if d.Error != "" && !strings.Contains(out, d.Error) {
			out = strings.TrimSpace(out + "\n" + d.Error)
		}
		raw := map[string]any{"status": d.Status, "output": d.Output, "durationMs": d.DurationMs}
		if d.Artifact != "" {
			raw["artifact"] = d.Artifact
		}
		if d.Error != "" {
			raw["error"] = d.Error
		}
		content := []sdk.ToolCallContent{codeContent(cl.code)}
		if out != "" {
			content = append(content, outputContent(out))
		}
		delete(s.cells, d.CallID)
		return []sdk.SessionUpdate{sdk.UpdateToolCall(sdk.ToolCallId(cl.acpID), sdk.WithUpdateStatus(st),
			sdk.WithUpdateContent(content), sdk.WithUpdateRawOutput(raw))}
	case event.SubagentSpawned:
		s.children = append(s.children, childRef{id: d.ID, name: d.Name, task: d.Task})
		if u := s.planUpdate(); u != nil {
			return []sdk.SessionUpdate{*u}
		}
	case event.MessageSent:
		var to []string
		for _, r := range d.Receipts {
			to = append(to, cmpOr(r.Name, short(r.To)))
		}
		return []sdk.SessionUpdate{sdk.UpdateAgentThoughtText(fmt.Sprintf("sent to %s:\n%s", strings.Join(to, ", "), d.Text))}
	case event.TurnFailed:
		out := s.endCells("the turn failed before this cell finished")
		if s.replaying || s.turn == nil {
			out = append(out, sdk.UpdateAgentMessageText(fmt.Sprintf("\n\n[arbor] turn %d failed: %s\n", d.Turn, d.Error)))
		}
		return out
	case event.Interrupted:
		return append(s.endCells("interrupted: "+d.Reason), sdk.UpdateAgentThoughtText(fmt.Sprintf("turn %d interrupted: %s", d.Turn, d.Reason)))
	case event.StateChanged:
		if d.State.String() != server.StateRunning && d.State.String() != server.StateAdmitted {
			return s.endCells("the turn ended before this cell finished")
		}
	case event.Compaction:
		return []sdk.SessionUpdate{sdk.UpdateAgentThoughtText("[arbor] the older conversation was compacted into a summary; the raw events stay in the log")}
	case event.Accepted, event.Merged, event.Rejected, event.Discarded:
		return []sdk.SessionUpdate{sdk.UpdateAgentThoughtText("[arbor] " + ev.Type + ": " + compactJSON(ev.Data))}
	}
	return nil
}

// endCells ends every cell still open — interrupted, or never started because the turn ended
// first — so no tool call is left spinning (mu held).
func (s *session) endCells(why string) []sdk.SessionUpdate {
	if len(s.cells) == 0 {
		return nil
	}
	ids := make([]string, 0, len(s.cells))
	for id := range s.cells {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var out []sdk.SessionUpdate
	for _, id := range ids {
		cl := s.cells[id]
		content := []sdk.ToolCallContent{codeContent(cl.code)}
		if len(cl.out) > 0 {
			content = append(content, outputContent(string(cl.out)))
		}
		content = append(content, sdk.ToolContent(sdk.TextBlock("[arbor] "+why)))
		out = append(out, sdk.UpdateToolCall(sdk.ToolCallId(cl.acpID), sdk.WithUpdateStatus(sdk.ToolCallStatusFailed), sdk.WithUpdateContent(content)))
	}
	s.cells = map[string]*cell{}
	return out
}

// cellFor finds the cell of a call id, or starts one when its assistant_message was not seen
// (an attach after it).
func (s *session) cellFor(callID, code string, seq uint64) *cell {
	if cl := s.cells[callID]; cl != nil {
		if cl.code == "" {
			cl.code = code
		}
		return cl
	}
	cl := &cell{acpID: fmt.Sprintf("%s@%d", callID, seq), code: code}
	s.cells[callID] = cl
	return cl
}

// treeChanged sends the plan again when a child's state (or the session's own) changed.
func (s *session) treeChanged() {
	s.mu.Lock()
	u := s.planUpdate()
	s.mu.Unlock()
	if u != nil {
		s.a.out.push(sdk.SessionNotification{SessionId: sdk.SessionId(s.id), Update: *u,
			Meta: map[string]any{"arbor": map[string]any{"session": s.id, "tree": treeMeta(s.a.treeOf(s.id))}}})
	}
}

// planUpdate is the session's children as plan entries, when they changed since the last
// plan sent (mu held).
func (s *session) planUpdate() *sdk.SessionUpdate {
	s.a.mu.Lock()
	me := s.a.tree[s.id]
	known := map[string]server.Session{}
	for _, c := range me.Children {
		known[c] = s.a.tree[c]
	}
	for _, c := range s.children {
		if _, ok := known[c.id]; !ok {
			known[c.id] = s.a.tree[c.id]
		}
	}
	s.a.mu.Unlock()
	order := append([]string(nil), me.Children...)
	for _, c := range s.children {
		if !contains(order, c.id) {
			order = append(order, c.id)
		}
	}
	if len(order) == 0 {
		return nil
	}
	var entries []sdk.PlanEntry
	for _, id := range order {
		c := known[id]
		name, task := c.Name, c.Task
		for _, r := range s.children {
			if r.id == id {
				name, task = cmpOr(name, r.name), cmpOr(task, r.task)
			}
		}
		label := cmpOr(name, short(id))
		state := c.State.String()
		if c.ID == "" { // spawned, not yet in the tree
			state = server.StateAdmitted
		}
		text := fmt.Sprintf("%s: %s (%s", label, firstLine(task), state)
		if c.Branch != "" {
			text += ", " + c.Branch
		}
		text += ")"
		entries = append(entries, sdk.PlanEntry{Content: text, Priority: sdk.PlanEntryPriorityMedium, Status: planStatus(state),
			Meta: map[string]any{"arbor": map[string]any{"session": id, "state": state, "branch": c.Branch,
				"usage": usageMeta(c.Usage), "total": usageMeta(c.Total)}}})
	}
	sig, _ := json.Marshal(entries)
	if string(sig) == s.plan {
		return nil
	}
	s.plan = string(sig)
	u := sdk.UpdatePlan(entries...)
	return &u
}

func planStatus(state string) sdk.PlanEntryStatus {
	switch state {
	case server.StateAdmitted:
		return sdk.PlanEntryStatusPending
	case server.StateRunning:
		return sdk.PlanEntryStatusInProgress
	}
	return sdk.PlanEntryStatusCompleted
}

// treeMeta is the session tree for _meta.arbor.tree: each session with its state, branch
// and usage, own and with its descendants.
func treeMeta(tree []server.Session) []map[string]any {
	out := make([]map[string]any, 0, len(tree))
	for _, s := range tree {
		out = append(out, map[string]any{"id": s.ID, "parent": s.Parent, "name": s.Name, "task": firstLine(s.Task),
			"state": s.State, "branch": s.Branch, "usage": usageMeta(s.Usage), "total": usageMeta(s.Total)})
	}
	return out
}

func usageMeta(u server.Usage) map[string]any {
	return map[string]any{"modelCalls": u.ModelCalls, "inputTokens": u.InputTokens, "outputTokens": u.OutputTokens,
		"costUSD": u.CostUSD, "kernelExecs": u.KernelExecs}
}

func cellTitle(code string) string {
	line := firstLine(code)
	for _, l := range strings.Split(code, "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
			line = t
			break
		}
	}
	if r := []rune(line); len(r) > 72 {
		line = string(r[:71]) + "…"
	}
	return "python: " + line
}

func codeContent(code string) sdk.ToolCallContent {
	return sdk.ToolContent(sdk.TextBlock("```python\n" + code + "\n```"))
}

func outputContent(text string) sdk.ToolCallContent {
	return sdk.ToolContent(sdk.TextBlock("```\n" + strings.TrimRight(text, "\n") + "\n```"))
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func compactJSON(raw json.RawMessage) string {
	if len(raw) > 400 {
		return string(raw[:400]) + "…"
	}
	return string(raw)
}
