package agents

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/arborhq/arbor/workspace"
)

// withProfile applies the profile a new session runs with to its configuration and records
// it in meta: the one named, or else the parent's (a child runs as its parent does). An
// unknown profile, or one the repository is not trusted with, is an error before anything of
// the session exists.
func withProfile(cfg workspace.Config, name string, parent *Meta, meta *Meta) (workspace.Config, error) {
	var p workspace.Profile
	switch {
	case name != "":
		var err error
		if p, err = cfg.Profile(name); err != nil {
			var untrusted *workspace.UntrustedError
			if errors.As(err, &untrusted) {
				return cfg, err
			}
			return cfg, RequestError(err.Error()) // a name the caller got wrong
		}
	case parent != nil && parent.Profile != "":
		// Exactly what the parent runs with, even if arbor.json changed since.
		if err := json.Unmarshal(parent.ProfileSettings, &p); err != nil {
			return cfg, fmt.Errorf("profile %s of session %s: %w", parent.Profile, shortID(parent.ID), err)
		}
	default:
		return cfg, nil
	}
	data, err := json.Marshal(p)
	if err != nil {
		return cfg, fmt.Errorf("record profile %s: %w", p.Name, err)
	}
	meta.Profile, meta.ProfileSettings = p.Name, data
	return cfg.WithProfile(p), nil
}

// recordedProfile applies again the profile a recovered session recorded. Its guarded
// settings stay only while the repository still trusts them; warn says what was left out.
func recordedProfile(cfg workspace.Config, meta Meta) (_ workspace.Config, warn error) {
	if meta.Profile == "" {
		return cfg, nil
	}
	var p workspace.Profile
	if err := json.Unmarshal(meta.ProfileSettings, &p); err != nil {
		// The name is all there is: the profile as arbor.json defines it now, if it can.
		if p, warn = cfg.Profile(meta.Profile); warn != nil {
			return cfg, fmt.Errorf("profile %s: %w; %w", meta.Profile, err, warn)
		}
		return cfg.WithProfile(p), fmt.Errorf("profile %s: %w; applied as arbor.json defines it now", meta.Profile, err)
	}
	p, warn = cfg.Recorded(p)
	return cfg.WithProfile(p), warn
}
