package agents

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/model"
	"github.com/arborhq/arbor/gitstate"
)

// The review of a session's change: what is left of it once the user accepted parts (the
// remaining diff), taking parts back (reject), and the conflicts of merging a child.

// reviewBase is the commit a session's remaining diff starts from: its accepted point once
// part of it was accepted, else "" (the merge-base of its base commit and branch). The point
// holds while the user's current branch contains the commit that accept made: after a reset
// or on another branch the whole change is to review again. stored is the point as recorded,
// valid or not (what a new accept replaces).
func (s *Session) reviewBase(ctx context.Context) (point, stored string, err error) {
	point, onto, err := s.ws.Repo.Accepted(s.meta.ID)
	if err != nil || point == "" {
		return "", point, err
	}
	_, head, err := s.ws.Repo.Head(ctx)
	if err != nil {
		return "", point, err
	}
	if mb, err := s.ws.Repo.MergeBase(ctx, onto, head); err != nil || mb != onto {
		return "", point, nil // the accept is not on this branch (any more)
	}
	return point, point, nil
}

// checkReviewed refuses a review whose accepted point is not the current one.
func checkReviewed(s *Session, rev Review, point string) error {
	if rev.Accepted != nil && *rev.Accepted != point {
		return fmt.Errorf("%w: %s: part of the session was accepted since the diff you reviewed; diff again", ErrInvalidState, shortID(s.meta.ID))
	}
	return nil
}

// remainingDiff is the session's change not accepted yet, up to head ("" = its branch).
func (s *Session) remainingDiff(ctx context.Context, head string) (*gitstate.Diff, error) {
	if head == "" {
		head = s.meta.Branch
	}
	from, _, err := s.reviewBase(ctx)
	if err != nil {
		return nil, err
	}
	if from != "" {
		return s.ws.Repo.DiffFrom(ctx, from, head)
	}
	return s.ws.Repo.Diff(ctx, s.meta.BaseCommit, head)
}

// ReviewBase returns the commit session id's remaining diff starts from when part of it was
// accepted, "" when none was.
func (s *Service) ReviewBase(ctx context.Context, id string) (string, error) {
	sess, err := s.Get(id)
	if err != nil {
		return "", err
	}
	p, _, err := sess.reviewBase(ctx)
	return p, err
}

// DiffAll returns the session's whole change against its merge-base, accepted parts included.
func (s *Service) DiffAll(ctx context.Context, id string) (*gitstate.Diff, error) {
	sess, err := s.Get(id)
	if err != nil {
		return nil, err
	}
	if d, ok := sess.Discarded(); ok {
		if ref := d.Archived; ref != "" {
			return sess.ws.Repo.Diff(ctx, sess.meta.BaseCommit, ref)
		}
		return nil, fmt.Errorf("%w: session %s was discarded and its branch deleted (its commits were on another branch)", ErrInvalidState, sess.meta.ID)
	}
	return sess.ws.Repo.Diff(ctx, sess.meta.BaseCommit, sess.meta.Branch)
}

