package kernel

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arborhq/arbor/sandbox"
)

// forkLoop forks children that sleep 3 s and exit, until a fork fails or 3,000 have started,
// prints how many did and fails with the fork's error: a fork bomb that cannot outlive the
// test.
const forkLoop = `
import os, time
n, err = 0, None
try:
    while n < 3000:
        pid = os.fork()
        if pid == 0:
            time.sleep(3)
            os._exit(0)
        n += 1
except OSError as e:
    err = e
print("FORKS", n)
if err:
    raise err
`

// nsProcs counts the processes in pid's pid namespace: the sandbox's, whatever the budget.
func nsProcs(t *testing.T, pid int) int {
	t.Helper()
	ns, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	if err != nil {
		t.Fatalf("pid namespace of %d: %v", pid, err)
	}
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if l, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err == nil && l == ns {
			n++
		}
	}
	return n
}

// A cell that forks until it cannot is stopped at the kernel's process budget; the cell is told
// which setting to raise, the kernel keeps answering, and the forks are gone once they exit.
func TestBudgetForkBomb(t *testing.T) {
	testBwrap(t)
	b := sandbox.DetectBudget()
	t.Logf("budget here: %s", b)
	if b.Pids == sandbox.MechNone {
		t.Skipf("no process limit can be enforced here: %s", b.Reason)
	}
	const limit = 128
	k := startKernel(t, Options{Sandbox: "bwrap", Limits: sandbox.Limits{Processes: limit}})
	p := k.current()
	base := nsProcs(t, p.sigPID)
	res := run(t, k, forkLoop)
	t.Logf("cell: %s\nnotice: %s", res.Text, res.Notice)
	f := strings.Fields(res.Text[strings.Index(res.Text, "FORKS"):])
	n, _ := strconv.Atoi(f[1])
	if n <= 0 || n >= limit {
		t.Fatalf("a cell with a budget of %d tasks forked %d children (want fewer than %d)", limit, n, limit)
	}
	if !strings.Contains(res.Notice, "process limit") || !strings.Contains(res.Notice, sandbox.SettingProcesses) {
		t.Errorf("the notice does not say the process limit stopped the forks, naming %s: %q", sandbox.SettingProcesses, res.Notice)
	}
	mustOK(t, k, "print(1+1)")
	// The children exit after 3 s and stay zombies until the kernel reaps them, holding their
	// share of the budget (and of the host's pids) until then: what a user's cell would do.
	mustOK(t, k, "import os\ntry:\n    while True: os.waitpid(-1, 0)\nexcept ChildProcessError: pass")
	deadline := time.Now().Add(30 * time.Second)
	for nsProcs(t, p.sigPID) > base {
		if time.Now().After(deadline) {
			t.Fatalf("%d processes in the sandbox 30 s after the forks' children should have exited; %d before", nsProcs(t, p.sigPID), base)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if p.budget != nil && len(cgroupDirs(p)) > 0 {
		k.Close(t.Context())
		for _, d := range cgroupDirs(p) {
			if _, err := os.Stat(d); err == nil {
				t.Errorf("cgroup %s is left after the kernel closed", d)
			}
		}
	}
}

// cgroupDirs lists the kernel process's own cgroups (arbor.<ns>.<pid>/k-<tag>), from /proc.
func cgroupDirs(p *proc) []string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/cgroup")
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) == 3 && strings.Contains(f[2], "/arbor.") && strings.Contains(f[2], "/k-") {
			ctrl := f[1]
			if ctrl == "" {
				out = append(out, filepath.Join("/sys/fs/cgroup", f[2]))
				continue
			}
			out = append(out, filepath.Join("/sys/fs/cgroup", ctrl, f[2]))
		}
	}
	return out
}

// A cell that allocates past the kernel's memory budget is killed by it, and the death notice
// says so, naming the setting; the next cell gets a new kernel.
func TestBudgetMemory(t *testing.T) {
	testBwrap(t)
	b := sandbox.DetectBudget()
	if b.Memory != sandbox.MechCgroup1 && b.Memory != sandbox.MechCgroup2 {
		t.Skipf("no memory cgroup here: %s", b.String())
	}
	k := startKernel(t, Options{Sandbox: "bwrap", Revive: true, Limits: sandbox.Limits{Memory: 256 << 20}})
	res := run(t, k, "x = b'x' * (600 << 20)\nprint('ALLOCATED', len(x))")
	t.Logf("cell %s: %s\nnotice: %s", res.Status, res.Text, res.Notice)
	if res.Status != StatusDied || strings.Contains(res.Text, "ALLOCATED") {
		t.Fatalf("a cell allocating 600MiB under a 256MiB budget: status %s, %q (want the kernel killed)", res.Status, res.Text)
	}
	if !strings.Contains(res.Notice, "memory limit of 256MiB") || !strings.Contains(res.Notice, sandbox.SettingMemory) {
		t.Errorf("the death notice does not name the memory limit and %s: %q", sandbox.SettingMemory, res.Notice)
	}
	mustOK(t, k, "print(1+1)")
}
