package agents

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/eventlog"
	"github.com/arborhq/arbor/gitstate"
)

// Accept brings a session's change onto the user's current branch in the main worktree: all of
// it, some files, or some hunks (path → indexes into the session diff's hunks of that file), as
// one squashed commit or, with merge, a merge commit. A dirty tree in the files involved or a
// conflict refuses it with a *gitstate.DirtyError or *gitstate.ConflictError naming the files,
// and leaves the user's tree as it was.
func (s *Service) Accept(ctx context.Context, id string, files []string, hunks map[string][]int, merge bool) (*gitstate.AcceptResult, error) {
	return s.AcceptAt(ctx, id, Review{}, files, hunks, merge)
}

// Review is the diff a user reviewed before accepting or rejecting part of it: its head
// (DiffResult.Head) and, when given, the accepted point it started from (DiffResult.Accepted,
// "" for none). A checkpoint made since, or an accept by someone else meanwhile, refuses the
// request: its hunk indexes would point at other hunks. Zero: the diff as it is now.
type Review struct {
	Head     string
	Accepted *string
}

// AcceptAt is Accept of the session's change as the user reviewed it (see Review), so a
// checkpoint made since then is not taken unseen, and hunk indexes refer to that diff.
func (s *Service) AcceptAt(ctx context.Context, id string, rev Review, files []string, hunks map[string][]int, merge bool) (*gitstate.AcceptResult, error) {
	sess, err := s.Get(id)
	if err != nil {
		return nil, err
	}
	if sess.discarded() {
		return nil, fmt.Errorf("%w: session %s was discarded; fork it or restore its archived branch to accept its work", ErrInvalidState, sess.meta.ID)
	}
	sess.reviewMu.Lock() // one accept or reject of a session at a time: each moves its accepted point
	defer sess.reviewMu.Unlock()
	head := rev.Head
	sess.mu.Lock()
	turns := sess.turn
	sess.mu.Unlock()
	o := gitstate.AcceptOptions{Head: sess.meta.Branch, Files: files, Hunks: hunks, Merge: merge,
		Message: acceptMessage(sess.meta, turns, files, hunks)}
	if head != "" {
		// The reviewed head must be one of this session's commits.
		if mb, err := sess.ws.Repo.MergeBase(ctx, head, sess.meta.Branch); err != nil || mb != head {
			return nil, fmt.Errorf("%w: accept %s: %s is not a commit of its branch %s (diff again)", ErrInvalidState, shortID(sess.meta.ID), head, sess.meta.Branch)
		}
		o.Head = head
	}
	from, stored, err := sess.reviewBase(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkReviewed(sess, rev, from); err != nil {
		return nil, err
	}
	if from != "" {
		// Part was accepted before: the review was of the remaining diff, from that point.
		o.From = from
	} else if len(hunks) > 0 {
		// Hunk indexes point into the session's diff: refuse if it is no longer the diff the
		// user reviewed against this branch.
		mb, err := sess.ws.Repo.MergeBase(ctx, sess.meta.BaseCommit, o.Head)
		if err != nil {
			return nil, fmt.Errorf("accept %s: %w", sess.meta.ID, err)
		}
		o.Base = mb
	}
	res, err := sess.ws.Repo.Accept(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", shortID(sess.meta.ID), err)
	}
	// What was taken leaves the remaining diff.
	if err := sess.ws.Repo.SetAccepted(ctx, sess.meta.ID, res.Selected, res.Commit, stored); err != nil {
		s.log.Warn("record the accepted part", "session", sess.meta.ID, "err", err)
	}
	mode := "squash"
	if merge {
		mode = "merge"
	}
	sess.append(ctx, event.Accepted{Commit: res.Commit, Branch: res.Branch, Files: res.Files, Mode: mode})
	return res, nil
}

func acceptMessage(m Meta, turns int, files []string, hunks map[string][]int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n", firstLine(m.Task))
	what := "all of its changes"
	if len(files) > 0 || len(hunks) > 0 {
		what = "part of its changes"
	}
	fmt.Fprintf(&b, "Accepted %s from Arbor session %s (branch %s, %s).\n", what, shortID(m.ID), m.Branch, plural(turns, "turn"))
	if m.ForkOf != "" {
		fmt.Fprintf(&b, "The session is a fork of %s at event %d.\n", shortID(m.ForkOf), m.ForkSeq)
	}
	if t := strings.TrimSpace(m.Task); t != firstLine(m.Task) {
		fmt.Fprintf(&b, "\nTask:\n%s\n", indent(t))
	}
	fmt.Fprintf(&b, "\nArbor-Session: %s\n", m.ID)
	return b.String()
}

// Merge brings a child session's branch into its parent's worktree as a merge commit, after
// checkpointing the parent so its own uncommitted work is kept apart. Conflicts are an error
// listing the files, and leave the parent's worktree as it was.
func (s *Service) Merge(ctx context.Context, id string) (*gitstate.AcceptResult, error) {
	return s.MergeResolved(ctx, id, gitstate.Resolutions{})
}

// MergeResolved is Merge with the conflicts settled by the user, for every file
// [Service.Conflicts] lists, against the heads it returned.
func (s *Service) MergeResolved(ctx context.Context, id string, resolutions gitstate.Resolutions) (*gitstate.AcceptResult, error) {
	parent, child, release, err := s.reserveParent(id, "merge")
	if err != nil {
		return nil, err
	}
	defer release()
	return s.mergeChild(ctx, parent, child, resolutions)
}

// reserveParent finds a child session and its parent, and reserves the parent for a user's
// merge (or the look at one's conflicts), as going inactive does: a turn wanted meanwhile (a
// completion notice, a message) starts when it is released.
func (s *Service) reserveParent(id, what string) (parent, child *Session, release func(), err error) {
	child, err = s.Get(id)
	if err != nil {
		return nil, nil, nil, err
	}
	if child.meta.Parent == "" {
		return nil, nil, nil, fmt.Errorf("%w: session %s is a root session; accept it onto your branch instead (arbor accept)", ErrInvalidState, shortID(child.meta.ID))
	}
	parent, err = s.Get(child.meta.Parent)
	if err != nil {
		return nil, nil, nil, err
	}
	if child.busy() {
		return nil, nil, nil, fmt.Errorf("%w: session %s is still running; wait for it or stop it first", ErrInvalidState, shortID(child.meta.ID))
	}
	// A running parent's model does not expect its files to change under it; from its own
	// cells it merges with rlm.merge, which goes through mergeChild directly. The parent is
	// reserved for the merge, as going inactive does: a turn wanted meanwhile (a completion
	// notice, a message) starts when the merge is done.
	parent.mu.Lock()
	if parent.holder != free {
		parent.mu.Unlock()
		return nil, nil, nil, fmt.Errorf("%w: the parent %s is running a turn; %s when it is idle, or let it call rlm.merge", ErrInvalidState, shortID(parent.meta.ID), what)
	}
	parent.holder = mergeHolder
	parent.mu.Unlock()
	return parent, child, parent.release, nil
}

// mergeChild merges child into parent's worktree, its conflicts settled by resolutions (zero:
// none); rlm.merge and Merge share it.
func (s *Service) mergeChild(ctx context.Context, parent, child *Session, resolutions gitstate.Resolutions) (*gitstate.AcceptResult, error) {
	if parent.discarded() || child.discarded() {
		return nil, fmt.Errorf("%w: merge %s into %s: a discarded session has no worktree or branch", ErrInvalidState, shortID(child.meta.ID), shortID(parent.meta.ID))
	}
	repo := parent.ws.Repo
	if _, err := parent.commitWorktree(ctx, "before merging subagent "+child.label()); err != nil {
		return nil, fmt.Errorf("merge %s: checkpoint the parent first: %w", child.label(), err)
	}
	msg := fmt.Sprintf("arbor: merge subagent %s (%s)\n\n%s\n\nArbor-Session: %s\n", child.label(), child.meta.Branch, firstLine(child.meta.Task), child.meta.ID)
	res, err := repo.Merge(ctx, child.meta.Branch, parent.meta.Worktree, msg, resolutions)
	if err != nil {
		return nil, fmt.Errorf("merge %s into %s: %w", child.label(), shortID(parent.meta.ID), err)
	}
	parent.append(ctx, event.Merged{Child: child.meta.ID, Branch: child.meta.Branch, Commit: res.Commit, Files: res.Files})
	parent.recordCheckpoint(ctx, res.Commit, child.meta.ID)
	return res, nil
}

// commitWorktree checkpoints the session's worktree outside a turn boundary (before a merge or
// a discard), recording it like a turn's checkpoint so forks and per-turn diffs see it.
func (s *Session) commitWorktree(ctx context.Context, why string) (bool, error) {
	if s.unwritten() {
		return false, nil // no files yet, so no uncommitted work
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if _, err := s.awaitWorktree(ctx); err != nil {
		return false, err
	}
	s.mu.Lock()
	turn := s.turn
	s.mu.Unlock()
	msg := fmt.Sprintf("arbor: turn %d of session %s, %s\n\n%s", turn, s.meta.ID, why, firstLine(s.meta.Task))
	commit, changed, err := s.ws.Repo.Checkpoint(ctx, s.meta.Worktree, msg, nil)
	if err != nil || !changed {
		return false, err
	}
	s.recordCheckpoint(ctx, commit, "")
	return true, nil
}

// recordCheckpoint records a commit made outside a turn boundary; merged names the child
// session whose merge made it.
func (s *Session) recordCheckpoint(ctx context.Context, commit, merged string) {
	s.mu.Lock()
	s.head = commit
	cp := event.Checkpoint{Turn: s.turn, Commit: commit, Merged: merged}
	s.mu.Unlock()
	s.append(ctx, cp)
}

// Discard stops the session if it is live and removes its worktree. Its branch is deleted when
// another branch holds its commits, else kept under refs/arbor/archive/ — unless force, which
// deletes it and any uncommitted work. Without force the session's uncommitted work is first
// checkpointed onto its branch, so nothing is lost. The session stays known, stopped, with a
// discarded event saying where its work went.
func (s *Service) Discard(ctx context.Context, id string, force bool) (*gitstate.DiscardResult, error) {
	sess, err := s.Get(id)
	if err != nil {
		return nil, err
	}
	if sess.discarded() {
		return nil, fmt.Errorf("%w: session %s was discarded already", ErrInvalidState, shortID(sess.meta.ID))
	}
	if err := s.Stop(ctx, sess.meta.ID); err != nil {
		return nil, err
	}
	if err := sess.waitTurnEnd(ctx); err != nil {
		return nil, fmt.Errorf("discard %s: wait for its turn to end: %w", shortID(sess.meta.ID), err)
	}
	// A worktree never written (a child's, queued for a run slot) or released under the
	// bounds has no files and no uncommitted work: its branch is all there is, and nothing is
	// checked out just to be removed.
	nofiles := sess.dropWrite() || sess.isReleased()
	if !nofiles {
		sess.awaitWorktree(ctx) // one that could not be made is discarded all the same
	}
	if !force && !nofiles {
		if _, err := sess.commitWorktree(ctx, "kept on discard"); err != nil {
			return nil, fmt.Errorf("discard %s: keep its uncommitted work: %w (discard --force drops it)", shortID(sess.meta.ID), err)
		}
	}
	res, err := sess.ws.Repo.Discard(ctx, sess.meta.Worktree, sess.meta.Branch, force)
	if err != nil {
		return res, fmt.Errorf("session %s: %w", shortID(sess.meta.ID), err)
	}
	if err := sess.ws.Repo.DropAccepted(ctx, sess.meta.ID); err != nil {
		s.log.Warn("drop the accepted point", "session", sess.meta.ID, "err", err)
	}
	d := event.Discarded{Branch: sess.meta.Branch, WorktreeRemoved: res.Removed,
		BranchDeleted: res.Deleted, Archived: res.Archived, Force: force}
	sess.append(ctx, d)
	sess.mu.Lock()
	sess.archived = &d
	sess.mu.Unlock()
	sess.announce()
	return res, nil
}

// Discarded returns the data of the session's discarded event — where its branch went — if it
// was discarded. It reads the log, so it holds across a daemon restart without more state;
// discards are rare and so are these checks.
func (s *Session) Discarded() (event.Discarded, bool) {
	var d event.Discarded
	found := false
	s.log.Scan(0, func(r eventlog.Record) error {
		if r.Type == string(event.TypeDiscarded) {
			d, _ = event.As[event.Discarded](event.TypeDiscarded, r.Data)
			found = true
		}
		return nil
	})
	return d, found
}

func (s *Session) discarded() bool {
	_, ok := s.Discarded()
	return ok
}

// waitTurnEnd waits until a stopped session's turn goroutine has made its last checkpoint, so
// nothing writes to the worktree or the log after a discard. Stop cancels the turn and its
// kernel, so this is short; it polls because the turn loop has no completion signal.
func (s *Session) waitTurnEnd(ctx context.Context) error {
	for {
		s.mu.Lock()
		active := s.holder != free
		s.mu.Unlock()
		if !active {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}
