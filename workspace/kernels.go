package workspace

import (
	"fmt"
	"net/url"
	"os"
)

// Kernels says where the sessions' kernels run ("kernels").
type Kernels struct {
	// Gateway runs them on a Jupyter Server or Jupyter Enterprise Gateway
	// ("kernels": {"gateway": {...}}); nil runs them as local processes.
	Gateway *Gateway
}

// Gateway is a Jupyter Server or Enterprise Gateway that runs the sessions' kernels. Its
// kernels must see the repository at the same path as the daemon (the shared-filesystem mode
// of DESIGN.md).
type Gateway struct {
	URL string // http:// or https:// base URL
	// TokenEnv is the NAME of the daemon's variable holding the gateway's token ("": none is
	// sent). Like a model's apiKeyEnv, the variable is never passed to kernels.
	TokenEnv string
	// KernelName is the kernel spec to start ("": the gateway's default).
	KernelName string
}

// Token reads the gateway's token from TokenEnv; a TokenEnv that names an unset variable is
// an error saying so.
func (g *Gateway) Token() (string, error) {
	if g.TokenEnv == "" {
		return "", nil
	}
	tok := os.Getenv(g.TokenEnv)
	if tok == "" {
		return "", fmt.Errorf("kernels.gateway.tokenEnv names $%s, which is not set in the daemon's environment: "+
			"set it to the gateway's token and restart the daemon (arbor daemon stop)", g.TokenEnv)
	}
	return tok, nil
}

type fileKernels struct {
	// Gateway replaces the lower layer's as a whole; {"url": ""} turns it off.
	Gateway *fileGateway `json:"gateway"`
}

type fileGateway struct {
	URL        string `json:"url"`
	TokenEnv   string `json:"tokenEnv"`
	KernelName string `json:"kernelName"`
}

func (f *fileKernels) apply(dst *Kernels) error {
	if f == nil || f.Gateway == nil {
		return nil
	}
	g := f.Gateway
	if g.URL == "" {
		if g.TokenEnv != "" || g.KernelName != "" {
			return fmt.Errorf(`kernels.gateway: tokenEnv and kernelName without a url: want "url": "http://host:port"`)
		}
		dst.Gateway = nil
		return nil
	}
	u, err := url.Parse(g.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("kernels.gateway.url %q: want an http:// or https:// URL of a Jupyter Server or Enterprise Gateway", g.URL)
	}
	if g.TokenEnv != "" {
		if err := checkEnvName(g.TokenEnv); err != nil {
			return fmt.Errorf("kernels.gateway.tokenEnv: %w", err)
		}
	}
	dst.Gateway = &Gateway{URL: g.URL, TokenEnv: g.TokenEnv, KernelName: g.KernelName}
	return nil
}
