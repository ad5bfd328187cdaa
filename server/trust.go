package server

import (
	"context"
	"fmt"

	"github.com/arborhq/arbor/workspace"
)

// The arbor/trust.* handlers. The trust store is a file the CLI shares; it is read on every
// request (and on every session's config load), never cached.

func (c *conn) trustGet(ctx context.Context, p TrustParams) (*TrustState, error) {
	root, err := c.trustRoot(p.Dir)
	if err != nil {
		return nil, err
	}
	t, err := workspace.TrustOf(root, c.srv.agents.Overrides())
	if err != nil {
		return nil, err
	}
	return trustState(t), nil
}

func (c *conn) trustGrant(ctx context.Context, p TrustGrantParams) (*TrustState, error) {
	root, err := c.trustRoot(p.Dir)
	if err != nil {
		return nil, err
	}
	t, err := workspace.GrantTrust(root, c.srv.agents.Overrides(), p.Hash)
	if err != nil {
		return nil, err
	}
	c.log.Info("repository trusted", "repo", t.Repo, "hash", t.Hash, "settings", len(t.Settings))
	return trustState(t), nil
}

func (c *conn) trustRevoke(ctx context.Context, p TrustParams) (*TrustState, error) {
	root, err := c.trustRoot(p.Dir)
	if err != nil {
		return nil, err
	}
	if _, err := workspace.RevokeTrust(root); err != nil {
		return nil, err
	}
	return c.trustGet(ctx, TrustParams{Dir: root})
}

// trustRoot is the main repository of dir (the client's root when ""): the one whose
// arbor.json a session started from dir loads, also from a session's worktree.
func (c *conn) trustRoot(dir string) (string, error) {
	if dir == "" {
		c.mu.Lock()
		dir = c.rootDir
		c.mu.Unlock()
	}
	if dir == "" {
		return "", errInvalidParams{msg: "arbor/trust: no dir given and the client has no root folder"}
	}
	return c.srv.agents.Root(dir)
}

func trustState(t workspace.Trust) *TrustState {
	s := &TrustState{Repo: t.Repo, File: t.File, Trusted: t.Trusted, Changed: t.Changed, Hash: t.Hash,
		Settings: make([]TrustSetting, 0, len(t.Settings)),
		Command:  fmt.Sprintf("arbor trust %s", workspace.ShellQuote(t.Repo))}
	for _, st := range t.Settings {
		s.Settings = append(s.Settings, TrustSetting{Name: st.Name, Value: st.Value, Why: st.Why})
	}
	return s
}
