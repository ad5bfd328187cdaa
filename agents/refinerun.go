package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/harness"
	"github.com/arborhq/arbor/agents/model"
	"github.com/arborhq/arbor/agents/refine"
)

// /refine: a model call, apart from the session's turns, over what happened since the last
// refine (selected by event: failures, retries, corrections, long cells), asking for minimal
// harness edits as JSON. Each edit becomes a proposal of this session, which the scope's
// policy decides (proposals.go). A reply that is not usable gets one repair request, then is
// recorded as rejected: a refine never fails the session.

// RefineRequest is what to refine: the scope the edits are for, an optional focus, and what
// started it (user, kernel, everyTurns, compaction).
type RefineRequest struct {
	Focus   string
	Scope   harness.Scope
	Trigger string
}

// RefineOutcome is one refine run.
type RefineOutcome struct {
	Scope          harness.Scope
	FromSeq, ToSeq uint64
	Model          string
	Calls          int
	Usage          event.TokenUsage
	Summary        string
	Error          string // why it proposed nothing
	Proposals      []harness.Proposal
}

// Refine runs /refine on session id and waits for it.
func (s *Service) Refine(ctx context.Context, id string, req RefineRequest) (RefineOutcome, error) {
	sess, err := s.Get(id)
	if err != nil {
		return RefineOutcome{}, err
	}
	return sess.refine(ctx, req)
}

// refineClient is the model refine calls: "refine.model" when configured, else the session's.
// A model entry is resolved through the configuration, so one of the repository's that is not
// trusted is refused naming `arbor trust`; a session recovered without a usable model resolves
// its own again, or says why, as its turns do.
func (s *Session) refineClient() (*model.Client, string, func(), error) {
	name, what := s.cfg.Refine.Model, "refine.model"
	if name == "" {
		c, n := s.modelClient()
		if c != nil {
			return c, n, func() {}, nil
		}
		name, what = n, "the session's model"
	}
	n, mc, err := s.cfg.ResolveModel(name)
	if err != nil {
		return nil, "", nil, fmt.Errorf("%s: %w", what, err)
	}
	c, err := newModelClient(n, mc, s.svc.log)
	if err != nil {
		return nil, "", nil, fmt.Errorf("%s: %w", what, err)
	}
	return c, n, c.CloseIdleConnections, nil
}

func (s *Session) refine(ctx context.Context, req RefineRequest) (RefineOutcome, error) {
	if req.Scope == "" {
		req.Scope = harness.ScopeSession
	}
	if _, err := harness.ParseScope(string(req.Scope)); err != nil {
		return RefineOutcome{}, fmt.Errorf("%w: %w", harness.ErrInvalid, err)
	}
	if req.Scope == harness.ScopeGlobal && s.svc.isFixture(s.ws.Root) {
		return RefineOutcome{}, fmt.Errorf("%w: an eval task cannot refine your global harness (it is what the eval measures)", harness.ErrInvalid)
	}
	s.refineMu.Lock()
	defer s.refineMu.Unlock()
	recs, err := s.Events(0)
	if err != nil {
		return RefineOutcome{}, err
	}
	// Since the last refine: the newest event a previous run covered.
	var since uint64
	for _, r := range recs {
		if r.Type == string(event.TypeRefined) {
			if d, err := event.As[event.Refined](event.Type(r.Type), r.Data); err == nil {
				since = max(since, d.ToSeq)
			}
		}
	}
	traj := refine.Select(recs, since, refine.Options{})
	out := RefineOutcome{Scope: req.Scope, FromSeq: traj.FromSeq, ToSeq: traj.ToSeq}
	done := func() (RefineOutcome, error) {
		d := event.Refined{Scope: string(out.Scope), Focus: req.Focus, Trigger: req.Trigger, FromSeq: out.FromSeq, ToSeq: out.ToSeq,
			Model: out.Model, Calls: out.Calls, Usage: out.Usage, Summary: out.Summary, Error: out.Error}
		for _, p := range out.Proposals {
			d.Proposals = append(d.Proposals, p.ID)
		}
		s.mu.Lock()
		s.usage.addRefine(d)
		s.lastAutoRefine = time.Now()
		s.mu.Unlock()
		s.svc.spent(s) // refine's tokens count against the goals above
		_, err := s.append(ctx, d)
		return out, err
	}
	if len(traj.Items) == 0 && req.Focus == "" {
		out.Error = fmt.Sprintf("nothing to learn from: no failures, retries, corrections or long cells in events %d–%d", traj.FromSeq, traj.ToSeq)
		return done()
	}
	client, name, release, err := s.refineClient()
	if err != nil {
		out.Error = err.Error()
		return done()
	}
	defer release()
	out.Model = name
	s.mu.Lock()
	block := s.harness.block
	s.mu.Unlock()
	msgs := []model.Message{{Role: "user", Content: refine.UserPrompt(traj, block, req.Focus, string(req.Scope))}}
	var reply refine.Reply
	for attempt := 0; ; attempt++ {
		r, err := client.Complete(ctx, model.Request{System: refine.SystemPrompt(), Messages: msgs}, nil)
		if err != nil {
			out.Error = "the refine model: " + err.Error()
			return done()
		}
		out.Calls++
		out.Usage.InputTokens += r.Usage.InputTokens
		out.Usage.CachedInputTokens += r.Usage.CachedInputTokens
		out.Usage.OutputTokens += r.Usage.OutputTokens
		out.Usage.CostUSD += r.Usage.CostUSD
		out.Usage.Estimated = out.Usage.Estimated || r.Usage.Estimated
		reply, err = refine.Parse(r.Text, traj)
		if err == nil {
			break
		}
		if attempt == 1 {
			out.Error = "the refiner's reply was not usable after one repair request: " + err.Error()
			s.append(ctx, event.HarnessRejected{Scope: string(req.Scope), Author: "refine", By: "refine", Reason: out.Error})
			return done()
		}
		msgs = append(msgs, model.Message{Role: "assistant", Content: r.Text}, model.Message{Role: "user", Content: refine.RepairPrompt(err)})
	}
	out.Summary = reply.Summary
	st, err := s.harnessStore(ctx, req.Scope)
	if err != nil {
		out.Error = err.Error()
		return done()
	}
	for _, e := range reply.Edits {
		ed := harness.Edit{Op: e.Op, Entry: e.Entry}
		if e.Op != "create" {
			cur, err := st.Get(ctx, e.Entry.Kind, e.Entry.ID)
			if err != nil {
				why := fmt.Sprintf("%s %s %s: %v", e.Op, e.Entry.Kind, e.Entry.ID, err)
				if errors.Is(err, harness.ErrNotFound) {
					why = fmt.Sprintf("%s %s %s: no such entry in the %s harness", e.Op, e.Entry.Kind, e.Entry.ID, req.Scope)
				}
				s.append(ctx, event.HarnessRejected{Scope: string(req.Scope), Author: "refine", By: "validation",
					Edits: eventEdits([]harness.Edit{ed}), Reason: why})
				continue
			}
			ed.Base = cur.Version
		}
		p, err := s.propose(ctx, req.Scope, harness.Proposal{Author: "refine", Trigger: e.Trigger, Rationale: e.Rationale,
			Intended: e.Intended, Edits: []harness.Edit{ed}})
		if err == nil {
			out.Proposals = append(out.Proposals, p)
		}
	}
	return done()
}

