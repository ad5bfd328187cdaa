package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/harness"
	"github.com/arborhq/arbor/workspace"
)

// The kernel's harness surface (harness.notes|memories|skills|subagents). Reads see every
// scope, narrowest first. Writes from model code edit the session's own scope directly and
// propose changes to the shared ones (see proposals.go); every change is a commit whose
// trailers name this session and turn, and takes effect at the next turn boundary.

// scopedEntry is an entry as the kernel sees it: with the scope it came from.
type scopedEntry struct {
	harness.Entry
	Scope harness.Scope `json:"scope"`
}

func (s *Session) harnessStore(ctx context.Context, sc harness.Scope) (*harness.Store, error) {
	return s.svc.HarnessStore(ctx, s.ws.Root, sc, s.meta.ID)
}

// harnessScopes resolves the optional scope of a read: one scope, or all, narrowest first.
func harnessScopes(scope string) ([]harness.Scope, error) {
	if scope == "" {
		return harness.Scopes, nil
	}
	sc, err := harness.ParseScope(scope)
	if err != nil {
		return nil, err
	}
	return []harness.Scope{sc}, nil
}

// harnessWrite is one write from model code. The session's own scope under its default
// "apply" policy is edited directly (a skill must import first); every other write — a shared
// scope, or any scope under "review" — is a proposal the scope's policy decides. Either way
// the change takes effect at the next turn boundary.
func (s *Session) harnessWrite(ctx context.Context, scope string, ed harness.Edit) (any, error) {
	sc, err := harness.ParseScope(scope)
	if err != nil {
		return nil, err
	}
	if sc == harness.ScopeGlobal && s.svc.isFixture(s.ws.Root) {
		return nil, fmt.Errorf("%w: an eval task cannot change your global harness (it measures it)", harness.ErrInvalid)
	}
	if sc != harness.ScopeSession || s.policyFor(sc).Policy != workspace.PolicyApply {
		p, err := s.propose(ctx, sc, harness.Proposal{Author: "agent", Edits: []harness.Edit{ed}})
		if err != nil {
			return nil, err
		}
		return proposalAnswer(p), nil
	}
	st, err := s.harnessStore(ctx, sc)
	if err != nil {
		return nil, err
	}
	if ed.Op != "delete" {
		if err := s.checkSkill(ctx, ed.Entry); err != nil {
			return nil, err
		}
	}
	before, _ := st.Head(ctx)
	var v string
	if ed.Op == "delete" {
		v, err = st.Delete(ctx, ed.Entry.Kind, ed.Entry.ID, ed.Base, s.harnessChange())
	} else {
		v, err = st.Put(ctx, ed.Entry, ed.Base, s.harnessChange())
	}
	if err != nil {
		return nil, err
	}
	if after, _ := st.Head(ctx); after != before {
		s.appliedHarness(ctx, event.HarnessApplied{Scope: string(sc), Author: "agent", Edits: eventEdits([]harness.Edit{ed}), Commit: after, By: "agent"})
	}
	return map[string]any{"version": v, "applies": "at the next turn"}, nil
}

// proposalAnswer is what model code learns of its proposal.
func proposalAnswer(p harness.Proposal) map[string]any {
	out := map[string]any{"proposal": p.ID, "scope": p.Scope, "status": p.Status}
	switch p.Status {
	case harness.Pending:
		out["applies"] = "once the user accepts it (arbor proposals accept " + p.ID + ")"
	case harness.Applied:
		out["version"], out["applies"] = p.Applied, "at the next turn"
	case harness.Rejected:
		out["reason"] = p.Reason
	}
	if p.Observed != "" {
		out["observed"] = p.Observed
	}
	return out
}

func (s *Session) harnessChange() harness.Change {
	s.mu.Lock()
	defer s.mu.Unlock()
	return harness.Change{Author: "agent", Session: s.meta.ID, Turn: s.turn}
}

type harnessRef struct {
	Kind    harness.Kind `json:"kind"`
	ID      string       `json:"id"`
	Scope   string       `json:"scope"`
	Version string       `json:"version"`
	Query   string       `json:"query"`
	Limit   int          `json:"limit"`
}

func hostHarnessList(ctx context.Context, s *Session, raw json.RawMessage) (any, error) {
	var p harnessRef
	if err := decodeStrict("harness.list", raw, &p); err != nil {
		return nil, err
	}
	return s.harnessEntries(ctx, p.Kind, p.Scope)
}

// harnessEntries lists kind k over the scopes asked, narrowest first.
func (s *Session) harnessEntries(ctx context.Context, k harness.Kind, scope string) ([]scopedEntry, error) {
	if _, err := harness.ParseKind(string(k)); err != nil {
		return nil, err
	}
	scopes, err := harnessScopes(scope)
	if err != nil {
		return nil, err
	}
	out := []scopedEntry{}
	for _, sc := range scopes {
		st, err := s.harnessStore(ctx, sc)
		if err != nil {
			return nil, err
		}
		es, err := s.listPinned(ctx, st, sc, k)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			out = append(out, scopedEntry{e, sc})
		}
	}
	return out, nil
}

