// Package jupytertest runs a real Jupyter Server (Debian's python3-jupyter-server) for tests and
// benchmarks of Arbor's gateway kernels: on loopback, on a free port, with token auth, its
// state in a temp dir. Call [Start] in a test ([Launch] elsewhere, then [Server.Close]);
// [Server.Stop] and [Server.Restart] take it down and bring it back on the same address and
// token mid-test, as a cluster's gateway going away would.
//
//	s := jupytertest.Start(t)
//	// s.URL is "http://127.0.0.1:PORT", s.Token the token; kernel name "python3"
//
// Without jupyter_server the test is skipped, or fails when ARBOR_REQUIRE_KERNEL=1.
package jupytertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// TB is what Start needs of a test: testing.TB's methods, named here so the package does not
// import testing — kernelbench, and through it the arbor binary, links this package.
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Skip(args ...any)
	TempDir() string
	Cleanup(func())
}

// Python is the interpreter that runs the server and, through the kernel spec the server is
// given, its kernels: Debian's, which has jupyter_server and ipykernel (the first python3 on
// PATH may be a toolchain build without them).
var Python = "/usr/bin/python3"

// KernelName is the kernel spec the server offers (besides the system's own).
const KernelName = "python3"

// Server is one running jupyter server.
type Server struct {
	URL   string // http://127.0.0.1:PORT
	Token string
	Dir   string // root_dir and the server's private Jupyter dirs

	t      TB   // nil when launched outside a test
	ownDir bool // Dir was made by Launch: Close removes it
	port   int
	log    string

	// life is held through a whole start, stop or kill: a Restart racing a Stop still in
	// progress would find the old server answering on the port, then lose it.
	life sync.Mutex
	mu   sync.Mutex
	cmd  *exec.Cmd
	die  chan struct{} // closed when cmd has exited
}

// Available reports why no server can run here ("" when one can).
func Available() string {
	if err := exec.Command(Python, "-c", "import jupyter_server, ipykernel").Run(); err != nil {
		return fmt.Sprintf("%s cannot import jupyter_server and ipykernel (%v): run scripts/deps.sh (apt python3-jupyter-server)", Python, err)
	}
	return ""
}

// Start starts a server and stops it when the test ends.
func Start(t TB) *Server {
	t.Helper()
	if why := Available(); why != "" {
		if os.Getenv("ARBOR_REQUIRE_KERNEL") == "1" {
			t.Fatalf("jupyter server unavailable: %s; required because ARBOR_REQUIRE_KERNEL=1", why)
		}
		t.Skip(why)
	}
	s, err := launchIn(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s.t = t
	t.Cleanup(s.Stop)
	return s
}

// Launch starts a server outside a test (a benchmark); Close stops it and removes its files.
func Launch() (*Server, error) {
	if why := Available(); why != "" {
		return nil, errors.New(why)
	}
	dir, err := os.MkdirTemp("", "arbor-jupyter-")
	if err != nil {
		return nil, err
	}
	s, err := launchIn(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s.ownDir = true
	return s, nil
}

// Close stops the server and, after Launch, removes its directory.
func (s *Server) Close() {
	s.Stop()
	if s.ownDir {
		os.RemoveAll(s.Dir)
	}
}

func launchIn(dir string) (*Server, error) {
	var b [16]byte
	rand.Read(b[:])
	s := &Server{Token: hex.EncodeToString(b[:]), Dir: dir, log: filepath.Join(dir, "server.log")}
	spec := filepath.Join(dir, "share", "jupyter", "kernels", KernelName)
	if err := os.MkdirAll(spec, 0o700); err != nil {
		return nil, err
	}
	js := fmt.Sprintf(`{"argv": [%q, "-m", "ipykernel_launcher", "-f", "{connection_file}"], "display_name": "Python 3 (Arbor tests)", "language": "python"}`, Python)
	if err := os.WriteFile(filepath.Join(spec, "kernel.json"), []byte(js), 0o600); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s.port = port
	s.URL = "http://127.0.0.1:" + strconv.Itoa(port)
	if err := s.start(); err != nil {
		return nil, err
	}
	return s, nil
}

// Port is the server's TCP port.
func (s *Server) Port() int { return s.port }

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) start() error {
	s.life.Lock()
	defer s.life.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("jupytertest: server already running")
	}
	logf, err := os.OpenFile(s.log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(Python, "-m", "jupyter_server",
		"--ServerApp.ip=127.0.0.1",
		"--ServerApp.port="+strconv.Itoa(s.port),
		"--ServerApp.port_retries=0",
		"--ServerApp.token="+s.Token,
		"--ServerApp.password=",
		"--ServerApp.open_browser=False",
		"--ServerApp.allow_root=True",
		"--ServerApp.root_dir="+s.Dir,
		"--ServerApp.shutdown_no_activity_timeout=0",
		"--MappingKernelManager.cull_idle_timeout=0",
	)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(),
		"JUPYTER_PATH="+filepath.Join(s.Dir, "share", "jupyter"),
		"JUPYTER_CONFIG_DIR="+filepath.Join(s.Dir, "config"),
		"JUPYTER_DATA_DIR="+filepath.Join(s.Dir, "data"),
		"JUPYTER_RUNTIME_DIR="+filepath.Join(s.Dir, "runtime"),
		"JUPYTER_PLATFORM_DIRS=1",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, so Kill takes its kernels too; Pdeathsig, so a crashed test
	// leaves no server behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("jupytertest: start %s -m jupyter_server: %w", Python, err)
	}
	die := make(chan struct{})
	go func() { cmd.Wait(); close(die) }()
	s.cmd, s.die = cmd, die
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", s.URL+"/api/status", nil)
		req.Header.Set("Authorization", "token "+s.Token)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		select {
		case <-die:
			s.cmd = nil
			out, _ := os.ReadFile(s.log)
			return fmt.Errorf("jupytertest: jupyter server exited during start:\n%s", out)
		case <-ctx.Done():
			return fmt.Errorf("jupytertest: jupyter server did not answer on %s within 60 s", s.URL)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop stops the server as its operator would (SIGTERM: it shuts its kernels down), then kills
// what is left of its process group. It is a no-op when the server is not running.
func (s *Server) Stop() {
	s.life.Lock()
	defer s.life.Unlock()
	s.mu.Lock()
	cmd, die := s.cmd, s.die
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-die:
	case <-time.After(10 * time.Second):
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-die
}

// Kill kills the server and its kernels at once (SIGKILL to its process group), as a crashed
// node would.
func (s *Server) Kill() {
	s.life.Lock()
	defer s.life.Unlock()
	s.mu.Lock()
	cmd, die := s.cmd, s.die
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-die
}

// Restart starts the server again on the same address and token (after Stop or Kill); in a
// test a failure fails it, else it panics.
func (s *Server) Restart() {
	if err := s.start(); err != nil {
		if s.t == nil {
			panic(err)
		}
		s.t.Helper()
		s.t.Fatal(err)
	}
}

// Log returns what the server has written so far (for failure messages).
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.log)
	return string(b)
}