// maybeRefine starts a refine in the background when the configured policy asks for one
// (every N turns, after a compaction) and the cooldown has passed.
func (s *Session) maybeRefine(trigger string, turn int) {
	pol := s.cfg.Refine
	switch trigger {
	case "everyTurns":
		if pol.EveryTurns <= 0 || turn%pol.EveryTurns != 0 {
			return
		}
	case "compaction":
		if !pol.AfterCompaction {
			return
		}
	default:
		return
	}
	s.mu.Lock()
	now := time.Now()
	if !refineDue(s.lastAutoRefine, s.refineRunning, pol.Cooldown, now) {
		s.mu.Unlock()
		return
	}
	// Reserved now, not when it ends: the turns that end while it runs do not start more.
	s.lastAutoRefine, s.refineRunning = now, true
	s.mu.Unlock()
	s.svc.spawn(func() {
		defer func() {
			s.mu.Lock()
			s.refineRunning = false
			s.mu.Unlock()
		}()
		if _, err := s.refine(s.svc.ctx, RefineRequest{Scope: harness.ScopeSession, Trigger: trigger}); err != nil {
			s.svc.log.Warn("refine", "session", s.meta.ID, "trigger", trigger, "err", err)
		}
	})
}

// refineDue decides whether the policy may start a refine at now: without a cooldown always
// (they run one after another); with one, when none is running and the cooldown has passed
// since the last one started or ended (last, zero for none).
func refineDue(last time.Time, running bool, cooldown time.Duration, now time.Time) bool {
	if cooldown <= 0 {
		return true
	}
	return !running && (last.IsZero() || now.Sub(last) >= cooldown)
}

// hostRefineRun is refine.run(focus, scope) from model code: it waits for the run and answers
// what it proposed and what became of each proposal.
func hostRefineRun(ctx context.Context, s *Session, raw json.RawMessage) (any, error) {
	var p struct {
		Focus string `json:"focus"`
		Scope string `json:"scope"`
	}
	if err := decodeStrict("refine.run", raw, &p); err != nil {
		return nil, err
	}
	sc := harness.ScopeSession
	if p.Scope != "" {
		var err error
		if sc, err = harness.ParseScope(p.Scope); err != nil {
			return nil, err
		}
	}
	out, err := s.refine(ctx, RefineRequest{Focus: p.Focus, Scope: sc, Trigger: "kernel"})
	if err != nil {
		return nil, err
	}
	props := []map[string]any{}
	for _, q := range out.Proposals {
		props = append(props, proposalAnswer(q))
	}
	return map[string]any{"scope": out.Scope, "fromSeq": out.FromSeq, "toSeq": out.ToSeq, "calls": out.Calls,
		"inputTokens": out.Usage.InputTokens, "outputTokens": out.Usage.OutputTokens, "summary": out.Summary,
		"error": out.Error, "proposals": props}, nil
}
