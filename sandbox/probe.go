package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Status is what [Probe] found.
type Status struct {
	Available bool
	Path      string // the bwrap binary
	Reason    string // why it is not available; "" when it is
}

var probed struct {
	once sync.Once
	st   Status
}

// Probe reports whether bubblewrap can sandbox processes here, by running it with the flag
// set [Spec.Args] uses on `true`. It runs once per process; later calls return the first
// answer. Installed is not enough: user namespaces may be disabled
// (kernel.unprivileged_userns_clone=0, an AppArmor policy) or a container may refuse the
// mounts ("bwrap: Failed to make / slave").
func Probe(ctx context.Context) Status {
	probed.once.Do(func() { probed.st = probe(ctx) })
	return probed.st
}

func probe(ctx context.Context) Status {
	path, err := exec.LookPath("bwrap")
	if err != nil {
		return Status{Reason: "bubblewrap (bwrap) is not installed: install it with `sudo apt-get install bubblewrap` (or your distribution's bubblewrap package)"}
	}
	dir, err := os.MkdirTemp("", "arbor-sandbox-probe-")
	if err != nil {
		return Status{Path: path, Reason: fmt.Sprintf("sandbox probe: %v", err)}
	}
	defer os.RemoveAll(dir)
	args, err := Spec{Dir: dir, Home: os.Getenv("HOME")}.Args()
	if err != nil {
		return Status{Path: path, Reason: err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, append(append(args, "--"), "true")...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if len(msg) > 500 {
			msg = msg[:500]
		}
		if msg == "" {
			msg = err.Error()
		}
		return Status{Path: path, Reason: "bubblewrap cannot sandbox here: " + msg}
	}
	return Status{Available: true, Path: path}
}

// ChildPID reads bwrap's --info-fd output (JSON with "child-pid") and returns that pid: the
// host pid of the sandbox's pid 1. r is read to its end or until the JSON object is complete.
func ChildPID(info []byte) (int, error) {
	var v struct {
		ChildPID int `json:"child-pid"`
	}
	if err := json.Unmarshal(info, &v); err != nil {
		return 0, fmt.Errorf("bwrap info: %w", err)
	}
	if v.ChildPID <= 0 {
		return 0, fmt.Errorf("bwrap info has no child-pid: %q", info)
	}
	return v.ChildPID, nil
}

// CommandPID returns the host pid of the command bwrap runs under its pid-1 init childPID (the
// init's only child). With --unshare-pid the command's own getpid() is a pid of the sandbox's
// namespace, which means another process outside it: signals must go to this one.
func CommandPID(childPID int) (int, error) {
	p := fmt.Sprintf("/proc/%d/task/%d/children", childPID, childPID)
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, fmt.Errorf("sandboxed command pid: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, errors.New("sandboxed command pid: the sandbox's init has no child")
	}
	return strconv.Atoi(f[0])
}
