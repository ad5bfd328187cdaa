package agents

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/arborhq/arbor/agents/event"
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
		var owned []string // kernel dirs of the sessions whose logs this daemon now holds
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
			owned = append(owned, filepath.Join(ws.SessionsDir, e.Name(), "kernel"))
			// An eval task's session (its harness pinned) is its run's to decide: the run stops
			// it and runs the task again, so it does not call the model meanwhile.
			if sess != nil && sess.meta.Harness == nil {
				resume = append(resume, sess)
			}
		}
		// A kernel the previous daemon started just before it died, too late to record it.
		if pids, err := kernel.ReapUnder(owned); err != nil {
			s.log.Warn("reap kernels", "workspace", ws.Root, "err", err)
		} else if len(pids) > 0 {
			s.log.Info("reaped kernels a previous daemon left unrecorded", "workspace", ws.Root, "pids", pids)
		}
		if err := s.reconcile(ctx, ws, unreadable); err != nil {
			errs = append(errs, err)
		}
		// Turns resume only once the worktrees are whole again and stale locks are gone.
		for _, sess := range resume {
			if !s.spawn(sess.runTurns) {
				break // closing: the messages wait in the logs for the next start
			}
		}
		// Active goals go on with what they have spent; one with nothing queued starts its
		// next turn now (or parks on its children, or ends at a budget used up meanwhile).
		for _, sess := range s.all() {
			if sess.ws == ws && sess.meta.Harness == nil {
				sess.resumeGoal()
			}
		}
		s.recoverHeartbeats(ctx, ws)
	}
	s.resumeEvals(ctx)
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
	// A child's files may wait until it runs: one never all written when the daemon stopped
	// (queued behind maxRunning, say) is not written now, all of them at once, but released,
	// and checked out at its next use.
	lazy := map[string]bool{}
	for _, sess := range s.all() {
		if sess.ws == ws && sess.meta.Parent != "" {
			lazy[sess.meta.ID] = true
		}
	}
	rep, err := ws.Repo.ReconcileDeferring(ctx, known, lazy)
	if err != nil {
		return fmt.Errorf("reconcile worktrees of %s: %w", ws.Root, err)
	}
	for _, sess := range s.all() {
		if sess.ws == ws && ws.Repo.Released(sess.meta.ID) {
			sess.mu.Lock()
			sess.released = true // given up under the worktree bounds: checked out at its next use
			sess.mu.Unlock()
		}
	}
	for _, id := range rep.Recreated {
		if sess, err := s.Get(id); err == nil {
			sess.append(ctx, event.Recovered{Worktree: "recreated from branch " + sess.meta.Branch})
		}
	}
	if len(rep.Orphans)+len(rep.Recreated)+len(rep.Deferred)+len(rep.StaleLocks)+len(rep.Problems) > 0 {
		s.log.Warn("reconciled worktrees", "workspace", ws.Root, "orphans", len(rep.Orphans),
			"recreated", rep.Recreated, "deferred", rep.Deferred, "staleLocks", rep.StaleLocks, "problems", rep.Problems)
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
	if len(recs) == 0 || recs[0].Type != string(event.TypeSessionCreated) {
		return nil, fmt.Errorf("session %s: log %s does not start with session_created", id, path)
	}
	meta, err := event.As[event.SessionCreated](event.TypeSessionCreated, recs[0].Data)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", id, err)
	}
	cfg, err := ws.config(s.overridesFor(ws.Root))
	if err != nil {
		return nil, err
	}
	if err := cfg.Trust.Check(); err != nil {
		// The session exists and is recovered; it goes on without the settings it was not
		// trusted with (they were not applied), and the daemon log says which.
		s.log.Warn("recovered session runs without its repository's untrusted settings", "session", id, "err", err)
	}
	if cfg, err = recordedProfile(cfg, meta); err != nil {
		s.log.Warn("recovered session's profile", "session", id, "profile", meta.Profile, "err", err)
	}
	sess, err := s.open(ws, meta, cfg, nil)
	if err != nil {
		return nil, err
	}
	sess.replay(recs)
	// The model is the one the log names last (a model_changed record, else the session's).
	var client *model.Client
	_, current := sess.modelClient()
	if name, mc, err := cfg.ResolveModel(current); err == nil {
		client, _ = newModelClient(name, mc, s.log)
	}
	sess.mu.Lock()
	sess.client = client
	sess.mu.Unlock()
	if meta.ForkOf == "" && !meta.Open && !hasRecord(recs, event.TypeMessageQueued) {
		// The daemon died between the session's first records and its task: queue it now,
		// so the session does what it was created for.
		if rec, err := sess.append(ctx, event.MessageQueued{From: "task", Text: meta.Task, Mode: "follow_up"}); err == nil {
			sess.mu.Lock()
			sess.pending = append(sess.pending, pendingMsg{Seq: rec.Seq, From: "task", Text: meta.Task, Mode: "follow_up"})
			sess.mu.Unlock()
		}
	}
	st := sess.State()
	if st == event.Unknown || st == Running || st == Admitted || st == Idle {
		sess.append(ctx, event.Recovered{PreviousState: st})
		sess.setState(ctx, Inactive, "")
	}
	sess.mu.Lock()
	resume := len(sess.pending) > 0 && sess.state != Stopped && client != nil
	if resume {
		sess.holder = turnHolder
	}
	sess.mu.Unlock()
	sess.announce()
	if resume {
		return sess, nil
	}
	return nil, nil
}

