package agents

import (
	"context"
	"fmt"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/gitstate"
)

// Send delivers a user message: steering a running turn, or starting a new turn.
func (s *Service) Send(ctx context.Context, id, text, mode string) (string, error) {
	return s.SendKeyed(ctx, id, text, mode, "")
}

// SendKeyed is Send recording key, the journal key of the client's request, on the message
// (see [Service.RequestApplied]).
func (s *Service) SendKeyed(ctx context.Context, id, text, mode, key string) (string, error) {
	sess, err := s.Get(id)
	if err != nil {
		return "", err
	}
	if text == "" {
		return "", fmt.Errorf("send to %s: the message is empty", sess.meta.ID)
	}
	status, err := sess.enqueueMsg(ctx, event.MessageQueued{From: "user", Text: text, Mode: mode, RequestKey: key})
	if err == nil {
		sess.mu.Lock()
		sess.usage.HumanInterventions++
		sess.mu.Unlock()
		sess.announce()
	}
	return status, err
}

// Stop ends a session and its descendants: turns are cancelled, kernels stopped. Branches and
// worktrees stay for review.
func (s *Service) Stop(ctx context.Context, id string) error {
	sess, err := s.Get(id)
	if err != nil {
		return err
	}
	// Stopped first: from then on no turn starts (the turn loop checks under mu, where it also
	// stores its cancel), no message is queued, and no child is linked. Then cancel what runs,
	// and only then walk the children, so none spawned meanwhile is missed.
	recErr := sess.setState(ctx, Stopped, "")
	sess.mu.Lock()
	cancel := sess.cancelTurn
	sess.pending = nil
	sess.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	sess.goalStopped(ctx)
	sess.stopKernel(ctx)
	var childErr error
	for _, c := range sess.childIDs() {
		if err := s.Stop(ctx, c); err != nil && childErr == nil {
			childErr = err
		}
	}
	sess.goalChildSettled() // a goal above parked on this session goes on without it
	if recErr != nil {
		return fmt.Errorf("session %s is stopped, but %w; it would resume after a daemon restart: free space and stop it again",
			sess.meta.ID, recErr)
	}
	return childErr
}

// Diff returns the session's remaining change: against its merge-base with the base commit,
// less what the user accepted of it (see gitstate.AcceptedPrefix).
func (s *Service) Diff(ctx context.Context, id string) (*gitstate.Diff, error) {
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
	return sess.remainingDiff(ctx, "")
}

// FileAt returns a file of the session's remaining diff: side "base" is where it starts (the
// merge-base, or the accepted point), "head" the session branch. A file missing on that side
// is an os.ErrNotExist error.
func (s *Service) FileAt(ctx context.Context, id, path, side string) ([]byte, error) {
	sess, err := s.Get(id)
	if err != nil {
		return nil, err
	}
	d, err := sess.remainingDiff(ctx, "")
	if err != nil {
		return nil, err
	}
	rev := d.Head
	if side == "base" {
		rev = d.Base
	}
	return sess.ws.Repo.FileAt(ctx, rev, path)
}

// Revive brings an inactive session back (kernel started, namespace restored) without giving
// it work: an editor attaching to a session revives it.
func (s *Service) Revive(ctx context.Context, id string) error {
	sess, err := s.Get(id)
	if err != nil {
		return err
	}
	// Only from inactive, decided under the state lock: a turn that just began must stay running.
	if changed, _ := sess.setStateIf(ctx, []State{Inactive}, Idle, ""); !changed {
		return nil
	}
	sess.warmKernel()
	sess.scheduleInactive()
	return nil
}
