package server

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/harness"
)

// The arbor/harness.* handlers: resolve the scope's store, delegate, map errors. Every write
// from the protocol is the user's (the kernel writes as the agent, refine as refine).

var userChange = harness.Change{Author: "user"}

func (c *conn) harnessList(ctx context.Context, p HarnessListParams) (*HarnessListResult, error) {
	st, sc, err := c.harnessStore(ctx, p.HarnessScope)
	if err != nil {
		return nil, err
	}
	kinds := harness.Kinds
	if p.Kind != "" {
		k, err := parseKind(p.Kind)
		if err != nil {
			return nil, err
		}
		kinds = []harness.Kind{k}
	}
	head, err := st.Head(ctx)
	if err != nil {
		return nil, err
	}
	res := &HarnessListResult{Scope: string(sc), Ref: st.Ref(), Head: head, Entries: []HarnessEntry{}}
	for _, k := range kinds {
		es, err := st.List(ctx, k)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			res.Entries = append(res.Entries, harnessEntry(e))
		}
	}
	return res, nil
}

func (c *conn) harnessGet(ctx context.Context, p HarnessGetParams) (*HarnessEntry, error) {
	st, sc, err := c.harnessStore(ctx, p.HarnessScope)
	if err != nil {
		return nil, err
	}
	k, err := parseKind(p.Kind)
	if err != nil {
		return nil, err
	}
	var e harness.Entry
	if p.Version == "" {
		e, err = st.Get(ctx, k, p.ID)
	} else {
		var v string
		if v, err = resolveVersion(ctx, st, sc, p.Version); err != nil {
			return nil, err
		}
		e, err = st.GetAt(ctx, v, k, p.ID)
	}
	if err != nil {
		return nil, missing(ctx, st, sc, k, p.ID, err)
	}
	out := harnessEntry(e)
	return &out, nil
}

func (c *conn) harnessPut(ctx context.Context, p HarnessPutParams) (*HarnessWriteResult, error) {
	st, sc, err := c.harnessStore(ctx, p.HarnessScope)
	if err != nil {
		return nil, err
	}
	k, err := parseKind(p.Entry.Kind)
	if err != nil {
		return nil, err
	}
	base, err := resolveBase(ctx, st, sc, p.Base)
	if err != nil {
		return nil, err
	}
	e := harness.Entry{Kind: k, ID: p.Entry.ID, Title: p.Entry.Title, Body: p.Entry.Body, Module: p.Entry.Module}
	if s := p.Entry.Spec; s != nil {
		e.Spec = &harness.Spec{Instructions: s.Instructions, Model: s.Model, MaxTurnSteps: s.MaxTurnSteps}
	}
	v, err := st.Put(ctx, e, base, userChange)
	if err != nil {
		return nil, err
	}
	c.log.Info("harness put", "scope", sc, "kind", k, "id", e.ID, "version", v)
	return &HarnessWriteResult{Version: v, Unchanged: v == base}, nil
}

func (c *conn) harnessDelete(ctx context.Context, p HarnessDeleteParams) (*HarnessWriteResult, error) {
	st, sc, err := c.harnessStore(ctx, p.HarnessScope)
	if err != nil {
		return nil, err
	}
	k, err := parseKind(p.Kind)
	if err != nil {
		return nil, err
	}
	base, err := resolveBase(ctx, st, sc, p.Base)
	if err != nil {
		return nil, err
	}
	v, err := st.Delete(ctx, k, p.ID, base, userChange)
	if err != nil {
		return nil, err
	}
	c.log.Info("harness delete", "scope", sc, "kind", k, "id", p.ID, "version", v)
	return &HarnessWriteResult{Version: v}, nil
}

func (c *conn) harnessRollback(ctx context.Context, p HarnessRollbackParams) (*HarnessWriteResult, error) {
	st, sc, err := c.harnessStore(ctx, p.HarnessScope)
	if err != nil {
		return nil, err
	}
	k, err := parseKind(p.Kind)
	if err != nil {
		return nil, err
	}
	if p.Version == "" {
		return nil, errInvalidParams{msg: "arbor/harness.rollback: name the version to restore (arbor harness history lists them)"}
	}
	to, err := resolveVersion(ctx, st, sc, p.Version)
	if err != nil {
		return nil, err
	}
	before, _ := st.Head(ctx)
	v, err := st.Rollback(ctx, k, p.ID, to, userChange)
	if err != nil {
		return nil, missing(ctx, st, sc, k, p.ID, err)
	}
	after, _ := st.Head(ctx)
	if sc == harness.ScopeSession && after != before {
		c.srv.agents.RolledBack(ctx, p.Session, event.HarnessRolledBack{Scope: string(sc), Kind: string(k), ID: p.ID, To: to, Commit: after, Author: "user"})
	}
	c.log.Info("harness rollback", "scope", sc, "kind", k, "id", p.ID, "to", to, "version", v)
	// A rollback to what the entry already is makes no commit and returns its version.
	return &HarnessWriteResult{Version: v, Unchanged: before == after}, nil
}

func (c *conn) harnessHistory(ctx context.Context, p HarnessHistoryParams) (*HarnessHistoryResult, error) {
	st, sc, err := c.harnessStore(ctx, p.HarnessScope)
	if err != nil {
		return nil, err
	}
	k, err := entryOrScope(p.Kind, p.ID)
	if err != nil {
		return nil, err
	}
	vs, err := st.History(ctx, k, p.ID)
	if err != nil {
		return nil, missing(ctx, st, sc, k, p.ID, err)
	}
	res := &HarnessHistoryResult{Versions: make([]HarnessVersion, 0, len(vs))}
	for _, v := range vs {
		ch := v.Change
		res.Versions = append(res.Versions, HarnessVersion{Commit: v.Commit, Time: v.Time, Subject: v.Subject,
			Change: HarnessChange{Author: ch.Author, Session: ch.Session, Turn: ch.Turn, Trigger: ch.Trigger,
				Intended: ch.Intended, Observed: ch.Observed}})
	}
	return res, nil
}

