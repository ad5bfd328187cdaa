package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/arborhq/arbor/agents/eventlog"
	"github.com/arborhq/arbor/agents/model"
	"github.com/arborhq/arbor/kernel"
)

// Recover brings back the sessions of every workspace the daemon has served. Sessions whose
// kernel was lost come back inactive (a message revives them); messages that were queued but
// not delivered start a turn again. A session whose log is corrupt is skipped and reported.
func (s *Service) Recover(ctx context.Context) error {
	if pids, err := kernel.ReapOrphans(filepath.Join(s.opts.StateDir, "kernels")); err != nil {
		s.log.Warn("reap orphan kernels", "err", err)
	} else if len(pids) > 0 {
		s.log.Info("reaped kernels orphaned by a previous daemon", "pids", pids)
	}
	roots, err := s.loadRegistry()
	if err != nil {
		return err
	}
	var errs []error
	for _, root := range roots {
		if _, err := os.Stat(root); err != nil {
			continue
		}
		ws, err := s.workspaceFor(root)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		entries, _ := os.ReadDir(ws.SessionsDir)
		var resume []*Session
		unreadable := map[string]bool{}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			sess, err := s.recoverSession(ctx, ws, e.Name())
			if err != nil {
				s.log.Error("recover session", "session", e.Name(), "err", err)
				errs = append(errs, err)
				unreadable[e.Name()] = true
				continue
			}
			if sess != nil {
				resume = append(resume, sess)
			}
		}
		if err := s.reconcile(ctx, ws, unreadable); err != nil {
			errs = append(errs, err)
		}
		// Turns resume only once the worktrees are whole again and stale locks are gone.
		for _, sess := range resume {
			s.wg.Add(1)
			go sess.runTurns()
		}
	}
	return errors.Join(errs...)
}

// reconcile brings the workspace's worktrees in line with its sessions: a worktree made for a
// session that was never recorded (the daemon died in between) is cleaned up without losing
// its work; a session whose worktree vanished gets it back from its branch.
func (s *Service) reconcile(ctx context.Context, ws *Workspace, unreadable map[string]bool) error {
	known := map[string]string{}
	// A session whose log could not be read (quarantined, see arbor fsck) keeps its worktree.
	for id := range unreadable {
		known[id] = filepath.Join(ws.WorktreeDir, id)
	}
	for _, sess := range s.all() {
		if sess.ws == ws && !sess.discarded() {
			known[sess.meta.ID] = sess.meta.Worktree
		}
	}
	rep, err := ws.Repo.Reconcile(ctx, known)
	if err != nil {
		return fmt.Errorf("reconcile worktrees of %s: %w", ws.Root, err)
	}
	for _, id := range rep.Recreated {
		if sess, err := s.Get(id); err == nil {
			sess.append(ctx, EvRecovered, map[string]any{"worktree": "recreated from branch " + sess.meta.Branch})
		}
	}
	if len(rep.Orphans)+len(rep.Recreated)+len(rep.StaleLocks)+len(rep.Problems) > 0 {
		s.log.Warn("reconciled worktrees", "workspace", ws.Root, "orphans", len(rep.Orphans),
			"recreated", rep.Recreated, "staleLocks", rep.StaleLocks, "problems", rep.Problems)
	}
	return nil
}

// recoverSession registers one session from its log; it returns the session when it has
// undelivered messages and should resume (the caller starts its turn).
func (s *Service) recoverSession(ctx context.Context, ws *Workspace, id string) (*Session, error) {
	s.mu.Lock()
	_, known := s.sessions[id]
	s.mu.Unlock()
	if known {
		return nil, nil
	}
	path := filepath.Join(ws.SessionsDir, id, "events.jsonl")
	recs, err := eventlog.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w (run `arbor fsck`)", id, err)
	}
	if len(recs) == 0 || recs[0].Type != string(EvSessionCreated) {
		return nil, fmt.Errorf("session %s: log %s does not start with session_created", id, path)
	}
	var meta Meta
	if err := json.Unmarshal(recs[0].Data, &meta); err != nil {
		return nil, fmt.Errorf("session %s: session_created: %w", id, err)
	}
	cfg, err := ws.config(s.opts.Overrides)
	if err != nil {
		return nil, err
	}
	var client *model.Client
	if name, mc, err := cfg.ResolveModel(meta.Model); err == nil {
		client, _ = newModelClient(name, mc, s.log)
	}
	sess, err := s.open(ws, meta, cfg, client)
	if err != nil {
		return nil, err
	}
	sess.replay(recs)
	st := sess.State()
	if st == Running || st == Admitted || st == Idle {
		sess.append(ctx, EvRecovered, map[string]any{"previousState": st.String()})
		sess.setState(ctx, Inactive, "")
	}
	sess.mu.Lock()
	resume := len(sess.pending) > 0 && sess.state != Stopped && client != nil
	if resume {
		sess.turnActive = true
	}
	sess.mu.Unlock()
	sess.announce()
	if resume {
		return sess, nil
	}
	return nil, nil
}

