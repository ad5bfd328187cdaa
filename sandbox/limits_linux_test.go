package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A killed daemon's cgroups, and what still runs in them, are removed by the next detection;
// a live daemon's are left alone.
func TestCleanLeftovers(t *testing.T) {
	b := DetectBudget()
	if b.Pids != MechCgroup1 && b.Pids != MechCgroup2 {
		t.Skipf("no pids cgroup here: %s", b)
	}
	parent := filepath.Dir(b.pidsParent)
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(parent, ownName(gone.Process.Pid))
	kid := filepath.Join(dead, "k-left")
	if err := os.MkdirAll(kid, 0o755); err != nil {
		t.Fatal(err)
	}
	sleeper := exec.Command("/bin/sh", "-c", joinScript, "sh", filepath.Join(kid, "cgroup.procs"), "--", "sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- sleeper.Wait() }()
	live := filepath.Join(b.pidsParent, "k-live")
	if err := os.Mkdir(live, 0o755); err != nil {
		t.Fatal(err)
	}
	defer removeCgroup(live, time.Second)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(filepath.Join(kid, "cgroup.procs")); len(b) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sleeper never joined its cgroup")
		}
	}
	cleanLeftovers(parent)
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the dead daemon's cgroup %s is still there (%v)", dead, err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		sleeper.Process.Kill()
		t.Error("the process left in the dead daemon's cgroup was not killed")
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("this daemon's own cgroup was removed: %v", err)
	}
}

// A command put under a group by Apply — bwrap, as the worktree setup command runs — cannot
// fork past the group's task budget: under this machine's mechanism, and under RLIMIT_NPROC
// in the sandbox's user namespace for an unprivileged user.
func TestApplyBoundsForks(t *testing.T) {
	st := Probe(t.Context())
	if !st.Available {
		t.Skipf("bubblewrap cannot sandbox here: %s", st.Reason)
	}
	prlimit, _ := exec.LookPath("prlimit")
	for _, c := range []struct {
		name string
		b    *Budget
		uid  int // -1: the test's own
	}{
		{"detected", DetectBudget(), -1},
		{"rlimit as nobody", &Budget{Pids: MechRlimit, prlimit: prlimit}, 65534},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.b.Pids == MechNone || c.b.Pids == MechRlimit && prlimit == "" {
				t.Skipf("no process limit here: %s", c.b)
			}
			if c.uid >= 0 && os.Getuid() != 0 {
				t.Skip("running as another user needs root")
			}
			g, err := c.b.NewGroup("k-apply-test", Limits{Processes: 64, Memory: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Remove()
			dir, err := os.MkdirTemp("", "arbor-apply-")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(dir)
			os.Chmod(dir, 0o755)
			args, err := Spec{Dir: dir}.Args()
			if err != nil {
				t.Fatal(err)
			}
			// Children sleep 2 s and exit: bounded even without the budget.
			script := "import os, time\nn = 0\ntry:\n    while n < 1000:\n        if os.fork() == 0:\n            time.sleep(2)\n            os._exit(0)\n        n += 1\nexcept OSError:\n    pass\nprint('FORKS', n)\n"
			cmd := exec.Command(st.Path, append(append(args, "--"), "/usr/bin/python3", "-c", script)...)
			if c.uid >= 0 {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(c.uid), Gid: uint32(c.uid), Groups: []uint32{}}}
			}
			g.Apply(cmd)
			out, err := cmd.CombinedOutput()
			t.Logf("%s: %s", c.b, out)
			var n int
			if i := bytes.Index(out, []byte("FORKS")); i >= 0 {
				fmt.Sscanf(string(out[i:]), "FORKS %d", &n)
			}
			if err != nil || n <= 0 || n >= 64 {
				t.Errorf("a command under a budget of 64 tasks started %d children (%v)", n, err)
			}
		})
	}
}
