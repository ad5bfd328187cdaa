package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arborhq/arbor/sandbox"
	"github.com/arborhq/arbor/server"
)

func needSandbox(t *testing.T) {
	t.Helper()
	if st := sandbox.Probe(t.Context()); !st.Available {
		if os.Getenv("ARBOR_REQUIRE_KERNEL") == "1" {
			t.Fatalf("sandbox unavailable: %s", st.Reason)
		}
		t.Skipf("sandbox unavailable: %s", st.Reason)
	}
}

// arbor run warns whenever the session's kernel will run unsandboxed: the user's configuration
// turned the sandbox off, or the daemon found bubblewrap cannot work (unless the configuration
// requires it, where the kernel fails to start instead).
func TestSandboxNote(t *testing.T) {
	repo := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	ok := &server.DaemonStatusResult{Sandbox: server.SandboxStatus{Mode: "bwrap", Available: true}}
	broken := &server.DaemonStatusResult{Sandbox: server.SandboxStatus{Mode: "unsandboxed", Reason: "bwrap: Failed to make / slave"}}
	for _, tc := range []struct {
		name, config string
		st           *server.DaemonStatusResult
		want         string // "" = no warning
	}{
		{"sandboxed", ``, ok, ""},
		{"unavailable", ``, broken, "Failed to make / slave"},
		{"off", `{"sandbox":"off"}`, ok, `"sandbox": "off"`},
		{"required", `{"sandbox":"bwrap"}`, broken, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := t.TempDir()
			t.Setenv("XDG_CONFIG_HOME", cfg)
			if tc.config != "" {
				os.MkdirAll(filepath.Join(cfg, "arbor"), 0o700)
				os.WriteFile(filepath.Join(cfg, "arbor", "config.json"), []byte(tc.config), 0o600)
			}
			got := sandboxNote(tc.st, repo)
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("sandboxNote = %q, want %q", got, tc.want)
			}
		})
	}
}
