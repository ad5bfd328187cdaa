package workspace

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"": 0, "0": 0, "1024": 1024, "20GB": 20e9, "1.5 MB": 1.5e6, "512MiB": 512 << 20, "2KiB": 2048, "7B": 7} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"lots", "-1GB", "5 parsecs", "GB"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
}

// TestLoadWorktrees: "worktrees" loads its bounds, the repository's over the user's, and a bad
// one fails the load naming the setting.
func TestLoadWorktrees(t *testing.T) {
	root := configFiles(t, `{"worktrees":{"max":3}}`, `{"worktrees":{"diskBudget":"2GiB"}}`)
	cfg, err := Load(root, Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if w := cfg.Worktrees; w.Max != 3 || w.DiskBudget != 2<<30 || !w.Bounded() {
		t.Errorf("Worktrees = %+v", w)
	}
	for repo, want := range map[string]string{
		`{"worktrees":{"max":-1}}`:             `worktrees.max -1: want 0 (no bound) or more`,
		`{"worktrees":{"diskBudget":"heaps"}}`: `worktrees.diskBudget: "heaps": want a size such as "20GB"`,
		`{"worktrees":{"maxDisk":"1GB"}}`:      `unknown setting`,
	} {
		root := configFiles(t, "", repo)
		if _, err := Load(root, Overrides{}); err == nil || !strings.HasPrefix(err.Error(), filepath.Join(root, "arbor.json")+": "+want) {
			t.Errorf("%s: err = %v, want %s", repo, err, want)
		}
	}
}
