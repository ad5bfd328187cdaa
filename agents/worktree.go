package agents

import (
	"context"
	"errors"
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
	// hold, when set, keeps the files from being written while the session waits for a run
	// slot: a child queued behind maxRunning takes no disk. It opens while the session runs
	// (or once something needs the files, for good) and shuts again at the turn's end if the
	// write had not begun: a leaf that answered without a cell never writes its files.
	hold *gitstate.Hold
}

// begin lets the held write start, for good when the files are needed; it reports whether this
// call opened the hold.
func (g *worktreeGate) begin(need bool) bool {
	switch {
	case g.hold == nil:
		return false
	case need:
		return g.hold.Keep()
	}
	return g.hold.Open()
}

// held reports whether the write waits for the session to run (or was dropped: no files).
func (g *worktreeGate) held() bool { return g.hold != nil && g.hold.Held() }

// queued reports whether the write waits for the session to run.
func (g *worktreeGate) queued() bool { return g.held() && !g.hold.Dropped() }

// writing reports whether the files are being written (or wait for a write slot) and are
// not all in yet.
func (g *worktreeGate) writing() bool {
	select {
	case <-g.done:
		return false
	default:
		return !g.held()
	}
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
// files are in (a root session's kernel warms up there). hold is what p's write was started
// behind (gitstate.WorktreeSpec.Hold), or nil.
func (s *Session) gateWorktree(p *gitstate.Pending, hold *gitstate.Hold, then func()) {
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
			case <-p.Done():
			case <-s.svc.ctx.Done():
				if !hold.Started() {
					// Closing with the files never begun: the repository leaves them to the
					// next start (gitstate.WorktreeSpec.Hold); nothing here waits for them.
					g.err = fmt.Errorf("the worktree %s was not written: the daemon is shutting down", s.meta.Worktree)
					close(g.done)
					return
				}
			}
		}
		g.err = p.Wait(context.Background()) // the write runs to its end whatever the session does
		close(g.done)
		s.announce() // no longer "writing"
		if g.err != nil {
			if !errors.Is(g.err, gitstate.ErrDropped) {
				s.svc.log.Error("worktree", "session", s.meta.ID, "err", g.err)
			}
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
func (s *Session) beginWorktree(need bool) {
	s.mu.Lock()
	g := s.wt
	s.mu.Unlock()
	if g == nil || !g.begin(need) {
		return
	}
	s.svc.worktreeStep(s.meta.ID, "writing")
	s.reclaimLater()
}

// dropWrite gives up the write of files held until the session runs, if it has not begun, and
// reports whether it did.
func (s *Session) dropWrite() bool {
	s.mu.Lock()
	g := s.wt
	s.mu.Unlock()
	if g == nil || g.hold == nil || !g.hold.Drop() {
		return false
	}
	<-g.done // the write gives up at once
	return true
}

func (s *Session) isReleased() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.released
}

// unwritten reports whether the session's files were never written and wait for it to run:
// nothing in them can have changed, so there is nothing to checkpoint.
func (s *Session) unwritten() bool {
	s.mu.Lock()
	g := s.wt
	s.mu.Unlock()
	return g != nil && g.held()
}

// holdWorktree shuts a new session's worktree hold again at its turn's end when the write
// has not begun and nothing waits for the files: it stays queued until its next turn.
func (s *Session) holdWorktree() {
	s.mu.Lock()
	g := s.wt
	s.mu.Unlock()
	if g != nil && g.hold != nil && g.hold.Shut() {
		s.announce()
	}
}

// awaitWorktree waits until the session's worktree is on disk and returns how long it
// waited; the error is the worktree's own when it could not be made.
func (s *Session) awaitWorktree(ctx context.Context) (time.Duration, error) {
	s.beginWorktree(true)
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
