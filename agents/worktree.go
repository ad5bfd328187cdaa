package agents

import (
	"context"
	"fmt"
	"sync"
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
	// hold, when set, keeps the files from being written until the session first gets a run
	// slot or something needs them (begin): a child queued behind maxRunning takes no disk.
	hold     chan struct{}
	holdOnce sync.Once
}

// begin lets the held write start; it reports whether this call did.
func (g *worktreeGate) begin() (began bool) {
	if g.hold != nil {
		g.holdOnce.Do(func() { close(g.hold); began = true })
	}
	return began
}

// held reports whether the write waits for begin.
func (g *worktreeGate) held() bool { return g.hold != nil && !closed(g.hold) }

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
// files are in (a root session's kernel warms up there). hold is the channel p's write was
// started behind (gitstate.WorktreeSpec.Hold), or nil.
func (s *Session) gateWorktree(p *gitstate.Pending, hold chan struct{}, then func()) {
	if p == nil {
		if then != nil {
			then()
		}
		return
	}
	g := &worktreeGate{done: make(chan struct{}), hold: hold}
	s.mu.Lock()
	s.wt = g
	s.mu.Unlock()
	finish := func() {
		if hold != nil {
			select {
			case <-hold:
			case <-s.svc.ctx.Done():
				// Closing with the files never begun: the repository leaves them to the next
				// start (gitstate.WorktreeSpec.Hold); nothing here waits for them.
				g.err = fmt.Errorf("the worktree %s was not written: the daemon is shutting down", s.meta.Worktree)
				close(g.done)
				return
			}
		}
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

// beginWorktree starts writing the files of a new session's worktree held until now (the
// session got its run slot, or something needs the files): one more worktree on disk, so
// under arbor.json's bounds an inactive session's may go.
func (s *Session) beginWorktree() {
	s.mu.Lock()
	g := s.wt
	s.mu.Unlock()
	if g == nil || !g.begin() {
		return
	}
	s.svc.worktreeStep(s.meta.ID, "writing")
	s.reclaimLater()
}

// awaitWorktree waits until the session's worktree is on disk and returns how long it
// waited; the error is the worktree's own when it could not be made.
func (s *Session) awaitWorktree(ctx context.Context) (time.Duration, error) {
	s.beginWorktree()
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
