package workspace

import (
	"strings"
	"testing"

	"github.com/arborhq/arbor/sandbox"
)

// The user config sets the budget; a repository's arbor.json sets it only once trusted, and a
// bad value fails the load naming the setting.
func TestLimitsSetting(t *testing.T) {
	root := configFiles(t, `{"limits":{"processes":300,"memory":"2GiB"}}`, `{"limits":{"processes":100000,"memory":"unlimited"}}`)
	cfg, err := Load(root, Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Limits != (sandbox.Limits{Processes: 300, Memory: 2 << 30}) {
		t.Errorf("an untrusted repository's limits applied, or the user's did not: %+v", cfg.Limits)
	}
	got := strings.Join(names(cfg.Trust.Settings), ",")
	if got != "limits.memory,limits.processes" || cfg.Trust.Check() == nil {
		t.Errorf("guarded settings = %s (check %v), want both limits needing trust", got, cfg.Trust.Check())
	}
	trustRepo(t, root, Overrides{})
	if cfg, err = Load(root, Overrides{}); err != nil {
		t.Fatal(err)
	}
	if cfg.Limits != (sandbox.Limits{Processes: 100000, Memory: -1}) {
		t.Errorf("trusted limits did not apply: %+v", cfg.Limits)
	}

	if cfg, err := Load(configFiles(t, "", ""), Overrides{}); err != nil || cfg.Limits != (sandbox.Limits{}) {
		t.Errorf("no setting: %+v, %v; want zero limits (the defaults)", cfg.Limits, err)
	}
	for _, bad := range []string{`{"limits":{"processes":4}}`, `{"limits":{"memory":"lots"}}`, `{"limits":{"processes":-5}}`} {
		if _, err := Load(configFiles(t, bad, ""), Overrides{}); err == nil || !strings.Contains(err.Error(), "limits") {
			t.Errorf("%s: load error %v, want one naming the limits setting", bad, err)
		}
	}
}
