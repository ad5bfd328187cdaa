package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// Gateway is where a kernel runs when it is not a local process: a Jupyter Server, or a
// Jupyter Enterprise Gateway running kernels as Kubernetes pods or YARN containers, driven
// through its REST and WebSocket API. See the package doc.
type Gateway struct {
	// URL is the server's base URL, such as http://gateway:8888 or https://host/prefix.
	URL string
	// Token authenticates every request (Authorization: token …); "" sends none.
	Token string
	// KernelName is the kernel spec to start ("" = the server's default).
	KernelName string
	// Reconnect is how long a dropped WebSocket is retried before the kernel counts as dead
	// and a running cell fails; 0 means 30 s.
	Reconnect time.Duration
	// Poll is how often the kernel's REST model is read to notice a kernel the gateway
	// stopped (culled, deleted by its operator) when the WebSocket says nothing; 0 means 10 s.
	Poll time.Duration
	// HTTP is the client for REST calls and the WebSocket; nil means Arbor's own. Each call is
	// bounded by its context (a kernel start by the start's deadline: a gateway answers POST
	// /api/kernels once the kernel is up, which under a burst of starts takes long), else 30 s.
	HTTP *http.Client
}

// Validate reports the first field that cannot work.
func (g *Gateway) Validate() error {
	u, err := url.Parse(g.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("kernel gateway: URL %q is not an http:// or https:// URL", g.URL)
	}
	if g.Reconnect < 0 || g.Poll < 0 {
		return errors.New("kernel gateway: Reconnect and Poll must not be negative")
	}
	return nil
}

func (g *Gateway) reconnect() time.Duration {
	if g.Reconnect <= 0 {
		return 30 * time.Second
	}
	return g.Reconnect
}

func (g *Gateway) poll() time.Duration {
	if g.Poll <= 0 {
		return 10 * time.Second
	}
	return g.Poll
}

var defaultGatewayHTTP = &http.Client{}

// gatewayClient makes the REST calls of one Gateway.
type gatewayClient struct {
	g    *Gateway
	base string // URL without a trailing slash
	http *http.Client
}

func newGatewayClient(g *Gateway) *gatewayClient {
	c := &gatewayClient{g: g, base: strings.TrimRight(g.URL, "/"), http: g.HTTP}
	if c.http == nil {
		c.http = defaultGatewayHTTP
	}
	return c
}

// ErrGatewayAuth is wrapped by errors for a token the gateway refused (401 or 403).
var ErrGatewayAuth = errors.New("the kernel gateway refused the token")

// ErrGatewayUnreachable is wrapped by errors for a gateway that does not answer.
var ErrGatewayUnreachable = errors.New("the kernel gateway does not answer")

// statusError is a REST answer other than the one wanted.
type statusError struct {
	code int
	msg  string // the server's "message", or the body's start
}

func (e *statusError) Error() string {
	if e.msg == "" {
		return fmt.Sprintf("%d %s", e.code, http.StatusText(e.code))
	}
	return fmt.Sprintf("%d %s: %s", e.code, http.StatusText(e.code), e.msg)
}

func isStatus(err error, code int) bool {
	var se *statusError
	return errors.As(err, &se) && se.code == code
}

// do sends one request and decodes a JSON answer into out (nil: discarded).
func (c *gatewayClient) do(ctx context.Context, method, path string, body, out any) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("kernel gateway %s: %w", c.g.URL, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c.auth(req.Header)
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s %s: %w", method, path, ctx.Err())
		}
		return fmt.Errorf("%w: %s %s%s: %v", ErrGatewayUnreachable, method, c.base, path, unwrapURLError(err))
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		hint := "check the token (the gateway's tokenEnv)"
		if c.g.Token == "" {
			hint = "no token was sent: set the gateway's tokenEnv to a variable holding it"
		}
		return fmt.Errorf("%w (%d %s) at %s: %s", ErrGatewayAuth, resp.StatusCode, http.StatusText(resp.StatusCode), c.g.URL, hint)
	case resp.StatusCode/100 != 2:
		return fmt.Errorf("%s %s%s: %w", method, c.base, path, &statusError{resp.StatusCode, serverMessage(b)})
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s%s: the answer is not the JSON expected: %v", method, c.base, path, err)
		}
	}
	return nil
}

