package agents

import (
	"context"
	"fmt"
	"time"

	"github.com/arborhq/arbor/gitstate"
)

// worktreeGate is a session's worktree being written in the background (see
// [Service.startWorktree]): the session is recorded and its first model call goes out
// meanwhile; whatever needs the files (a cell, a checkpoint, a merge, a discard) waits at
// [Session.awaitWorktree].
type worktreeGate struct {
	done chan struct{} // closed when the files are in, or could not be written (err)
	err  error
}

// startWorktree registers the branch and worktree of a new session and returns the gate its
// files are written behind, or nil when they were written before it returned: with worktree
// setup configured (copied paths, a setup command) the session's first message says whether
// that setup worked, so such a worktree is made before the session starts, as before.
func (s *Service) startWorktree(ctx context.Context, repo *gitstate.Repo, spec gitstate.WorktreeSpec, now bool) (*gitstate.Pending, error) {
	if now {
		return nil, repo.AddWorktree(ctx, spec)
	}
	return repo.StartWorktree(ctx, spec)
}

// gateWorktree makes the session wait for p before it uses its files; then runs after the
// files are in (a root session's kernel warms up there).
func (s *Session) gateWorktree(p *gitstate.Pending, then func()) {
	if p == nil {
		if then != nil {
			then()
		}
		return
	}
	g := &worktreeGate{done: make(chan struct{})}
	s.mu.Lock()
	s.wt = g
	s.mu.Unlock()
	finish := func() {
		g.err = p.Wait(context.Background()) // the write runs to its end whatever the session does
		close(g.done)
		if g.err != nil {
			s.svc.log.Error("worktree", "session", s.meta.ID, "err", g.err)
			return
		}
		s.svc.log.Debug("worktree ready", "session", s.meta.ID, "took", p.Took())
		if then != nil {
			then()
		}
	}
	if !s.svc.spawn(finish) {
		go finish() // closing: the gate still opens, so nothing waiting on it hangs
	}
}

// AwaitWorktree waits until the session's worktree is on disk (a new session's is written
// in the background): the error is the worktree's own when it could not be made.
func (s *Session) AwaitWorktree(ctx context.Context) error {
	_, err := s.awaitWorktree(ctx)
	return err
}

// awaitWorktree waits until the session's worktree is on disk and returns how long it
// waited; the error is the worktree's own when it could not be made.
func (s *Session) awaitWorktree(ctx context.Context) (time.Duration, error) {
	s.mu.Lock()
	g, released := s.wt, s.released
	s.mu.Unlock()
	start := time.Now()
	if released {
		// Given up under the worktree bounds: checked out again (reclaim.go).
		s.wtMu.Lock()
		err := s.restoreWorktree(ctx)
		s.wtMu.Unlock()
		return time.Since(start), err
	}
	if g == nil {
		return 0, nil
	}
	select {
	case <-g.done:
		return 0, g.err
	default:
	}
	select {
	case <-g.done:
		return time.Since(start), g.err
	case <-ctx.Done():
		return time.Since(start), fmt.Errorf("wait for the worktree %s: %w", s.meta.Worktree, ctx.Err())
	}
}

func (s *Service) worktreeStep(session, step string) {
	if f := s.opts.WorktreeStep; f != nil {
		f(session, step)
	}
}
