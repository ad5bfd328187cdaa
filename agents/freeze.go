package agents

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"
)

// freezeWorktree is the workspace's gitstate.FreezeFunc: it stops the sandbox of the session
// whose worktree dir is while host-side git reads that worktree by path, and keeps a new
// kernel from starting there until thaw (the kernel slot stays held). A dir of no session, a
// session without a kernel and an unsandboxed kernel are not frozen: an unsandboxed kernel
// could read the host's files itself.
//
// gitstate calls it holding the repository's lock, so it must not wait for anything that
// waits for that lock: it waits for a kernel start in progress only until ctx ends.
func (s *Service) freezeWorktree(ctx context.Context, dir string) (func(), error) {
	dir = filepath.Clean(dir)
	s.mu.Lock()
	var sess *Session
	for _, c := range s.sessions {
		if filepath.Clean(c.meta.Worktree) == dir {
			sess = c
			break
		}
	}
	s.mu.Unlock()
	if sess == nil {
		return nil, nil
	}
	ks := &sess.kernel
	for !ks.mu.TryLock() {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("freeze session %s: its kernel is starting: %w", sess.meta.ID, context.Cause(ctx))
		case <-time.After(5 * time.Millisecond):
		}
	}
	k := ks.k
	if k == nil {
		return sync.OnceFunc(ks.mu.Unlock), nil
	}
	thaw, err := k.Freeze(ctx)
	if err != nil {
		ks.mu.Unlock()
		return nil, fmt.Errorf("freeze session %s: %w", sess.meta.ID, err)
	}
	return sync.OnceFunc(func() {
		thaw()
		ks.mu.Unlock()
	}), nil
}
