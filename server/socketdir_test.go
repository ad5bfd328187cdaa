package server

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func modeOf(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// The socket directory is created 0700; a directory of ours others may enter is tightened;
// a symlink (even to a directory of ours), a file, and (as root) a directory of another user
// are refused, naming the path and the owner, and nothing is changed through them.
func TestPrepareSocketDir(t *testing.T) {
	base := t.TempDir()

	fresh := filepath.Join(base, "fresh", "arbor")
	if err := prepareSocketDir(fresh, true); err != nil || modeOf(t, fresh) != 0o700 {
		t.Errorf("fresh: %v, mode %v; want created 0700", err, modeOf(t, fresh))
	}
	if err := prepareSocketDir(filepath.Join(base, "missing"), false); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing without create: %v, want not-exist", err)
	}

	loose := filepath.Join(base, "loose")
	os.Mkdir(loose, 0o755)
	os.Chmod(loose, 0o777)
	if err := prepareSocketDir(loose, false); err != nil || modeOf(t, loose) != 0o700 {
		t.Errorf("loose: %v, mode %v; want tightened to 0700", err, modeOf(t, loose))
	}

	victim := filepath.Join(base, "victim")
	os.Mkdir(victim, 0o755)
	os.Chmod(victim, 0o755)
	link := filepath.Join(base, "link")
	os.Symlink(victim, link)
	for _, create := range []bool{false, true} {
		err := prepareSocketDir(link, create)
		var unsafe *UnsafeSocketDirError
		if !errors.As(err, &unsafe) || !strings.Contains(err.Error(), link) || !strings.Contains(err.Error(), "symlink to "+victim) {
			t.Errorf("symlink (create %v): %v; want a refusal naming %s and its target", create, err, link)
		}
	}
	if m := modeOf(t, victim); m != 0o755 {
		t.Errorf("the symlink's target was changed to %v", m)
	}

	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o600)
	if err := prepareSocketDir(file, true); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("file: %v; want refused as not a directory", err)
	}

	if os.Getuid() != 0 {
		t.Log("not root: the foreign-owner case needs chown")
		return
	}
	theirs := filepath.Join(base, "theirs")
	os.Mkdir(theirs, 0o755)
	os.Chmod(theirs, 0o777)
	os.Chown(theirs, 65534, 65534)
	err := prepareSocketDir(theirs, true)
	if err == nil || !strings.Contains(err.Error(), theirs) || !strings.Contains(err.Error(), "uid 65534") {
		t.Errorf("another user's dir: %v; want a refusal naming %s and uid 65534", err, theirs)
	}
	if m := modeOf(t, theirs); m != 0o777 {
		t.Errorf("another user's dir was changed to %v", m)
	}
}

// A socket in the user's directory served by another user's process (planted while the
// directory was open to others) is refused after connecting, naming the owner; the client
// starts no daemon of its own over it.
func TestDialRefusesAForeignDaemon(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to listen as another user")
	}
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skip("no /usr/bin/python3 to play the other user")
	}
	base, err := os.MkdirTemp("", "ab")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)
	os.Chmod(base, 0o777)
	sock := filepath.Join(base, "arbor.sock")
	ready := filepath.Join(base, "ready")
	cmd := exec.Command(python, "-c", `
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o777)
s.listen(8)
open(sys.argv[2], "w").close()
while True:
    c, _ = s.accept()
    c.sendall(b"Content-Length: 2\r\n\r\n{}")
`, sock, ready)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	for deadline := time.Now().Add(hangGuard); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the other user's listener did not start")
		}
	}
	for _, auto := range []bool{false, true} {
		nc, err := Dial(context.Background(), DialOptions{Socket: sock, Autostart: auto, Exe: "/bin/false"})
		var foreign *ForeignDaemonError
		if !errors.As(err, &foreign) || foreign.UID != 65534 || !strings.Contains(err.Error(), sock) {
			t.Errorf("autostart %v: Dial = %v, %v; want refused naming %s and uid 65534", auto, nc, err, sock)
		}
	}
}
