package server

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// checkAncestry refuses the daemon's descendants (here: a child, and a child
// whose command name holds the characters /proc/<pid>/stat is parsed around), and lets
// through processes that merely share the uid.
func TestCheckAncestry(t *testing.T) {
	// A binary named like a hostile comm: "x) S 1 (" would fool a parser splitting at the
	// first ')'.
	dir := t.TempDir()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	odd := filepath.Join(dir, "x) S 1 (")
	copyFile(t, sleep, odd)
	var kids []*exec.Cmd
	for _, bin := range []string{sleep, odd} {
		cmd := exec.Command(bin, "30")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		kids = append(kids, cmd)
	}
	self := os.Getpid()
	for _, k := range kids {
		if err := checkAncestry(k.Process.Pid, self); !errors.Is(err, errDescendant) {
			t.Errorf("child %s: checkAncestry = %v, want errDescendant", k.Path, err)
		}
		st, err := readStat(k.Process.Pid)
		if err != nil || st.ppid != self {
			t.Errorf("readStat(%s) = %+v, %v; want ppid %d", k.Path, st, err, self)
		}
	}
	if err := checkAncestry(self, self); err != nil {
		t.Errorf("the daemon's own process (only its own code connects from there): %v", err)
	}
	// Our parent (the go tool, a shell) does not descend from us.
	if err := checkAncestry(self, kids[0].Process.Pid); err != nil {
		t.Errorf("an unrelated process of the same uid is refused: %v", err)
	}
	// A peer that is gone cannot be checked, so it is refused.
	gone := exec.Command(sleep, "0")
	gone.Run()
	if err := checkAncestry(gone.Process.Pid, self); err == nil {
		t.Errorf("a peer that exited is accepted")
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	out.Close()
}