// replay rebuilds the in-memory state from the log: state, usage, conversation, pending
// messages and the latest checkpoint.
func (s *Session) replay(recs []eventlog.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delivered := map[uint64]bool{}
	var queued []pendingMsg
	for _, r := range recs {
		switch EventType(r.Type) {
		case EvStateChanged:
			var d struct{ State, Reason string }
			json.Unmarshal(r.Data, &d)
			// Stopped is final here as in a live session: logs written before state changes
			// were serialised can hold a late running or idle record after it.
			if st, err := ParseState(d.State); err == nil && s.state != Stopped {
				s.state, s.errMsg = st, d.Reason
			}
		case EvMessageQueued:
			var m pendingMsg
			json.Unmarshal(r.Data, &m)
			m.Seq = r.Seq
			queued = append(queued, m)
			if m.From == "user" {
				s.usage.HumanInterventions++
			}
		case EvMessageSent:
			var m struct {
				Text string `json:"text"`
			}
			json.Unmarshal(r.Data, &m)
			if m.Text != "" {
				s.usage.Messages++
			}
		case EvUserMessage:
			var u userEvent
			json.Unmarshal(r.Data, &u)
			delivered[u.QueuedSeq] = true
			if u.Via != "inbox" {
				s.conv = append(s.conv, model.Message{Role: "user", Content: u.Text})
			}
		case EvAssistantMessage:
			var a assistantEvent
			json.Unmarshal(r.Data, &a)
			s.conv = append(s.conv, model.Message{Role: "assistant", Content: a.Text, ToolCalls: a.ToolCalls})
			s.usage.ModelCalls++
			s.usage.InputTokens += a.Usage.InputTokens
			s.usage.OutputTokens += a.Usage.OutputTokens
			s.usage.CostUSD += a.Usage.CostUSD
			s.usage.Retries += int64(a.Retries)
		case EvToolFinished:
			var t struct {
				CallID string `json:"callId"`
				Output string `json:"output"`
			}
			json.Unmarshal(r.Data, &t)
			s.conv = append(s.conv, model.Message{Role: "tool", ToolCallID: t.CallID, Content: t.Output})
			s.usage.KernelExecs++
		case EvCompaction:
			var c struct {
				Summary       string      `json:"summary"`
				LiveVariables string      `json:"liveVariables"`
				Kept          int         `json:"kept"`
				Usage         model.Usage `json:"usage"`
			}
			json.Unmarshal(r.Data, &c)
			s.usage.ModelCalls++
			s.usage.InputTokens += c.Usage.InputTokens
			s.usage.OutputTokens += c.Usage.OutputTokens
			s.usage.CostUSD += c.Usage.CostUSD
			keep := min(c.Kept, len(s.conv))
			s.conv = append([]model.Message{{Role: "user", Content: summaryMessage(s.meta.Task, c.Summary, c.LiveVariables)}}, s.conv[len(s.conv)-keep:]...)
		case EvSubagentSpawned:
			// The parent's own log names its children, so links survive a restart whatever
			// order the sessions are recovered in.
			var c struct {
				ID string `json:"id"`
			}
			json.Unmarshal(r.Data, &c)
			if c.ID != "" {
				s.children = append(s.children, c.ID)
			}
		case EvTurnStarted:
			s.turn++
		case EvCheckpoint:
			var c struct{ Commit string }
			json.Unmarshal(r.Data, &c)
			s.head = c.Commit
		case EvForked:
			s.replayFork(r)
		case EvTurnFailed:
			// The live session answered the tool calls the failed turn left open; so does replay,
			// at the same point (a failed checkpoint is recorded the same way but closes nothing).
			var d struct {
				Error      string `json:"error"`
				Checkpoint bool   `json:"checkpoint"`
			}
			json.Unmarshal(r.Data, &d)
			if !d.Checkpoint {
				s.conv = closeDanglingToolCalls(s.conv, turnFailedNote(d.Error))
			}
		case EvWorktreeSetup:
			// A root session's task carries a setup failure; a fork has no task of its own,
			// so the failure is a note in its conversation.
			var d struct {
				OK    bool   `json:"ok"`
				Error string `json:"error"`
			}
			json.Unmarshal(r.Data, &d)
			if s.meta.ForkOf != "" && !d.OK {
				s.conv = append(s.conv, setupFailedNote(d.Error))
			}
		}
	}
	for _, m := range queued {
		if !delivered[m.Seq] {
			s.pending = append(s.pending, m)
		}
	}
	// A tool call without a result (the daemon died mid-cell) still needs an answer for the
	// conversation to be valid for the model.
	s.conv = closeDanglingToolCalls(s.conv, "[arbor] this cell was interrupted when the daemon stopped; its result is unknown")
}

// closeDanglingToolCalls answers every tool call of conv that has no result with note.
func closeDanglingToolCalls(conv []model.Message, note string) []model.Message {
	answered := map[string]bool{}
	for _, m := range conv {
		if m.Role == "tool" {
			answered[m.ToolCallID] = true
		}
	}
	var out []model.Message
	for _, m := range conv {
		out = append(out, m)
		if m.Role != "assistant" {
			continue
		}
		for _, c := range m.ToolCalls {
			if !answered[c.ID] {
				out = append(out, model.Message{Role: "tool", ToolCallID: c.ID, Content: note})
			}
		}
	}
	return out
}
