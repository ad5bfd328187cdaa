package main

// The control socket is the user's, not the model's: a cell (and whatever it forks) is
// refused, while the user's CLI goes on working.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// userConfig writes e's user config ($XDG_CONFIG_HOME/arbor/config.json).
func (e *env) userConfig(t *testing.T, body string) {
	t.Helper()
	dir := filepath.Join(e.vars["XDG_CONFIG_HOME"], "arbor")
	os.MkdirAll(dir, 0o700)
	writeFile(t, filepath.Join(dir, "config.json"), body)
}

// Sandboxed (the default where bubblewrap works), the socket is not there at all: its
// directory is hidden, and the grandchild's parent is the sandbox's own init.
func TestSandboxedCellCannotSeeTheDaemon(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	e := newEnv(t)
	writeFile(t, filepath.Join(e.repo, "sockpath.txt"), e.sock+"\n")
	e.git(e.repo, "add", "sockpath.txt")
	e.git(e.repo, "commit", "-q", "-m", "socket path")
	r := e.mustArbor("run", "probe the daemon socket")
	for _, want := range []string{"direct: connect failed: FileNotFoundError", "grandchild: ppid 1: connect failed: FileNotFoundError"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("want %q:\n%s", want, r)
		}
	}
}

// Unsandboxed ("sandbox": "off"), the socket is reachable and the daemon refuses the peer
// because it descends from a kernel.
func TestCellCannotDriveTheDaemon(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.userConfig(t, `{"sandbox":"off"}`)
	// The cell learns the socket from a file in the repository, as model-written code could
	// learn it from anywhere.
	writeFile(t, filepath.Join(e.repo, "sockpath.txt"), e.sock+"\n")
	e.git(e.repo, "add", "sockpath.txt")
	e.git(e.repo, "commit", "-q", "-m", "socket path")

	r := e.mustArbor("run", "probe the daemon socket")
	id := sessionID(t, r)
	pid := e.daemonPID()
	if !regexp.MustCompile(`direct: closed after 0 bytes`).MatchString(r.stdout) {
		t.Errorf("the cell's own connection was not refused without an answer:\n%s", r)
	}
	// The grandchild double-forked and left the session: reparented to the daemon (its
	// subreaper), not to init, so the ancestry check still sees it.
	want := fmt.Sprintf(`grandchild: ppid %d: closed after 0 bytes`, pid)
	if !strings.Contains(r.stdout, want) {
		t.Errorf("want %q (reparented to the daemon, refused):\n%s", want, r)
	}
	// The user's CLI still works, and sees the session.
	if s := e.session(id); s.ID != id {
		t.Errorf("arbor ls lost the session: %+v", s)
	}
	// The refusals are in the daemon's log.
	log, _ := os.ReadFile(filepath.Join(e.vars["ARBOR_STATE_DIR"], "daemon.log"))
	if n := strings.Count(string(log), "started by the arbor daemon"); n < 2 {
		t.Errorf("the daemon log names %d refusals, want 2:\n%s", n, tail(string(log), 3000))
	}
	// The orphan the daemon adopted is reaped, not left a zombie for the daemon's lifetime.
	eventually(t, "the adopted orphan is reaped", func() bool { return len(zombieChildren(pid)) == 0 })
}

// zombieChildren lists pid's children that are zombies.
func zombieChildren(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		child, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(st)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) >= 2 && f[0] == "Z" && f[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// The daemon's environment (which holds the model's API key) is unreadable to the user's
// other processes, a kernel among them: the daemon is not dumpable. Root may read any
// process, so as root the daemon runs as a throwaway user and the reader is another process
// of that user.
func TestDaemonEnvironIsUnreadable(t *testing.T) {
	t.Parallel()
	as := func(name string, args ...string) *exec.Cmd { return exec.Command(name, args...) }
	dir := t.TempDir()
	bin := arborBin
	if os.Getuid() == 0 {
		u := throwawayUser(t)
		as = u.command
		dir = u.ownedDir(t)
		bin = u.copyBinary(t, dir)
	}
	const canary = "ARBOR_TEST_CANARY=the-key-is-here"
	env := []string{"HOME=" + filepath.Join(dir, "home"), "PATH=" + os.Getenv("PATH"),
		"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"), "XDG_RUNTIME_DIR=" + filepath.Join(dir, "run"),
		"ARBOR_KERNEL_PYTHON=/usr/bin/python3", canary}
	sock := filepath.Join(dir, "s", "arbor.sock")
	daemon := as(bin, "daemon", "--socket", sock, "--state-dir", filepath.Join(dir, "state"), "--idle-timeout", "0")
	daemon.Env = env
	var out strings.Builder
	daemon.Stdout, daemon.Stderr = &out, &out
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- daemon.Wait() }()
	defer func() {
		daemon.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			daemon.Process.Kill()
			<-done
			t.Errorf("the daemon did not exit on SIGTERM:\n%s", out.String())
		}
	}()
	eventually(t, "the daemon listens", func() bool {
		_, err := os.Stat(sock)
		return err == nil || daemon.ProcessState != nil
	})

	// A dumpable process of the same user, with the same variable: readable, so the reader can
	// read what is not protected.
	sleeper := as("sleep", "60")
	sleeper.Env = env
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	// The reader opens mem (reading it at offset 0 fails anyway) and prints environ.
	read := func(pid int) (string, error) {
		cmd := as("/usr/bin/python3", "-c", `import sys
open("/proc/%s/mem" % sys.argv[1], "rb").close()
sys.stdout.write(open("/proc/%s/environ" % sys.argv[1]).read())`, strconv.Itoa(pid))
		got, err := cmd.CombinedOutput()
		return string(got), err
	}
	if got, err := read(sleeper.Process.Pid); err != nil || !strings.Contains(got, canary) {
		t.Fatalf("control: reading a dumpable process's mem and environ as its user: %v %q", err, got)
	}
	if got, err := read(daemon.Process.Pid); err == nil || strings.Contains(got, canary) || !strings.Contains(got, "PermissionError") {
		t.Errorf("/proc/<daemon>/mem or environ is readable by another process of its user: %v %q", err, got)
	}
}
