package kernel

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// connInfo is a Jupyter connection file.
type connInfo struct {
	ShellPort       int    `json:"shell_port"`
	IOPubPort       int    `json:"iopub_port"`
	StdinPort       int    `json:"stdin_port"`
	ControlPort     int    `json:"control_port"`
	HBPort          int    `json:"hb_port"`
	IP              string `json:"ip"`
	Key             string `json:"key"`
	Transport       string `json:"transport"`
	SignatureScheme string `json:"signature_scheme"`
	KernelName      string `json:"kernel_name"`

	// shortDir is a private 0700 directory under the temp dir holding the sockets when the
	// state directory's path is too long for sun_path; removed with the sockets.
	shortDir string
}

func (c connInfo) endpoint(port int) string {
	if c.Transport == "ipc" {
		return fmt.Sprintf("ipc://%s-%d", c.IP, port)
	}
	return fmt.Sprintf("tcp://%s:%d", c.IP, port)
}

// maxIPCPath leaves room for "-N" under the 108-byte sun_path limit.
const maxIPCPath = 100

// newConnInfo chooses endpoints for one kernel launch. Unix sockets inside the 0700 state
// directory need no free-port search (no race with other processes, no TCP exposure); paths too
// long for sun_path fall back to loopback TCP on ports the OS just handed out.
func newConnInfo(dir, tag string) (connInfo, error) {
	c := connInfo{Key: newID() + newID(), SignatureScheme: "hmac-sha256"}
	base := filepath.Join(dir, "zmq-"+tag)
	if len(base)+3 > maxIPCPath {
		// Deep repositories give long state paths: keep the sockets in a short private
		// directory instead of falling back to TCP, which a sandboxed kernel without a network
		// cannot reach and which other local users could.
		if short, err := os.MkdirTemp("", "arbor-zmq-"); err == nil {
			c.shortDir, base = short, filepath.Join(short, tag)
		}
	}
	if len(base)+3 <= maxIPCPath {
		c.Transport, c.IP = "ipc", base
		c.ShellPort, c.IOPubPort, c.StdinPort, c.ControlPort, c.HBPort = 1, 2, 3, 4, 5
		return c, nil
	}
	c.Transport, c.IP = "tcp", "127.0.0.1"
	ports := make([]int, 5)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return c, fmt.Errorf("choose kernel port: %w", err)
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	c.ShellPort, c.IOPubPort, c.StdinPort, c.ControlPort, c.HBPort = ports[0], ports[1], ports[2], ports[3], ports[4]
	return c, nil
}

// write stores the connection file with mode 0600: it holds the HMAC key.
func (c connInfo) write(path string) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("encode connection file: %w", err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("write connection file: %w", err)
	}
	return nil
}

// removeIPC deletes the Unix socket files of a finished kernel.
func (c connInfo) removeIPC() {
	if c.Transport != "ipc" {
		return
	}
	for _, p := range []int{c.ShellPort, c.IOPubPort, c.StdinPort, c.ControlPort, c.HBPort} {
		os.Remove(fmt.Sprintf("%s-%d", c.IP, p))
	}
	if c.shortDir != "" {
		os.Remove(c.shortDir)
	}
}