func hostHarnessGet(ctx context.Context, s *Session, raw json.RawMessage) (any, error) {
	var p harnessRef
	if err := decodeStrict("harness.get", raw, &p); err != nil {
		return nil, err
	}
	if _, err := harness.ParseKind(string(p.Kind)); err != nil {
		return nil, err
	}
	scopes, err := harnessScopes(p.Scope)
	if err != nil {
		return nil, err
	}
	for _, sc := range scopes {
		st, err := s.harnessStore(ctx, sc)
		if err != nil {
			return nil, err
		}
		e, err := s.getPinned(ctx, st, sc, p.Kind, p.ID)
		if errors.Is(err, harness.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return scopedEntry{e, sc}, nil
	}
	return nil, fmt.Errorf("no %s %q in the %s harness; see await harness.%s.list()", p.Kind, p.ID, scopeWords(scopes), pluralOf(p.Kind))
}

func hostHarnessPut(ctx context.Context, s *Session, raw json.RawMessage) (any, error) {
	var p struct {
		Entry   harness.Entry `json:"entry"`
		Version string        `json:"version"`
		Scope   string        `json:"scope"`
	}
	if err := decodeStrict("harness.put", raw, &p); err != nil {
		return nil, err
	}
	p.Entry.Version = ""
	op := "update"
	if p.Version == "" {
		op = "create"
	}
	return s.harnessWrite(ctx, p.Scope, harness.Edit{Op: op, Entry: p.Entry, Base: p.Version})
}

func hostHarnessDelete(ctx context.Context, s *Session, raw json.RawMessage) (any, error) {
	var p harnessRef
	if err := decodeStrict("harness.delete", raw, &p); err != nil {
		return nil, err
	}
	if p.Version == "" {
		return nil, fmt.Errorf("%w: delete %s %s: name the version you read", harness.ErrInvalid, p.Kind, p.ID)
	}
	return s.harnessWrite(ctx, p.Scope, harness.Edit{Op: "delete", Entry: harness.Entry{Kind: p.Kind, ID: p.ID}, Base: p.Version})
}

func hostHarnessHistory(ctx context.Context, s *Session, raw json.RawMessage) (any, error) {
	var p harnessRef
	if err := decodeStrict("harness.history", raw, &p); err != nil {
		return nil, err
	}
	sc, err := harness.ParseScope(p.Scope)
	if err != nil {
		return nil, err
	}
	st, err := s.harnessStore(ctx, sc)
	if err != nil {
		return nil, err
	}
	return st.History(ctx, p.Kind, p.ID)
}

// hostHarnessSearch finds entries of a kind over every scope.
func hostHarnessSearch(ctx context.Context, s *Session, raw json.RawMessage) (any, error) {
	var p harnessRef
	if err := decodeStrict("harness.search", raw, &p); err != nil {
		return nil, err
	}
	all, err := s.harnessEntries(ctx, p.Kind, "")
	if err != nil {
		return nil, err
	}
	// Search sees each id once, the narrowest scope's, as the context does.
	var entries []harness.Entry
	scopeOf := map[string]harness.Scope{}
	for _, e := range all {
		if _, seen := scopeOf[e.ID]; !seen {
			scopeOf[e.ID] = e.Scope
			entries = append(entries, e.Entry)
		}
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 20
	}
	out := []scopedEntry{}
	for _, e := range harness.Search(entries, p.Query, limit) {
		out = append(out, scopedEntry{e, scopeOf[e.ID]})
	}
	return out, nil
}

func scopeWords(scopes []harness.Scope) string {
	if len(scopes) == 1 {
		return string(scopes[0])
	}
	return "session, workspace or global"
}

func pluralOf(k harness.Kind) string {
	switch k {
	case harness.Memory:
		return "memories"
	}
	return string(k) + "s"
}

// listPinned lists kind k of scope sc as the session sees it: at the commit its harness is
// pinned to (an eval task's), or at the head.
func (s *Session) listPinned(ctx context.Context, st *harness.Store, sc harness.Scope, k harness.Kind) ([]harness.Entry, error) {
	pin, ok := s.meta.Harness[string(sc)]
	if !ok {
		return st.List(ctx, k)
	}
	all, err := st.ListAllAt(ctx, pin)
	if err != nil {
		return nil, err
	}
	out := []harness.Entry{}
	for _, e := range all {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out, nil
}

// getPinned is Get as the session sees the scope (see listPinned).
func (s *Session) getPinned(ctx context.Context, st *harness.Store, sc harness.Scope, k harness.Kind, id string) (harness.Entry, error) {
	if pin, ok := s.meta.Harness[string(sc)]; ok {
		return st.GetAt(ctx, pin, k, id)
	}
	return st.Get(ctx, k, id)
}
