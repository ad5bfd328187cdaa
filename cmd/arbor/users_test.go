package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// osUser is a throwaway local account: tests that need a second user (an attacker sharing
// /tmp, or a daemon that must not be root) make one and delete it afterwards.
type osUser struct {
	name     string
	uid, gid int
}

// throwawayUser creates a user with no home directory, or skips the test saying why not.
func throwawayUser(t *testing.T) osUser {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("creating a throwaway user needs root")
	}
	useradd, err := exec.LookPath("useradd")
	if err != nil {
		t.Skip("creating a throwaway user needs useradd, which is not installed")
	}
	name := fmt.Sprintf("arbor-test-%06d", rand.IntN(1_000_000))
	var out []byte
	for try := 0; ; try++ {
		// Parallel tests contend for the lock on /etc/passwd; useradd then fails at once.
		out, err = exec.Command(useradd, "-M", "-s", "/bin/sh", name).CombinedOutput()
		if err == nil || try == 50 {
			break
		}
		time.Sleep(time.Duration(50+rand.IntN(100)) * time.Millisecond)
	}
	if err != nil {
		t.Skipf("useradd %s: %v\n%s", name, err, out)
	}
	t.Cleanup(func() {
		for try := 0; try < 50; try++ {
			if exec.Command("userdel", name).Run() == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("userdel %s failed", name)
	})
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return osUser{name: name, uid: uid, gid: gid}
}

// command runs name as u, with no supplementary groups.
func (u osUser) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{
		Uid: uint32(u.uid), Gid: uint32(u.gid), Groups: []uint32{}}}
	return cmd
}

// ownedDir makes a fresh directory owned by u, mode 0700.
func (u osUser) ownedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "abu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, u.uid, u.gid); err != nil {
		t.Fatal(err)
	}
	return dir
}

// copyBinary copies the binary under test into dir (owned by u), so u can run it: the build
// directory is private to the test's own user.
func (u osUser) copyBinary(t *testing.T, dir string) string {
	t.Helper()
	src, err := os.Open(arborBin)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst := filepath.Join(dir, "arbor")
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, src); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	os.Chown(dst, u.uid, u.gid)
	return dst
}
