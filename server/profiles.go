package server

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/arborhq/arbor/workspace"
)

// profiles answers arbor/profiles: the repository's profiles as the daemon, with its own
// overrides and the trust store, would run them.
func (c *conn) profiles(ctx context.Context, p ProfilesParams) (*ProfilesResult, error) {
	root, err := c.trustRoot(p.Dir)
	if err != nil {
		return nil, err
	}
	cfg, err := workspace.Load(root, c.srv.agents.Overrides())
	if err != nil {
		return nil, err
	}
	res := &ProfilesResult{Profiles: []ProfileInfo{}}
	for _, name := range cfg.ProfileNames() {
		prof := cfg.Profiles[name]
		data, err := json.Marshal(prof)
		if err != nil {
			return nil, fmt.Errorf("profile %s: %w", name, err)
		}
		info := ProfileInfo{Name: name, Source: prof.Source, Settings: data}
		if u := prof.Untrusted(); len(u) > 0 {
			info.TrustCommand = "arbor trust " + workspace.ShellQuote(cfg.Trust.Repo)
			for _, st := range u {
				info.Untrusted = append(info.Untrusted, TrustSetting{Name: st.Name, Value: st.Value, Why: st.Why})
			}
		}
		res.Profiles = append(res.Profiles, info)
	}
	return res, nil
}
