package demo

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arborhq/arbor/kernel/jupytertest"
)

// TestDemoOnGateway runs the demo with "kernels.gateway" in the user config: the refactor,
// its tests (a subprocess of the kernel), goal.complete over the comm bridge and the snapshot
// all run on a real jupyter server with token auth, and the result is the same as locally.
func TestDemoOnGateway(t *testing.T) {
	srv := jupytertest.Start(t)
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	t.Setenv("DEMO_GW_TOKEN", srv.Token)
	os.MkdirAll(filepath.Join(cfg, "arbor"), 0o700)
	conf := fmt.Sprintf(`{"kernels":{"gateway":{"url":%q,"tokenEnv":"DEMO_GW_TOKEN","kernelName":%q}}}`, srv.URL, jupytertest.KernelName)
	if err := os.WriteFile(filepath.Join(cfg, "arbor", "config.json"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Run(t.Context(), &out, Options{Dir: t.TempDir(), Python: "/usr/bin/python3"}); err != nil {
		t.Fatalf("demo: %v\n%s\nserver log:\n%s", err, out.String(), srv.Log())
	}
	for _, want := range []string{"+def rect_area(width, height):", "+from geometry import rect_area, perimeter", "python → OK",
		"end condition `python3 -m unittest -q` passed", "the model claimed success: yes"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
	if n := strings.Count(srv.Log(), "Kernel started"); n == 0 {
		t.Errorf("no kernel ran on the gateway; its log:\n%s", srv.Log())
	}
}