func (c *gatewayClient) auth(h http.Header) {
	if c.g.Token != "" {
		h.Set("Authorization", "token "+c.g.Token)
	}
}

// unwrapURLError drops net/url's repetition of method and URL.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func serverMessage(b []byte) string {
	var m struct {
		Message string `json:"message"`
		Reason  string `json:"reason"`
	}
	if json.Unmarshal(b, &m) == nil && (m.Message != "" || m.Reason != "") {
		return strings.TrimSpace(m.Reason + " " + m.Message)
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// kernelModel is the REST model of a kernel.
type kernelModel struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	ExecutionState string `json:"execution_state"`
}

// start starts a kernel of the configured spec whose working directory is dir.
func (c *gatewayClient) start(ctx context.Context, dir string) (*kernelModel, error) {
	body := map[string]any{
		// Enterprise Gateway reads the kernel's working directory from its KERNEL_ variables;
		// Jupyter Server ignores env and path outside its root; the runtime's bootstrap
		// changes to dir in every case.
		"env": map[string]string{"KERNEL_WORKING_DIR": dir},
	}
	if c.g.KernelName != "" {
		body["name"] = c.g.KernelName
	}
	var m kernelModel
	err := c.do(ctx, "POST", "/api/kernels", body, &m)
	if err != nil {
		if isStatus(err, 404) || isStatus(err, 500) || isStatus(err, 400) {
			if names, lerr := c.kernelSpecs(ctx); lerr == nil && c.g.KernelName != "" && !contains(names, c.g.KernelName) {
				return nil, fmt.Errorf("kernel gateway %s has no kernel named %q; it has: %s", c.g.URL, c.g.KernelName, strings.Join(names, ", "))
			}
		}
		return nil, fmt.Errorf("start a kernel on the gateway: %w", err)
	}
	if m.ID == "" {
		return nil, fmt.Errorf("start a kernel on the gateway %s: the answer has no kernel id", c.g.URL)
	}
	return &m, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// kernelSpecs lists the names of the kernel specs the gateway offers.
func (c *gatewayClient) kernelSpecs(ctx context.Context) ([]string, error) {
	var specs struct {
		Kernelspecs map[string]json.RawMessage `json:"kernelspecs"`
	}
	if err := c.do(ctx, "GET", "/api/kernelspecs", nil, &specs); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(specs.Kernelspecs))
	for n := range specs.Kernelspecs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

func (c *gatewayClient) get(ctx context.Context, id string) (*kernelModel, error) {
	var m kernelModel
	if err := c.do(ctx, "GET", "/api/kernels/"+url.PathEscape(id), nil, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

func (c *gatewayClient) interrupt(ctx context.Context, id string) error {
	return c.do(ctx, "POST", "/api/kernels/"+url.PathEscape(id)+"/interrupt", struct{}{}, nil)
}

func (c *gatewayClient) restart(ctx context.Context, id string) error {
	return c.do(ctx, "POST", "/api/kernels/"+url.PathEscape(id)+"/restart", struct{}{}, nil)
}

func (c *gatewayClient) delete(ctx context.Context, id string) error {
	err := c.do(ctx, "DELETE", "/api/kernels/"+url.PathEscape(id), nil, nil)
	if isStatus(err, 404) {
		return nil // already gone
	}
	return err
}

// wsURL is the kernel's channels endpoint, ws:// or wss://.
func (c *gatewayClient) wsURL(id, session string) string {
	u := c.base
	switch {
	case strings.HasPrefix(u, "https://"):
		u = "wss://" + strings.TrimPrefix(u, "https://")
	case strings.HasPrefix(u, "http://"):
		u = "ws://" + strings.TrimPrefix(u, "http://")
	}
	return u + "/api/kernels/" + url.PathEscape(id) + "/channels?session_id=" + url.QueryEscape(session)
}
