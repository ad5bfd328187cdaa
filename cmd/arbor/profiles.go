package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/arborhq/arbor/server"
)

// profileOrder is the order settings are shown in: what a profile is about first.
var profileOrder = []string{"model", "provider", "toolMode", "until", "checkTimeout", "maxTurns", "maxTokens", "maxWall", "maxCost",
	"maxTurnSteps", "cellTimeout", "retry", "compaction", "refine"}

// cmdProfiles lists the profiles a run in the repository can use, as the daemon resolves
// them, and says which wait for `arbor trust`.
func cmdProfiles(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("profiles", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the profiles as JSON")
	pos, err := flags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return fmt.Errorf("usage: arbor profiles [DIR] [--json]")
	}
	dir := "."
	if len(pos) == 1 {
		dir = pos[0]
	}
	abs, err := absDir(dir)
	if err != nil {
		return err
	}
	c, err := connect(ctx, true, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := server.Profiles.Call(ctx, c, server.ProfilesParams{Dir: abs})
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(res)
	}
	return printProfiles(os.Stdout, res.Profiles)
}

func printProfiles(w io.Writer, ps []server.ProfileInfo) error {
	if len(ps) == 0 {
		fmt.Fprintln(w, `no profiles: add "profiles": {"NAME": {...}} to arbor.json or the user config (see the README's Profiles)`)
		return nil
	}
	for i, p := range ps {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s  (%s)\n", p.Name, p.Source)
		if len(p.Untrusted) > 0 {
			fmt.Fprintf(w, "  not applied: the repository is not trusted with these, so a run with this profile is refused until: %s\n", p.TrustCommand)
			for _, s := range p.Untrusted {
				fmt.Fprintf(w, "    %s = %s\n        %s\n", s.Name, s.Value, s.Why)
			}
		}
		var settings map[string]json.RawMessage
		if err := json.Unmarshal(p.Settings, &settings); err != nil {
			return fmt.Errorf("profile %s: %w", p.Name, err)
		}
		for _, k := range profileOrder {
			if v, ok := settings[k]; ok && string(v) != "{}" {
				fmt.Fprintf(w, "  %-13s %s\n", k, strings.Trim(string(v), `"`))
			}
		}
	}
	return nil
}
