package kernel

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/arborhq/arbor/sandbox"
)

// busyCell starts what a cell could leave running: a shell loop that forks a subshell for
// every line it appends (so a freeze meets forks under way), and a thread of the kernel
// itself appending to another file.
const busyCell = `
import subprocess, threading
subprocess.Popen(['/bin/sh', '-c', 'while :; do (echo x >> forks.txt); done'])
def spin():
    while True:
        with open('thread.txt', 'a') as f:
            f.write('x\n')
threading.Thread(target=spin, daemon=True).start()
`

func lines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

// waitAdvance waits until the file at path has more lines than n: the loop writing it runs.
func waitAdvance(t *testing.T, path string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for lines(t, path) <= n {
		if time.Now().After(deadline) {
			t.Fatalf("%s stayed at %d lines for 30 s: its loop does not run", filepath.Base(path), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// While a sandboxed kernel is frozen, nothing of its sandbox runs — neither the kernel's own
// threads nor what its cells started, however they fork — and after thaw it all runs again.
// Both mechanisms: the budget's cgroup, and SIGSTOP to the pid namespace where there is none.
func TestFreezeStopsTheSandbox(t *testing.T) {
	testBwrap(t)
	for _, tc := range []struct {
		name   string
		limits sandbox.Limits
	}{
		{"cgroup", sandbox.Limits{}},
		{"signals", sandbox.Limits{Processes: -1, Memory: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wt := t.TempDir()
			k := startKernel(t, Options{Dir: wt, Sandbox: "bwrap", Limits: tc.limits})
			p := k.current()
			if tc.name == "cgroup" && p.budget.Freezer() == "" {
				t.Skipf("no cgroup here can freeze a kernel (%s)", sandbox.DetectBudget())
			}
			if tc.name == "signals" && p.budget.Freezer() != "" {
				t.Fatalf("a kernel without a budget has a freezer cgroup %s", p.budget.Freezer())
			}
			mustOK(t, k, busyCell)
			files := []string{filepath.Join(wt, "forks.txt"), filepath.Join(wt, "thread.txt")}
			for i := range 3 {
				for _, f := range files {
					waitAdvance(t, f, lines(t, f))
				}
				thaw, err := k.Freeze(t.Context())
				if err != nil {
					t.Fatalf("freeze %d: %v", i, err)
				}
				var before []int
				for _, f := range files {
					before = append(before, lines(t, f))
				}
				time.Sleep(300 * time.Millisecond)
				for j, f := range files {
					if n := lines(t, f); n != before[j] {
						t.Errorf("freeze %d: %s grew from %d to %d lines while the sandbox was frozen", i, filepath.Base(f), before[j], n)
					}
				}
				thaw()
				thaw() // a second thaw does nothing
			}
			mustOK(t, k, "print(1+1)")
		})
	}
}
