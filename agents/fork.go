package agents

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/eventlog"
	"github.com/arborhq/arbor/agents/model"
	"github.com/arborhq/arbor/gitstate"
)

// Fork makes a new root session from the history of session id up to event atSeq (0 = all of
// it): its branch starts at the latest checkpoint at or before that point (the base commit if
// there is none) in its own worktree, and its conversation is the source's up to there. The
// fork is idle; a message starts it. The source's log, branch and worktree are not touched.
func (s *Service) Fork(ctx context.Context, id string, atSeq uint64, name string) (*Session, error) {
	return s.ForkKeyed(ctx, id, atSeq, name, "")
}

// ForkKeyed is Fork recording key, the journal key of the client's request, on the fork (see
// [Service.RequestApplied]).
func (s *Service) ForkKeyed(ctx context.Context, id string, atSeq uint64, name, key string) (*Session, error) {
	src, err := s.Get(id)
	if err != nil {
		return nil, err
	}
	last := src.log.LastSeq()
	if atSeq == 0 {
		atSeq = last
	}
	if atSeq > last {
		return nil, fmt.Errorf("fork %s at seq %d: its log ends at seq %d (see `arbor log %s`)", src.meta.ID, atSeq, last, src.meta.ID[:8])
	}
	cps, turns, err := s.checkpointsOf(src.ws, src.meta.ID, atSeq)
	if err != nil {
		return nil, fmt.Errorf("fork %s: %w", src.meta.ID, err)
	}
	commit := src.meta.BaseCommit
	if len(cps) > 0 {
		commit = cps[len(cps)-1].Commit
	}
	if c, err := s.cellCheckpointAfter(src.ws, src.meta.ID, atSeq); err != nil {
		return nil, fmt.Errorf("fork %s: %w", src.meta.ID, err)
	} else if c != "" {
		commit = c
	}
	cfg, err := src.ws.config(s.overridesFor(src.ws.Root))
	if err != nil {
		return nil, err
	}
	if err := cfg.Trust.Check(); err != nil {
		return nil, err
	}
	if err := src.ws.checkBudget(ctx, cfg.Worktrees, commit); err != nil {
		return nil, err
	}
	var prof Meta
	if cfg, err = withProfile(cfg, "", &src.meta, &prof); err != nil {
		return nil, err
	}
	_, current := src.modelClient()
	modelName, mc, err := cfg.ResolveModel(current)
	if err != nil {
		return nil, err
	}
	client, err := newModelClient(modelName, mc, s.log)
	if err != nil {
		return nil, err
	}
	nid := newID()
	task := src.task()
	slug := gitstate.Slug(cmp.Or(task, "session"))
	if name != "" {
		slug = gitstate.Slug(name)
	}
	meta := Meta{
		ID: nid, Name: name, Task: task, Model: modelName, BaseCommit: src.meta.BaseCommit,
		Branch: "arbor/" + slug + "-" + nid[:8], Worktree: filepath.Join(src.ws.WorktreeDir, nid),
		ForkOf: src.meta.ID, ForkSeq: atSeq, Workspace: src.ws.Root, Created: time.Now().UTC(),
		Profile: prof.Profile, ProfileSettings: prof.ProfileSettings,
		RequestKey: key, Harness: src.meta.Harness,
	}
	repo := src.ws.Repo
	// Registered here; the files are written in the background (see worktreeGate), so forks
	// made at once do not wait for each other's trees.
	pending, err := s.startWorktree(ctx, repo, gitstate.WorktreeSpec{Name: nid, Branch: meta.Branch, Base: commit, Dir: meta.Worktree}, !cfg.Worktree.Empty())
	if err != nil {
		return nil, fmt.Errorf("fork %s: %w", src.meta.ID, err)
	}
	sess, err := s.open(src.ws, meta, cfg, client)
	if err != nil {
		// The branch holds nothing new yet: it is reachable from the source's and goes.
		if pending != nil {
			pending.Wait(context.WithoutCancel(ctx))
		}
		repo.Discard(context.WithoutCancel(ctx), meta.Worktree, meta.Branch, false)
		return nil, err
	}
	if _, err := sess.append(ctx, meta); err != nil {
		return nil, err
	}
	rec, err := sess.append(ctx, event.Forked{Source: src.meta.ID, Seq: atSeq, Commit: commit, Turns: turns})
	if err != nil {
		return nil, err
	}
	sess.replay([]eventlog.Record{rec})
	// A fork is ready once registered, as a new session is: its files are written in the
	// background (arbor ls shows "writing"), a message's first model call goes out meanwhile,
	// and its first cell, diff or checkpoint waits for them (worktreeGate). So forks made at
	// once cost each other only their registrations, not each other's trees.
	sess.gateWorktree(pending, nil, nil)
	if cfg.Worktrees.Bounded() {
		sess.reclaimLater()
	}
	if pending != nil {
		s.worktreeStep(nid, "writing")
	}
	sess.setState(ctx, Admitted, "")
	// Like any new worktree, a fork's gets the untracked files and setup arbor.json lists
	// (with those, the files were written before this: see startWorktree).
	if err := sess.setupWorktree(ctx); err != nil {
		sess.mu.Lock()
		sess.conv = append(sess.conv, setupFailedNote(err.Error()))
		sess.mu.Unlock()
	}
	sess.setState(ctx, Idle, "")
	return sess, nil
}