func (c *conn) harnessDiff(ctx context.Context, p HarnessDiffParams) (*HarnessDiffResult, error) {
	st, sc, err := c.harnessStore(ctx, p.HarnessScope)
	if err != nil {
		return nil, err
	}
	k, err := entryOrScope(p.Kind, p.ID)
	if err != nil {
		return nil, err
	}
	res := &HarnessDiffResult{}
	if p.From != "" {
		if res.From, err = resolveVersion(ctx, st, sc, p.From); err != nil {
			return nil, err
		}
	}
	if p.To == "" {
		if res.To, err = st.Head(ctx); err == nil && res.To == "" {
			err = fmt.Errorf("%w: the %s harness has no changes yet", harness.ErrNotFound, sc)
		}
	} else {
		res.To, err = resolveVersion(ctx, st, sc, p.To)
	}
	if err != nil {
		return nil, err
	}
	if res.Patch, err = st.Diff(ctx, k, p.ID, res.From, res.To); err != nil {
		return nil, err
	}
	return res, nil
}

// harnessStore opens the store of the scope p names (default workspace, the client's root).
func (c *conn) harnessStore(ctx context.Context, p HarnessScope) (*harness.Store, harness.Scope, error) {
	sc := harness.ScopeWorkspace
	if p.Scope != "" {
		var err error
		if sc, err = harness.ParseScope(p.Scope); err != nil {
			return nil, "", errInvalidParams{msg: err.Error()}
		}
	}
	dir := p.Dir
	switch sc {
	case harness.ScopeSession:
		if p.Session == "" {
			return nil, "", errInvalidParams{msg: "the session scope needs a session id (--session ID)"}
		}
	case harness.ScopeWorkspace:
		if dir == "" {
			c.mu.Lock()
			dir = c.rootDir
			c.mu.Unlock()
		}
		if dir == "" {
			return nil, "", errInvalidParams{msg: "arbor/harness: no dir given and the client has no root folder"}
		}
	}
	st, err := c.srv.agents.HarnessStore(ctx, dir, sc, p.Session)
	return st, sc, err
}

// entryOrScope reads the kind and id of a request about one entry, or ("", "") the whole scope.
func entryOrScope(kind, id string) (harness.Kind, error) {
	if kind == "" && id == "" {
		return "", nil
	}
	if kind == "" || id == "" {
		return "", errInvalidParams{msg: "name one entry by kind and id, or neither for the whole scope"}
	}
	return parseKind(kind)
}

func parseKind(s string) (harness.Kind, error) {
	k, err := harness.ParseKind(s)
	if err != nil {
		return "", errInvalidParams{msg: err.Error()}
	}
	return k, nil
}

// resolveVersion finds the commit of the scope's history that v names (in full or by a unique
// prefix), so a version from another ref of the same object store is never read as one.
func resolveVersion(ctx context.Context, st *harness.Store, sc harness.Scope, v string) (string, error) {
	vs, err := st.History(ctx, "", "")
	if err != nil {
		return "", err
	}
	var found []string
	for _, x := range vs {
		if strings.HasPrefix(x.Commit, strings.ToLower(v)) {
			found = append(found, x.Commit)
		}
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1:
		return "", errInvalidParams{msg: fmt.Sprintf("version %q is ambiguous in the %s harness: %d commits start with it", clip(v, maxEcho), sc, len(found))}
	case len(vs) == 0:
		return "", fmt.Errorf("%w: no version %q: the %s harness has no changes yet", harness.ErrNotFound, clip(v, maxEcho), sc)
	}
	return "", fmt.Errorf("%w: no version %q in the %s harness (%s, %d commits; arbor harness history lists them)",
		harness.ErrNotFound, clip(v, maxEcho), sc, st.Ref(), len(vs))
}

// resolveBase expands an abbreviated base version; a full one is the store's to judge, so a
// stale one is refused as stale, naming the current version.
func resolveBase(ctx context.Context, st *harness.Store, sc harness.Scope, base string) (string, error) {
	if base == "" || len(base) == 40 {
		return base, nil
	}
	return resolveVersion(ctx, st, sc, base)
}

// missing adds to a not-found error what the scope does hold of that kind.
func missing(ctx context.Context, st *harness.Store, sc harness.Scope, k harness.Kind, id string, err error) error {
	if !errors.Is(err, harness.ErrNotFound) || k == "" {
		return err
	}
	es, lerr := st.List(ctx, k)
	if lerr != nil {
		return err
	}
	if len(es) == 0 {
		return fmt.Errorf("%w; the %s harness has no %s entries", err, sc, k)
	}
	const show = 20
	ids := make([]string, 0, show)
	for _, e := range es[:min(len(es), show)] {
		ids = append(ids, e.ID)
	}
	more := ""
	if len(es) > show {
		more = fmt.Sprintf(" and %d more", len(es)-show)
	}
	return fmt.Errorf("%w; the %s harness has %s entries %s%s", err, sc, k, strings.Join(ids, ", "), more)
}

func harnessEntry(e harness.Entry) HarnessEntry {
	out := HarnessEntry{Kind: string(e.Kind), ID: e.ID, Title: e.Title, Body: e.Body, Module: e.Module, Version: e.Version}
	if e.Spec != nil {
		out.Spec = &HarnessSpec{Instructions: e.Spec.Instructions, Model: e.Spec.Model, MaxTurnSteps: e.Spec.MaxTurnSteps}
	}
	return out
}