// replay rebuilds the in-memory state from the log: state, usage, conversation, pending
// messages and the latest checkpoint. A record that does not decode is logged and skipped: a
// field of the wrong shape must not make a whole session unrecoverable.
func (s *Session) replay(recs []eventlog.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delivered := map[uint64]bool{}
	var queued []pendingMsg
	for _, r := range recs {
		p, err := event.Decode(event.Type(r.Type), r.Data)
		if err != nil {
			s.svc.log.Warn("replay: skip record", "session", s.meta.ID, "seq", r.Seq, "err", err)
			continue
		}
		s.replayGoal(r, p)
		switch d := p.(type) {
		case event.StateChanged:
			// Stopped is final here as in a live session: logs written before state changes
			// were serialised can hold a late running or idle record after it.
			if s.state != Stopped {
				s.state, s.errMsg = d.State, ""
				if d.State == Failed {
					s.errMsg = d.Reason
				}
			}
		case event.MessageQueued:
			queued = append(queued, pendingMsg{Seq: r.Seq, From: d.From, Text: d.Text, Mode: d.Mode})
			s.noteTitle(d.From, d.Text)
			if d.From == "user" {
				s.usage.HumanInterventions++
			}
		case event.MessageSent:
			if d.Text != "" {
				s.usage.Messages++
			}
		case event.UserMessage:
			delivered[d.QueuedSeq] = true
			if d.Via != "inbox" {
				s.conv = append(s.conv, model.Message{Role: "user", Content: d.Text})
			}
		case event.AssistantMessage:
			s.conv = append(s.conv, model.Message{Role: "assistant", Content: d.Text, ToolCalls: toolCallsModel(d.ToolCalls)})
			s.usage.ModelCalls++
			s.usage.addTokens(d.Usage)
			s.usage.Retries += int64(d.Retries)
		case event.ToolFinished:
			s.conv = append(s.conv, model.Message{Role: "tool", ToolCallID: d.CallID, Content: d.Output})
			s.usage.KernelExecs++
			s.lastCell = max(s.lastCell, d.ExecutionCount)
		case event.Compaction:
			s.usage.ModelCalls++
			s.usage.addTokens(d.Usage)
			keep := min(d.Kept, len(s.conv))
			s.conv = append([]model.Message{{Role: "user", Content: summaryMessage(s.taskLocked(), d.Summary, d.LiveVariables)}}, s.conv[len(s.conv)-keep:]...)
		case event.SubagentSpawned:
			// The parent's own log names its children, so links survive a restart whatever
			// order the sessions are recovered in.
			if d.ID != "" {
				s.children = append(s.children, d.ID)
			}
		case event.HarnessApplied:
			s.usage.HarnessEdits++
		case event.Refined:
			s.usage.addRefine(d)
		case event.ModelChanged:
			s.model = d.Model
		case event.TurnStarted:
			s.turn++
		case event.Checkpoint:
			s.head = d.Commit
		case event.Forked:
			s.replayFork(d)
		case event.Discarded:
			s.archived = &d
		case event.Rejected:
			s.conv = append(s.conv, rejectedNote(d))
		case event.TurnFailed:
			// The live session answered the tool calls the failed turn left open; so does replay,
			// at the same point (a failed checkpoint is recorded the same way but closes nothing).
			if !d.Checkpoint {
				s.conv = closeDanglingToolCalls(s.conv, turnFailedNote(d.Error))
			}
		case event.WorktreeSetup:
			// A root session's task carries a setup failure; a fork has no task of its own,
			// so the failure is a note in its conversation.
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

func hasRecord(recs []eventlog.Record, t event.Type) bool {
	for _, r := range recs {
		if r.Type == string(t) {
			return true
		}
	}
	return false
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