// replayFork rebuilds a fork's inherited state from its source's log: conversation, turn count
// and branch head. The caller (replay) holds s.mu.
func (s *Session) replayFork(f event.Forked) {
	recs, err := s.svc.history(s.ws, f.Source, f.Seq)
	if err != nil {
		s.svc.log.Error("replay fork", "session", s.meta.ID, "source", f.Source, "err", err)
		s.conv = append(s.conv, model.Message{Role: "user", Content: fmt.Sprintf(
			"[arbor] this session was forked from session %s, whose history could not be read (%v); ask the user for context", f.Source, err)})
		return
	}
	src := &Session{svc: s.svc, ws: s.ws, meta: Meta{ID: f.Source, Task: s.meta.Task}, head: s.head}
	src.replay(closeForkedCells(recs))
	s.conv = append(s.conv, src.conv...)
	// The model must know its kernel namespace did not come along; the notice is part of the
	// fork's history, so a fork of this fork replays it too.
	s.conv = append(s.conv, model.Message{Role: "user", Content: fmt.Sprintf(
		"[arbor] This session is a fork of session %s at event %d, with its own branch and worktree whose files "+
			"are as they were at that point. The Python kernel is new: variables defined before the fork are gone.",
		f.Source, f.Seq)})
	s.turn += src.turn
	if f.Commit != "" {
		s.head = f.Commit
	}
}

// closeForkedCells answers the tool calls still running at the fork point, so the fork's
// model learns why their results are missing.
func closeForkedCells(recs []eventlog.Record) []eventlog.Record {
	open := map[string]bool{}
	var order []string
	for _, r := range recs {
		switch event.Type(r.Type) {
		case event.TypeAssistantMessage:
			a, _ := event.As[event.AssistantMessage](event.TypeAssistantMessage, r.Data)
			for _, c := range a.ToolCalls {
				open[c.ID] = true
				order = append(order, c.ID)
			}
		case event.TypeToolFinished:
			t, _ := event.As[event.ToolFinished](event.TypeToolFinished, r.Data)
			delete(open, t.CallID)
		}
	}
	for _, id := range order {
		if open[id] {
			data, _ := json.Marshal(event.ToolFinished{CallID: id,
				Output: "[arbor] the session was forked while this cell ran; its result is not part of this session's history"})
			recs = append(recs, eventlog.Record{Type: string(event.TypeToolFinished), Data: data})
		}
	}
	return recs
}

// history returns the records of session id up to seq that make up a conversation, from the
// live session or, during recovery before it is registered, from its file.
func (s *Service) history(ws *Workspace, id string, upTo uint64) ([]eventlog.Record, error) {
	var recs []eventlog.Record
	var err error
	s.mu.Lock()
	src := s.sessions[id]
	s.mu.Unlock()
	if src != nil {
		recs, err = src.Events(0)
	} else {
		recs, err = eventlog.ReadFile(filepath.Join(ws.SessionsDir, id, "events.jsonl"))
	}
	if err != nil {
		return nil, fmt.Errorf("read the log of session %s: %w", id, err)
	}
	var out []eventlog.Record
	for _, r := range recs {
		if r.Seq > upTo {
			break
		}
		switch event.Type(r.Type) {
		case event.TypeUserMessage, event.TypeAssistantMessage, event.TypeToolFinished, event.TypeTurnStarted, event.TypeCheckpoint, event.TypeCompaction, event.TypeForked:
			out = append(out, r)
		}
	}
	return out, nil
}

