package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadPrecedence(t *testing.T) {
	root := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	user := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "arbor")
	os.MkdirAll(user, 0o700)
	os.WriteFile(filepath.Join(user, "config.json"), []byte(`{"maxRunning":3,"models":{"a":{"baseURL":"http://user"}},"defaultModel":"a"}`), 0o600)
	os.WriteFile(filepath.Join(root, "arbor.json"), []byte(`{"maxRunning":5,"models":{"b":{"baseURL":"http://repo","toolMode":"fenced"}},"defaultModel":"b"}`), 0o600)

	cfg, err := Load(root, Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxRunning != 5 || cfg.DefaultModel != "b" || cfg.MaxDepth != 2 {
		t.Errorf("repo should beat user and defaults fill the rest: %+v", cfg)
	}
	name, m, err := cfg.ResolveModel("")
	if err != nil || name != "b" || m.Model != "b" || m.ToolMode != "fenced" {
		t.Errorf("ResolveModel = %q %+v %v", name, m, err)
	}

	cfg, err = Load(root, Overrides{ModelBaseURL: "http://env", Model: "m1"})
	if err != nil {
		t.Fatal(err)
	}
	if name, m, _ := cfg.ResolveModel(""); name != "m1" || m.BaseURL != "http://env" {
		t.Errorf("env should win: %q %+v", name, m)
	}
	if _, _, err := cfg.ResolveModel("nope"); err == nil || !strings.Contains(err.Error(), "a, b, m1") {
		t.Errorf("unknown model error should list the models: %v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	for _, tc := range []struct{ file, want string }{
		{`{"cellTimeout":"ten"}`, "cellTimeout"},
		{`{"bogus":1}`, "bogus"},
		{`{"models":{"x":{"toolMode":"smoke"}}}`, "toolMode"},
		{`{"sandbox":"docker"}`, "sandbox"},
		{`{`, "arbor.json"},
	} {
		root := t.TempDir()
		os.WriteFile(filepath.Join(root, "arbor.json"), []byte(tc.file), 0o600)
		if _, err := Load(root, Overrides{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want mention of %q", tc.file, err, tc.want)
		}
	}
}

func TestNoModel(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	cfg, err := Load(t.TempDir(), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := cfg.ResolveModel(""); !errors.Is(err, ErrNoModel) || !strings.Contains(err.Error(), "ARBOR_MODEL_BASE_URL") {
		t.Errorf("err = %v", err)
	}
}

func TestFindRootAndConfine(t *testing.T) {
	root := t.TempDir()
	os.Mkdir(filepath.Join(root, ".git"), 0o700)
	sub := filepath.Join(root, "a", "b")
	os.MkdirAll(sub, 0o700)
	if got, err := FindRoot(sub); err != nil || got != root {
		t.Errorf("FindRoot = %q, %v", got, err)
	}
	if _, err := FindRoot(t.TempDir()); !errors.Is(err, ErrNotRepo) {
		t.Errorf("FindRoot outside a repo: %v", err)
	}
	outside := t.TempDir()
	os.Symlink(outside, filepath.Join(root, "link"))
	for _, tc := range []struct {
		rel string
		ok  bool
	}{{"a/b", true}, {"../x", false}, {"a/../../x", false}, {"link/f", false}, {filepath.Join(root, "a"), true}, {"/etc/passwd", false}} {
		_, err := Confine(root, tc.rel)
		if (err == nil) != tc.ok {
			t.Errorf("Confine(%q) err = %v, want ok=%v", tc.rel, err, tc.ok)
		}
	}
}
