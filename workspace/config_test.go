package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// configFiles writes the user config and the repo's arbor.json ("" = no file) and returns the
// repository root.
func configFiles(t *testing.T, user, repo string) string {
	t.Helper()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	root := t.TempDir()
	if user != "" {
		dir := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "arbor")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(user), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if repo != "" {
		if err := os.WriteFile(filepath.Join(root, "arbor.json"), []byte(repo), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestLoadLayers: flags > environment > arbor.json > user config > defaults, setting by
// setting, where a file that sets false or 0 overrides the layer below and one that leaves a
// setting out keeps it.
func TestLoadLayers(t *testing.T) {
	tests := []struct {
		name       string
		user, repo string
		env        map[string]string
		flags      func(*Overrides) // applied over the environment, as the daemon's flags are
		want       func(c *Config)  // edits Defaults() into the expected Config
	}{
		{name: "defaults", want: func(c *Config) {}},
		{name: "user over defaults", user: `{"allowNetwork":true,"maxDepth":3,"cellTimeout":"5m"}`,
			want: func(c *Config) { c.AllowNetwork, c.MaxDepth, c.CellTimeout = true, 3, 5*time.Minute }},
		{name: "user zero over defaults", user: `{"maxDepth":0,"idleTimeout":"0"}`,
			want: func(c *Config) { c.MaxDepth, c.IdleTimeout = 0, 0 }},
		{name: "repo false and 0 over user true and 2",
			user: `{"allowNetwork":true,"maxDepth":2,"sandbox":"bwrap","idleTimeout":"1h"}`,
			repo: `{"allowNetwork":false,"maxDepth":0,"sandbox":"","idleTimeout":"0s"}`,
			want: func(c *Config) { c.AllowNetwork, c.MaxDepth, c.Sandbox, c.IdleTimeout = false, 0, SandboxAuto, 0 }}, // "" is the old auto
		{name: "sandbox settings", user: `{"sandbox":"off","network":true,"sandboxHome":[".config/tool"],"kernelEnv":["MY_HOME"]}`,
			repo: `{"sandbox":"bwrap","kernelEnv":["OTHER"]}`,
			want: func(c *Config) {
				c.Sandbox, c.AllowNetwork, c.SandboxHome, c.KernelEnv = SandboxBwrap, true, []string{".config/tool"}, []string{"OTHER"}
			}},
		{name: "repo silent keeps user", user: `{"allowNetwork":true,"maxRunning":3,"cellTimeout":"2m"}`, repo: `{}`,
			want: func(c *Config) { c.AllowNetwork, c.MaxRunning, c.CellTimeout = true, 3, 2*time.Minute }},
		{name: "repo duration over user", user: `{"cellTimeout":"5m","maxTurnSteps":10}`, repo: `{"cellTimeout":"90s","outputBudget":100}`,
			want: func(c *Config) { c.CellTimeout, c.MaxTurnSteps, c.OutputBudget = 90*time.Second, 10, 100 }},
		{name: "repo worktree replaces user's", user: `{"worktree":{"copy":[".env"],"command":"make"}}`,
			repo: `{"worktree":{"link":["a/../node_modules"],"timeout":"2m"}}`,
			want: func(c *Config) {
				c.Worktree = WorktreeSetup{Link: []string{"node_modules"}, CommandTimeout: 2 * time.Minute}
			}},
		{name: "empty repo worktree clears user's", user: `{"worktree":{"copy":[".env"]}}`, repo: `{"worktree":{}}`,
			want: func(c *Config) {}},
		{name: "models by name", user: `{"models":{"a":{"baseURL":"http://user"},"b":{"baseURL":"http://user-b","contextWindow":9}},"defaultModel":"a"}`,
			repo: `{"models":{"b":{"baseURL":"http://repo","toolMode":"fenced"}},"defaultModel":"b"}`,
			want: func(c *Config) {
				c.Models = map[string]Model{"a": {BaseURL: "http://user"}, "b": {BaseURL: "http://repo", ToolMode: "fenced"}}
				c.DefaultModel = "b"
			}},
		{name: "environment over files", repo: `{"models":{"m1":{"contextWindow":1200}},"defaultModel":"b","kernelPython":"/repo/python"}`,
			env: map[string]string{"ARBOR_MODEL_BASE_URL": "http://env", "ARBOR_MODEL": "m1", "ARBOR_API_KEY_ENV": "KEY", "ARBOR_KERNEL_PYTHON": "/env/python"},
			want: func(c *Config) {
				c.Models = map[string]Model{"m1": {BaseURL: "http://env", APIKeyEnv: "KEY", ContextWindow: 1200}}
				c.DefaultModel, c.KernelPython = "m1", "/env/python"
			}},
		{name: "flags over environment", user: `{"kernelPython":"/user/python"}`,
			env:   map[string]string{"ARBOR_MODEL_BASE_URL": "http://env", "ARBOR_KERNEL_PYTHON": "/env/python"},
			flags: func(o *Overrides) { o.KernelPython, o.ModelBaseURL = "/flag/python", "http://flag" },
			want: func(c *Config) {
				c.Models = map[string]Model{"default": {BaseURL: "http://flag"}}
				c.DefaultModel, c.KernelPython = "default", "/flag/python"
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"ARBOR_MODEL_BASE_URL", "ARBOR_MODEL", "ARBOR_API_KEY_ENV", "ARBOR_KERNEL_PYTHON"} {
				t.Setenv(k, tc.env[k])
			}
			root := configFiles(t, tc.user, tc.repo)
			ov := OverridesFromEnv()
			if tc.flags != nil {
				tc.flags(&ov)
			}
			// These cases are about layering: the repository is trusted (trust_test.go is
			// about what happens before).
			trustRepo(t, root, ov)
			got, err := Load(root, ov)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Trust.Trusted {
				t.Fatalf("not trusted after trustRepo: %+v", got.Trust)
			}
			got.Trust = Trust{}
			want := Defaults()
			tc.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Load =\n %+v\nwant\n %+v", got, want)
			}
		})
	}
}

// A bad setting fails the load with the file, the setting, the value and what was expected.
func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name       string
		user, repo string
		want       string // the error after "<file>: "
	}{
		{"bad duration", "", `{"cellTimeout":"10 minutes"}`, `cellTimeout "10 minutes": want a Go duration such as "10m"`},
		{"bad duration in the user config", `{"idleTimeout":"soon"}`, "", `idleTimeout "soon": want a Go duration such as "30m"`},
		{"bad worktree timeout", "", `{"worktree":{"command":"make","timeout":"5"}}`, `worktree.timeout "5": want a Go duration such as "5m"`},
		{"zero cell timeout", "", `{"cellTimeout":"0s"}`, `cellTimeout "0s": want a positive Go duration such as "10m"`},
		{"negative idle timeout", "", `{"idleTimeout":"-1m"}`, `idleTimeout "-1m": want a positive Go duration`},
		{"duration as a number", "", `{"cellTimeout":600}`, `cellTimeout: got a JSON number, want a string`},
		{"negative depth", "", `{"maxDepth":-1}`, `maxDepth -1: want a whole number of at least 0`},
		{"no running sessions", "", `{"maxRunning":0}`, `maxRunning 0: want a whole number of at least 1`},
		{"number as a string", "", `{"maxDepth":"2"}`, `maxDepth: got a JSON string, want a whole number`},
		{"bool as a string", "", `{"allowNetwork":"yes"}`, `allowNetwork: got a JSON string, want true or false`},
		{"unknown setting", "", `{"bogus":1}`, `unknown setting "bogus"`},
		{"tool mode", "", `{"models":{"x":{"toolMode":"smoke"}}}`, `models.x.toolMode "smoke": want "tools" or "fenced"`},
		{"sandbox", "", `{"sandbox":"docker"}`, `sandbox "docker": want "auto" (the default), "bwrap" or "off"`},
		{"network disagrees", "", `{"network":true,"allowNetwork":false}`, `network true and allowNetwork false disagree`},
		{"sandboxHome ssh", "", `{"sandboxHome":[".ssh/config"]}`, `sandboxHome ".ssh/config": ~/.ssh always stays hidden`},
		{"sandboxHome outside", "", `{"sandboxHome":["../x"]}`, `sandboxHome "../x": want a path inside $HOME`},
		{"kernelEnv arbor", "", `{"kernelEnv":["ARBOR_API_KEY_ENV"]}`, `kernelEnv "ARBOR_API_KEY_ENV": Arbor's own settings`},
		{"syntax", "", "{\n\"maxDepth\": 2,\n}", `line 3: invalid character '}'`},
		{"two objects", "", `{} {}`, `unexpected content after the settings object`},
		{"empty", "", ` `, `empty file: want a JSON object of settings`},
		{"copy outside", "", `{"worktree":{"copy":["../x"]}}`, `worktree.copy "../x": path ../x is outside the workspace`},
		{"copy escaping midway", "", `{"worktree":{"copy":["a/../../x"]}}`, `worktree.copy "a/../../x": path ../x is outside`},
		{"absolute link", "", `{"worktree":{"link":["/etc"]}}`, `worktree.link "/etc": want a path relative to the repository`},
		{"the repository itself", "", `{"worktree":{"link":["./"]}}`, `worktree.link "./": want a path inside the repository, not the repository itself`},
		{"git dir", "", `{"worktree":{"copy":[".git/config"]}}`, `worktree.copy ".git/config": want a path outside .git`},
		{"through a symlink", "", `{"worktree":{"copy":["out/secret"]}}`, `worktree.copy "out/secret": path out/secret resolves to`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := configFiles(t, tc.user, tc.repo)
			if err := os.Symlink(t.TempDir(), filepath.Join(root, "out")); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(root, "arbor.json")
			if tc.user != "" {
				file = UserConfigPath()
			}
			_, err := Load(root, Overrides{})
			if err == nil || !strings.HasPrefix(err.Error(), file+": "+tc.want) {
				t.Errorf("err = %v\nwant %s: %s…", err, file, tc.want)
			}
		})
	}
}

