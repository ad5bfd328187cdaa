package kernel

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReapUnder: a process left by a dead parent that runs a kernel runtime under an owned
// directory is killed; one under another directory, a user's process that only names a file in
// the owned one, and our own child, are left alone.
func TestReapUnder(t *testing.T) {
	t.Parallel()
	owned, other := filepath.Join(t.TempDir(), "s1", "kernel"), filepath.Join(t.TempDir(), "s2", "kernel")
	orphan := func(arg string) int {
		// sh starts it in the background and exits: its parent is gone, as a killed
		// daemon's kernel's is.
		out, err := exec.Command("sh", "-c", `setsid /usr/bin/python3 -c 'import time; time.sleep(60)' `+arg+` >/dev/null 2>&1 & echo $!`).Output()
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
		return pid
	}
	_ = os.MkdirAll(owned, 0o700)
	mine := orphan(owned + "/runtime/arbor_kernel.py")
	theirs := orphan(other + "/runtime/arbor_kernel.py")
	pager := orphan(owned + "/kernel.log")
	child := exec.Command("/usr/bin/python3", "-c", "import time; time.sleep(60)", owned+"/runtime/arbor_kernel.py")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { child.Process.Kill(); child.Wait() }()
	time.Sleep(300 * time.Millisecond) // the execs

	killed, err := ReapUnder([]string{owned})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(killed, mine) || slices.Contains(killed, theirs) || slices.Contains(killed, pager) || slices.Contains(killed, child.Process.Pid) {
		t.Fatalf("killed %v; want %d (owned) only, not %d (another dir), %d (a user's process) or %d (our child)", killed, mine, theirs, pager, child.Process.Pid)
	}
	alive := func(pid int) bool {
		st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		return err == nil && !strings.Contains(string(st), ") Z ")
	}
	deadline := time.Now().Add(5 * time.Second)
	for alive(mine) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if alive(mine) {
		t.Errorf("the orphan %d is still alive", mine)
	}
	if syscall.Kill(theirs, 0) != nil {
		t.Errorf("the process of another directory was killed")
	}
}
