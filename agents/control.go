package agents

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

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
	status, _, err := s.SendQueued(ctx, id, text, mode, key)
	return status, err
}

// SendQueued is SendKeyed also returning the seq of the message's message_queued record, by
// which a client follows what becomes of it (its user_message names it).
func (s *Service) SendQueued(ctx context.Context, id, text, mode, key string) (string, uint64, error) {
	sess, err := s.Get(id)
	if err != nil {
		return "", 0, err
	}
	if text == "" {
		return "", 0, fmt.Errorf("send to %s: the message is empty", sess.meta.ID)
	}
	status, seq, err := sess.enqueueSeq(ctx, event.MessageQueued{From: "user", Text: text, Mode: mode, RequestKey: key})
	if err == nil {
		sess.mu.Lock()
		sess.usage.HumanInterventions++
		sess.mu.Unlock()
		sess.announce()
	}
	return status, seq, err
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

// Interrupt cuts the session's running turn short (its cell is interrupted, an interrupted
// record says the user cancelled it); the session stays and takes the next message. Without
// a running turn it does nothing; with turn > 0 only that turn is cut (a cancel that arrives
// late must not cut the next one). With tree, the turns its descendants run are cut too.
func (s *Service) Interrupt(ctx context.Context, id string, turn int, tree bool) error {
	sess, err := s.Get(id)
	if err != nil {
		return err
	}
	sess.mu.Lock()
	current := sess.turn
	sess.mu.Unlock()
	if turn == 0 || turn == current {
		sess.interrupt("cancelled by the user")
	}
	if tree {
		for _, d := range sess.descendants() {
			d.interrupt("cancelled by the user (with session " + shortID(sess.meta.ID) + ")")
		}
	}
	return nil
}

// SetModel switches the model the session's turns call to name, a model configured for its
// workspace; a turn running now takes it at its next model call. It is recorded, so a
// restart keeps it; children started from then on inherit it.
func (s *Service) SetModel(ctx context.Context, id, name string) (Info, error) {
	sess, err := s.Get(id)
	if err != nil {
		return Info{}, err
	}
	if strings.TrimSpace(name) == "" {
		return Info{}, RequestError("set model: no model named; see `arbor models` for the configured ones")
	}
	if sess.State() == Stopped {
		return Info{}, fmt.Errorf("%w: session %s is stopped; fork it to continue its work", ErrInvalidState, sess.meta.ID)
	}
	resolved, mc, err := sess.cfg.ResolveModel(name)
	if err != nil {
		return Info{}, RequestError("set model: " + err.Error())
	}
	client, err := newModelClient(resolved, mc, s.log)
	if err != nil {
		return Info{}, fmt.Errorf("set model %s: %w", resolved, err)
	}
	_, from := sess.modelClient()
	if from != resolved {
		if _, err := sess.append(ctx, event.ModelChanged{Model: resolved, From: from}); err != nil {
			return Info{}, err
		}
		sess.mu.Lock()
		old := sess.client
		sess.client, sess.model = client, resolved
		sess.mu.Unlock()
		if old != nil {
			old.CloseIdleConnections()
		}
		sess.announce()
	}
	return s.info(sess), nil
}

// ModelInfo is one configured model: its name in the configuration and the endpoint's id.
type ModelInfo struct {
	Name  string
	Model string
}

// Models lists the models configured for the repository containing dir (by name), and its
// default ("" when there is none).
func (s *Service) Models(dir string) (models []ModelInfo, def string, err error) {
	ws, err := s.workspaceFor(dir)
	if err != nil {
		return nil, "", err
	}
	cfg, err := ws.config(s.overridesFor(ws.Root))
	if err != nil {
		return nil, "", err
	}
	for n, m := range cfg.Models {
		models = append(models, ModelInfo{Name: n, Model: cmp.Or(m.Model, n)})
	}
	slices.SortFunc(models, func(a, b ModelInfo) int { return cmp.Compare(a.Name, b.Name) })
	def, _, _ = cfg.ResolveModel("")
	return models, def, nil
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
