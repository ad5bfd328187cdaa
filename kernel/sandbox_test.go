package kernel

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestSandboxBwrap(t *testing.T) {
	testBwrap(t)
	scratch := scratchName() // a name no file in the host's /tmp has
	// Outside the private /tmp, in the host's shared /var/tmp, which the sandbox does not see.
	outside, err := os.MkdirTemp("/var/tmp", "arbor-sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	wt := t.TempDir()
	k := startKernel(t, Options{Dir: wt, Sandbox: "bwrap", Host: &recordingHost{}})
	tests := []struct {
		name, code string
		status     string
		want       string
	}{
		{"write in worktree", "open('inside.txt', 'w').write('ok')", "ok", "2"},
		{"write outside", "open(" + pyQuote(filepath.Join(outside, "escape.txt")) + ", 'w').write('x')", "error", "No such file or directory"},
		{"write system", "open('/etc/arbor-escape', 'w').write('x')", "error", "Read-only file system"},
		{"write home", "import os\nopen(os.path.expanduser('~/arbor-escape'), 'w').write('x')", "ok", "1"}, // scratch: see below
		{"private tmp", "import os\nopen('/tmp/" + scratch + "', 'w').write('x')\nos.listdir('/tmp')", "ok", scratch},
		{"no network", "import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=2)", "error", "OSError"},
		{"bridge works", "await arbor_ping('sandboxed')", "ok", "sandboxed"},
	}
	// Signals go to the kernel's host pid, not bwrap's and not the pid it sees inside.
	if p := k.current(); p.sigPID == 0 || p.sigPID == k.PID() {
		t.Errorf("sandboxed kernel pid %d (bwrap %d)", p.sigPID, k.PID())
	} else if b, _ := os.ReadFile("/proc/" + itoa(p.sigPID) + "/cmdline"); !strings.Contains(string(b), "arbor_kernel.py") {
		t.Errorf("signal target %d runs %q, want the kernel", p.sigPID, b)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, k, tc.code)
			if res.Status != tc.status || !strings.Contains(res.Text, tc.want) {
				t.Errorf("%s → %s %q, want %s containing %q", tc.code, res.Status, res.Text, tc.status, tc.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(wt, "inside.txt")); err != nil {
		t.Errorf("write in the worktree did not land: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "escape.txt")); err == nil {
		t.Error("sandboxed cell wrote outside its worktree")
	}
	if _, err := os.Stat("/tmp/" + scratch); err == nil {
		t.Error("sandboxed /tmp is the host's")
	}
	if home, err := os.UserHomeDir(); err == nil {
		if _, err := os.Stat(filepath.Join(home, "arbor-escape")); err == nil {
			os.Remove(filepath.Join(home, "arbor-escape"))
			t.Error("a sandboxed write to $HOME reached the host's")
		}
	}
}

func TestSandboxMissingBwrap(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, _, err := sandboxArgv(Options{Dir: "/", StateDir: "/tmp"}, "python", []string{"python"}, nil)
	if err == nil || !strings.Contains(err.Error(), "bubblewrap") {
		t.Fatalf("err = %v, want one naming bubblewrap", err)
	}
}

func pyQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "\\'") + "'" }

// SIGINT reaches the kernel inside the sandbox, not bwrap: the kernel survives Interrupt's
// fallback signal and the cell stops.
func TestSandboxSignal(t *testing.T) {
	testBwrap(t)
	snap, err := os.MkdirTemp("/var/tmp", "arbor-sandbox-snap-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(snap) })
	k := startKernel(t, Options{Sandbox: "bwrap", Snapshot: snap})
	mustOK(t, k, "x = 1")
	if _, err := k.Snapshot(t.Context(), snap); err != nil {
		t.Fatalf("snapshot from inside the sandbox: %v", err)
	}
	done := make(chan *Result, 1)
	go func() {
		res, _ := k.Execute(t.Context(), "import time\ntime.sleep(60)", ExecOptions{})
		done <- res
	}()
	for {
		if err := k.current().signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		select {
		case res := <-done:
			if res.Error == nil || res.Error.Name != "KeyboardInterrupt" {
				t.Fatalf("result %s %q", res.Status, res.Text)
			}
			if r := mustOK(t, k, "x"); r.Text != "1\n" {
				t.Fatalf("after SIGINT: %q", r.Text)
			}
			return
		case <-time.After(300 * time.Millisecond):
		}
	}
}
