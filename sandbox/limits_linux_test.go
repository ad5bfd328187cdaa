package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
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