// checkpointsOf lists the commits of session id's history up to seq, inherited ones of a fork
// first, and the number of turns started by then.
func (s *Service) checkpointsOf(ws *Workspace, id string, upTo uint64) ([]event.Checkpoint, int, error) {
	recs, err := s.history(ws, id, upTo)
	if err != nil {
		return nil, 0, err
	}
	var cps []event.Checkpoint
	turns := 0
	for _, r := range recs {
		switch event.Type(r.Type) {
		case event.TypeTurnStarted:
			turns++
		case event.TypeCheckpoint:
			if c, err := event.As[event.Checkpoint](event.TypeCheckpoint, r.Data); err == nil && c.Commit != "" {
				cps = append(cps, c)
			}
		case event.TypeForked:
			f, err := event.As[event.Forked](event.TypeForked, r.Data)
			if err != nil {
				return nil, 0, fmt.Errorf("session %s event %d: %w", id, r.Seq, err)
			}
			inherited, n, err := s.checkpointsOf(ws, f.Source, f.Seq)
			if err != nil {
				return nil, 0, err
			}
			cps = append(inherited, cps...)
			turns += n
		}
	}
	return cps, turns, nil
}

// cellCheckpointAfter returns the checkpoint of the cell whose result is at seq, or "": a
// cell's files are committed just after its tool_finished, so a fork at that result takes
// them along, as its conversation says the cell ran.
func (s *Service) cellCheckpointAfter(ws *Workspace, id string, seq uint64) (string, error) {
	recs, err := s.history(ws, id, seq+64)
	if err != nil {
		return "", err
	}
	atResult := false
	for _, r := range recs {
		switch {
		case r.Seq < seq:
			continue
		case r.Seq == seq:
			if event.Type(r.Type) != event.TypeToolFinished {
				return "", nil
			}
			atResult = true
			continue
		}
		switch event.Type(r.Type) {
		case event.TypeCheckpoint:
			if c, err := event.As[event.Checkpoint](event.TypeCheckpoint, r.Data); err == nil && atResult {
				return c.Commit, nil
			}
		case event.TypeToolStarted, event.TypeAssistantMessage, event.TypeTurnStarted, event.TypeUserMessage, event.TypeForked:
			return "", nil // the cell made no checkpoint
		}
	}
	return "", nil
}

// DiffTurn returns the change one turn made: its last checkpoint against the checkpoint before
// it (or the session's base commit). Turns of a fork's source count as the fork's own.
func (s *Service) DiffTurn(ctx context.Context, id string, turn int) (*gitstate.Diff, error) {
	sess, err := s.Get(id)
	if err != nil {
		return nil, err
	}
	if turn < 1 {
		return nil, fmt.Errorf("diff turn %d of %s: turns count from 1", turn, sess.meta.ID)
	}
	cps, turns, err := s.checkpointsOf(sess.ws, sess.meta.ID, math.MaxUint64)
	if err != nil {
		return nil, fmt.Errorf("diff turn %d of %s: %w", turn, sess.meta.ID, err)
	}
	if turn > turns {
		return nil, fmt.Errorf("diff turn %d of %s: the session has had %d turn(s)", turn, sess.meta.ID, turns)
	}
	from, to := sess.meta.BaseCommit, ""
	for _, c := range cps {
		switch {
		case c.Turn < turn:
			from = c.Commit
		case c.Turn == turn:
			to = c.Commit
		}
	}
	if to == "" {
		return nil, fmt.Errorf("diff turn %d of %s: %w", turn, sess.meta.ID, errNoCheckpoint)
	}
	return sess.ws.Repo.DiffCommits(ctx, from, to)
}

var errNoCheckpoint = errors.New("that turn changed no files, so it made no checkpoint (see `arbor log` for what it did)")

// shortID is the id as commands print it.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n    ")
}
