package agents

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/workspace"
)

// The worktrees of a workspace are bounded by arbor.json's "worktrees" (count and disk). Past
// a bound, the sessions inactive (or stopped) longest give theirs up: checkpointed onto the
// branch, the directory removed, the branch, log and kernel snapshot kept
// (gitstate.ReleaseWorktree). The session's next use checks it out again (awaitWorktree).

// checkBudget refuses a disk budget too small for one worktree of the repository at commit:
// every new session would go over it at once.
func (ws *Workspace) checkBudget(ctx context.Context, w workspace.Worktrees, commit string) error {
	if w.DiskBudget <= 0 {
		return nil
	}
	size, err := ws.Repo.TreeSize(ctx, commit)
	if err != nil {
		return err
	}
	if w.DiskBudget < size {
		return RequestError(fmt.Sprintf("arbor.json worktrees.diskBudget %s is smaller than one worktree of this repository (%s at %.10s): raise it, or remove it for no bound",
			workspace.FormatSize(w.DiskBudget), workspace.FormatSize(size), commit))
	}
	return nil
}

// holdsWorktree reports whether the session's worktree is on disk (or being written): not
// released, discarded, or held back until the session runs.
func (s *Session) holdsWorktree() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.released && s.archived == nil && (s.wt == nil || !s.wt.held())
}

// reclaimWorktrees releases worktrees of the workspace's inactive sessions, longest inactive
// first, while the workspace is over its bounds. One sweep runs at a time.
func (s *Service) reclaimWorktrees(ws *Workspace) {
	cfg, err := ws.config(s.overridesFor(ws.Root))
	if err != nil || !cfg.Worktrees.Bounded() {
		return
	}
	ws.reclaimMu.Lock()
	defer ws.reclaimMu.Unlock()
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Minute)
	defer cancel()
	type held struct {
		sess  *Session
		size  int64
		since time.Time
	}
	var hs []held
	var total int64
	for _, sess := range s.all() {
		if sess.ws != ws || !sess.holdsWorktree() {
			continue
		}
		sess.mu.Lock()
		head, since := sess.head, sess.inactiveSince
		sess.mu.Unlock()
		size, err := ws.Repo.TreeSize(ctx, head)
		if err != nil {
			s.log.Warn("worktree size", "session", sess.meta.ID, "err", err)
		}
		hs = append(hs, held{sess, size, since})
		total += size
	}
	w := cfg.Worktrees
	over := func(n int) bool { return (w.Max > 0 && n > w.Max) || (w.DiskBudget > 0 && total > w.DiskBudget) }
	sort.SliceStable(hs, func(i, j int) bool { return hs[i].since.Before(hs[j].since) })
	n := len(hs)
	for _, h := range hs {
		if !over(n) {
			return
		}
		if err := h.sess.releaseWorktree(ctx); err != nil {
			if !errors.Is(err, errNotReclaimable) {
				s.log.Warn("release worktree", "session", h.sess.meta.ID, "err", err)
			}
			continue
		}
		n--
		total -= h.size
	}
	if over(n) {
		s.log.Info("worktrees over their bound: the rest are in use", "workspace", ws.Root, "worktrees", n, "bytes", total)
	}
}

var errNotReclaimable = errors.New("the session is in use")

// reclaimLater sweeps the session's workspace in the background.
func (s *Session) reclaimLater() {
	s.svc.spawn(func() { s.svc.reclaimWorktrees(s.ws) })
}

// releaseWorktree gives up an inactive session's worktree (see gitstate.ReleaseWorktree),
// holding the session's reservation meanwhile, so no turn or merge uses the files.
func (s *Session) releaseWorktree(ctx context.Context) error {
	s.mu.Lock()
	ok := s.holder == free && !s.released && s.archived == nil && (s.state == Inactive || s.state == Stopped) &&
		(s.wt == nil || closed(s.wt.done)) && !s.kernel.live()
	if ok {
		s.holder = mergeHolder
	}
	s.mu.Unlock()
	if !ok {
		return errNotReclaimable
	}
	defer s.release()
	s.wtMu.Lock()
	defer s.wtMu.Unlock()
	s.mu.Lock()
	turn := s.turn
	s.mu.Unlock()
	msg := fmt.Sprintf("arbor: turn %d of session %s, kept before its worktree was released\n\n%s", turn, s.meta.ID, firstLine(s.meta.Task))
	commit, err := s.ws.Repo.ReleaseWorktree(ctx, s.meta.Worktree, msg)
	if commit != "" {
		s.recordCheckpoint(ctx, commit, "")
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.released = true
	if s.watch != nil {
		s.watch.Close()
		s.watch = nil
	}
	s.mu.Unlock()
	s.append(ctx, event.Worktree{Event: "released", Commit: commit})
	s.announce()
	return nil
}

// restoreWorktree checks a released worktree out again from the session's branch, with the
// setup arbor.json lists. Callers hold wtMu.
func (s *Session) restoreWorktree(ctx context.Context) error {
	s.mu.Lock()
	released := s.released
	s.mu.Unlock()
	if !released {
		return nil
	}
	start := time.Now()
	if err := s.ws.Repo.RestoreWorktree(ctx, s.meta.ID, s.meta.Branch, s.meta.Worktree); err != nil {
		return fmt.Errorf("check the released worktree out again: %w", err)
	}
	s.setupWorktree(ctx)
	s.mu.Lock()
	s.released = false
	s.mu.Unlock()
	s.append(ctx, event.Worktree{Event: "restored", DurationMs: time.Since(start).Milliseconds()})
	s.announce()
	s.reclaimLater() // one more on disk: another may go now
	return nil
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
