package workspace

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestKernelsGateway: "kernels.gateway" is read from the user config and arbor.json (the
// repository's only once trusted, the user's kept until then), replaced as a whole, turned
// off by an empty url, checked at load, and its tokenEnv is a key variable kernels never get.
func TestKernelsGateway(t *testing.T) {
	user := `{"kernels":{"gateway":{"url":"http://user-gw:8888","tokenEnv":"GW_TOKEN","kernelName":"python3"}}}`
	cfg, err := Load(configFiles(t, user, ""), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	want := &Gateway{URL: "http://user-gw:8888", TokenEnv: "GW_TOKEN", KernelName: "python3"}
	if !reflect.DeepEqual(cfg.Kernels.Gateway, want) {
		t.Fatalf("user gateway %+v", cfg.Kernels.Gateway)
	}
	if !slices.Contains(cfg.KeyEnvs(), "GW_TOKEN") {
		t.Fatalf("KeyEnvs %v lacks the token's variable", cfg.KeyEnvs())
	}
	t.Setenv("GW_TOKEN", "")
	if _, err := cfg.Kernels.Gateway.Token(); err == nil || !strings.Contains(err.Error(), "$GW_TOKEN, which is not set") {
		t.Fatalf("unset token variable: %v", err)
	}
	t.Setenv("GW_TOKEN", "s3cret")
	if tok, err := cfg.Kernels.Gateway.Token(); tok != "s3cret" || err != nil {
		t.Fatalf("token %q %v", tok, err)
	}

	// The repository's gateway needs trust; until then the user's stays.
	root := configFiles(t, user, `{"kernels":{"gateway":{"url":"https://repo-gw"}}}`)
	cfg, err = Load(root, Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Kernels.Gateway.URL != "http://user-gw:8888" || cfg.Trust.Check() == nil || !strings.Contains(cfg.Trust.Check().Error(), "kernels.gateway") {
		t.Fatalf("untrusted repo gateway: %+v %v", cfg.Kernels.Gateway, cfg.Trust.Check())
	}
	trustRepo(t, root, Overrides{})
	if cfg, err = Load(root, Overrides{}); err != nil || !reflect.DeepEqual(cfg.Kernels.Gateway, &Gateway{URL: "https://repo-gw"}) {
		t.Fatalf("trusted repo gateway: %+v %v", cfg.Kernels.Gateway, err)
	}

	// {"url": ""} turns the user's gateway off, and needs no trust.
	cfg, err = Load(configFiles(t, user, `{"kernels":{"gateway":{"url":""}}}`), Overrides{})
	if err != nil || cfg.Kernels.Gateway != nil || cfg.Trust.Check() != nil {
		t.Fatalf("gateway off: %+v %v %v", cfg.Kernels.Gateway, err, cfg.Trust.Check())
	}

	for _, tc := range []struct{ file, want string }{
		{`{"kernels":{"gateway":{"url":"gateway:8888"}}}`, `kernels.gateway.url "gateway:8888": want an http:// or https:// URL`},
		{`{"kernels":{"gateway":{"url":"http://g","tokenEnv":"ARBOR_X"}}}`, "kernels.gateway.tokenEnv"},
		{`{"kernels":{"gateway":{"tokenEnv":"T"}}}`, "without a url"},
		{`{"kernels":{"gateway":{"url":"http://g","token":"x"}}}`, "unknown setting"},
	} {
		if _, err := Load(configFiles(t, tc.file, ""), Overrides{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.file, err, tc.want)
		}
	}
}