// Reject takes chosen files and hunks of the session's remaining diff back: they are reverted
// on the session's branch as a new checkpoint (its worktree moves with it), the user's branch
// untouched, and the agent is told at its next turn. Nothing chosen takes back the whole
// remaining diff. head is the head of the diff the user reviewed (""= the branch as it is);
// hunk indexes point into that diff. A session running a turn is refused: its model does not
// expect its files to change under it.
func (s *Service) Reject(ctx context.Context, id string, rev Review, files []string, hunks map[string][]int) (string, []string, error) {
	sess, err := s.Get(id)
	if err != nil {
		return "", nil, err
	}
	sess.reviewMu.Lock()
	defer sess.reviewMu.Unlock()
	head := rev.Head
	if sess.discarded() {
		return "", nil, fmt.Errorf("%w: session %s was discarded; it has no worktree to take changes back in", ErrInvalidState, shortID(sess.meta.ID))
	}
	sess.mu.Lock()
	if sess.holder != free {
		sess.mu.Unlock()
		return "", nil, fmt.Errorf("%w: session %s is running a turn; stop it or wait until it is idle to reject part of its change", ErrInvalidState, shortID(sess.meta.ID))
	}
	sess.holder = mergeHolder
	sess.mu.Unlock()
	defer sess.release()
	if _, err := sess.commitWorktree(ctx, "before the user's review"); err != nil {
		return "", nil, fmt.Errorf("reject: checkpoint the session first: %w", err)
	}
	d, err := sess.remainingDiff(ctx, "")
	if err != nil {
		return "", nil, err
	}
	point, _, err := sess.reviewBase(ctx)
	if err != nil {
		return "", nil, err
	}
	if err := checkReviewed(sess, rev, point); err != nil {
		return "", nil, err
	}
	if head == "" {
		head = d.Head
	} else if mb, err := sess.ws.Repo.MergeBase(ctx, head, sess.meta.Branch); err != nil || mb != head {
		return "", nil, fmt.Errorf("%w: reject %s: %s is not a commit of its branch %s (diff again)", ErrInvalidState, shortID(sess.meta.ID), head, sess.meta.Branch)
	}
	if head != d.Head {
		return "", nil, fmt.Errorf("%w: reject %s: the branch moved on since the diff you reviewed (%.10s, now %.10s); diff again", ErrInvalidState, shortID(sess.meta.ID), head, d.Head)
	}
	what := describeSelection(files, hunks)
	msg := fmt.Sprintf("arbor: the user rejected %s of session %s\n\n%s\n\nArbor-Session: %s\n", what, shortID(sess.meta.ID), firstLine(sess.meta.Task), sess.meta.ID)
	commit, paths, err := sess.ws.Repo.Reject(ctx, gitstate.RejectOptions{Dir: sess.meta.Worktree, From: d.Base, Head: head,
		Files: files, Hunks: hunks, Reason: msg})
	if err != nil {
		return "", nil, fmt.Errorf("reject %s: %w", shortID(sess.meta.ID), err)
	}
	sess.recordCheckpoint(ctx, commit, "")
	rej := event.Rejected{Commit: commit, Files: paths, Hunks: hunkNames(hunks)}
	if _, err := sess.append(ctx, rej); err != nil {
		return commit, paths, err
	}
	sess.mu.Lock()
	sess.conv = append(sess.conv, rejectedNote(rej))
	sess.mu.Unlock()
	sess.announce()
	return commit, paths, nil
}

// rejectedNote tells the model what the user took back, in its conversation (live and on
// replay alike).
func rejectedNote(r event.Rejected) model.Message {
	what := strings.Join(r.Files, ", ")
	if len(r.Hunks) > 0 {
		what += " (hunks " + strings.Join(r.Hunks, ", ") + ")"
	}
	return model.Message{Role: "user", Content: fmt.Sprintf("[arbor] The user reviewed your change and rejected part of it: %s. "+
		"It was reverted on your branch in commit %.10s; your files are as they are now. Do not redo it unless asked.", what, r.Commit)}
}

func hunkNames(h map[string][]int) []string {
	var out []string
	for p, idx := range h {
		for _, i := range idx {
			out = append(out, fmt.Sprintf("%s#%d", p, i))
		}
	}
	sort.Strings(out)
	return out
}

func describeSelection(files []string, hunks map[string][]int) string {
	switch {
	case len(files) == 0 && len(hunks) == 0:
		return "all of the remaining change"
	case len(hunks) == 0:
		return "files " + strings.Join(files, ", ")
	}
	return "part of the change (" + strings.Join(append(append([]string(nil), files...), hunkNames(hunks)...), ", ") + ")"
}

// Conflicts lists the files merging child id into its parent would conflict in, each in its
// versions (base, the parent's, the child's, and git's merge with markers); none when the merge
// is clean. The parent's worktree is checkpointed first, so its version is what a merge would
// meet.
// Conflicts are a child's merge conflicts as [Service.Conflicts] finds them: the heads compared
// go back with the resolutions, so a branch that moved meanwhile refuses them.
type Conflicts struct {
	Parent                string
	ParentHead, ChildHead string
	Files                 []gitstate.ConflictFile
}

func (s *Service) Conflicts(ctx context.Context, id string) (*Conflicts, error) {
	p, child, release, err := s.reserveParent(id, "look at the merge")
	if err != nil {
		return nil, err
	}
	defer release()
	if p.discarded() || child.discarded() {
		return nil, fmt.Errorf("%w: a discarded session has no worktree or branch to merge", ErrInvalidState)
	}
	if _, err := p.commitWorktree(ctx, "before merging subagent "+child.label()); err != nil {
		return nil, fmt.Errorf("checkpoint the parent first: %w", err)
	}
	files, ph, ch, err := p.ws.Repo.Conflicts(ctx, child.meta.Branch, p.meta.Worktree)
	if err != nil {
		return nil, err
	}
	return &Conflicts{Parent: p.meta.ID, ParentHead: ph, ChildHead: ch, Files: files}, nil
}