func TestKeyEnvs(t *testing.T) {
	c := Config{Models: map[string]Model{"a": {APIKeyEnv: "OPENAI_KEY"}, "b": {}, "c": {APIKeyEnv: "AWS_SECRET_ACCESS_KEY"}}}
	if got := strings.Join(c.KeyEnvs(), " "); got != "AWS_SECRET_ACCESS_KEY OPENAI_KEY" {
		t.Errorf("KeyEnvs = %q", got)
	}
}

func TestNoModel(t *testing.T) {
	root := configFiles(t, "", "")
	cfg, err := Load(root, Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := cfg.ResolveModel(""); !errors.Is(err, ErrNoModel) || !strings.Contains(err.Error(), "ARBOR_MODEL_BASE_URL") {
		t.Errorf("err = %v", err)
	}
}

func TestResolveModel(t *testing.T) {
	root := configFiles(t, `{"models":{"a":{"baseURL":"http://user"}}}`, `{"models":{"b":{"baseURL":"http://repo","toolMode":"fenced"}},"defaultModel":"b"}`)
	trustRepo(t, root, Overrides{}) // the repository's entry has a URL: trust_test.go is about before
	cfg, err := Load(root, Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if name, m, err := cfg.ResolveModel(""); err != nil || name != "b" || m.Model != "b" || m.ToolMode != "fenced" {
		t.Errorf("ResolveModel = %q %+v %v", name, m, err)
	}
	if _, _, err := cfg.ResolveModel("nope"); err == nil || !strings.Contains(err.Error(), "a, b") {
		t.Errorf("unknown model error should list the models: %v", err)
	}
}

func TestValidate(t *testing.T) {
	if err := Defaults().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.CellTimeout = 0 }, "cellTimeout"},
		{func(c *Config) { c.MaxDepth = -1 }, "maxDepth"},
		{func(c *Config) { c.Sandbox = "docker" }, "sandbox"},
		{func(c *Config) { c.Models = map[string]Model{"x": {ToolMode: "smoke"}} }, "models.x.toolMode"},
	} {
		c := Defaults()
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want mention of %s", err, tc.want)
		}
	}
}
