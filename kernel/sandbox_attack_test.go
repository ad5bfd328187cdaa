package kernel

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// attackRepo is a repository under /tmp laid out as Arbor lays it out: this session's worktree
// and kernel dir under .git/arbor, and another session's beside them.
type attackRepo struct {
	root, wt, state, otherWT, otherState string
}

func newAttackRepo(t *testing.T) attackRepo {
	t.Helper()
	root := filepath.Join(t.TempDir(), "repo")
	r := attackRepo{
		root:       root,
		wt:         filepath.Join(root, ".git/arbor/worktrees/me"),
		state:      filepath.Join(root, ".git/arbor/sessions/me/kernel"),
		otherWT:    filepath.Join(root, ".git/arbor/worktrees/other"),
		otherState: filepath.Join(root, ".git/arbor/sessions/other/kernel"),
	}
	gitRun := func(dir string, args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	os.MkdirAll(root, 0o755)
	os.WriteFile(filepath.Join(root, "main.py"), []byte("MAIN_TREE\n"), 0o644)
	gitRun(root, "init", "-q", "-b", "main")
	gitRun(root, "-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
	gitRun(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first commit")
	gitRun(root, "worktree", "add", "-q", "-b", "arbor/me", r.wt)
	for _, d := range []string{r.state, r.otherWT, r.otherState} {
		os.MkdirAll(d, 0o700)
	}
	os.WriteFile(filepath.Join(r.otherWT, "theirs.txt"), []byte("OTHER_WT"), 0o644)
	os.WriteFile(filepath.Join(r.otherState, "snap"), []byte("OTHER_STATE"), 0o600)
	os.WriteFile(filepath.Join(root, ".git/arbor/sessions/me/events.jsonl"), []byte("LOG"), 0o600)
	return r
}

// sandboxOptions are the options agents gives a session's kernel in r.
func (r attackRepo) options(sockDir string) Options {
	return Options{
		Dir: r.wt, StateDir: r.state, Sandbox: "bwrap",
		SandboxHide:     []string{r.root, filepath.Join(r.root, ".git/arbor"), sockDir},
		SandboxReadOnly: []string{filepath.Join(r.root, ".git")},
	}
}

// Every escape tried from a sandboxed cell, each printing OPEN when it got through.
func TestSandboxAttacks(t *testing.T) {
	testBwrap(t)
	scratch := scratchName()
	r := newAttackRepo(t)
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	os.WriteFile(filepath.Join(home, ".ssh/id_rsa"), []byte("PRIVATE KEY"), 0o600)
	os.WriteFile(filepath.Join(home, "notes.txt"), []byte("HOME_FILE"), 0o600)
	os.MkdirAll(filepath.Join(home, ".config/tool"), 0o755)
	os.WriteFile(filepath.Join(home, ".config/tool/rc"), []byte("ALLOWED"), 0o644)
	t.Setenv("HOME", home)
	// The runtime dir and a socket dir elsewhere, outside /tmp (the sandbox's /tmp is its own).
	runtimeDir, err := os.MkdirTemp("/var/tmp", "arbor-attack-run-")
	if err != nil {
		t.Fatal(err)
	}
	sockDir, err := os.MkdirTemp("/var/tmp", "arbor-attack-sock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(runtimeDir); os.RemoveAll(sockDir) })
	t.Setenv("XDG_RUNTIME_DIR", runtimeDir)
	os.Mkdir(filepath.Join(runtimeDir, "arbor"), 0o700)
	for _, p := range []string{filepath.Join(runtimeDir, "arbor", "arbor.sock"), filepath.Join(sockDir, "arbor.sock")} {
		l, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tcp.Close() })
	hostNet, _ := os.Readlink("/proc/self/ns/net")

	o := r.options(sockDir)
	o.SandboxHome = []string{".config/tool"}
	k := startKernel(t, o)
	mustOK(t, k, `import os, socket, subprocess
def attempt(f):
    try:
        r = f()
    except Exception as e:
        print("BLOCKED", type(e).__name__, e)
        return
    print("OPEN", repr(r)[:200])
def read(p):
    return open(p).read()
def write(p):
    return open(p, "w").write("x")
def connect_unix(p):
    s = socket.socket(socket.AF_UNIX)
    s.connect(p)
    return p
def sh(cmd):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    if r.returncode != 0:
        raise OSError(r.returncode, (r.stdout + r.stderr).strip()[:200])
    return r.stdout`)
	pyq := strconv.Quote
	attacks := []struct{ name, code string }{
		{"read ~/.ssh", "attempt(lambda: read(" + pyq(filepath.Join(home, ".ssh/id_rsa")) + "))"},
		{"read $HOME", "attempt(lambda: read(" + pyq(filepath.Join(home, "notes.txt")) + "))"},
		{"write $HOME on the host", "write(" + pyq(filepath.Join(home, "planted")) + "); attempt(lambda: 1/0)"},
		{"read the main tree", "attempt(lambda: read(" + pyq(filepath.Join(r.root, "main.py")) + "))"},
		{"write the main tree", "attempt(lambda: write(" + pyq(filepath.Join(r.root, "planted.py")) + "))"},
		{"write the git dir", "attempt(lambda: write(" + pyq(filepath.Join(r.root, ".git/hooks/pre-commit")) + "))"},
		{"another session's worktree", "attempt(lambda: read(" + pyq(filepath.Join(r.otherWT, "theirs.txt")) + "))"},
		{"another session's kernel dir", "attempt(lambda: read(" + pyq(filepath.Join(r.otherState, "snap")) + "))"},
		{"this session's event log", "attempt(lambda: read(" + pyq(filepath.Join(r.root, ".git/arbor/sessions/me/events.jsonl")) + "))"},
		{"the runtime dir's control socket", "attempt(lambda: connect_unix(" + pyq(filepath.Join(runtimeDir, "arbor", "arbor.sock")) + "))"},
		{"the daemon's socket dir", "attempt(lambda: connect_unix(" + pyq(filepath.Join(sockDir, "arbor.sock")) + "))"},
		{"the daemon's environ", "attempt(lambda: read('/proc/" + itoa(os.Getpid()) + "/environ'))"},
		{"host pid 1", "attempt(lambda: 'bwrap' in read('/proc/1/cmdline') and 1/0)"},
		{"remount / read-write", "attempt(lambda: sh('mount -o remount,rw /'))"},
		{"write /", "attempt(lambda: write('/planted'))"},
		{"capabilities", "attempt(lambda: [l for l in read('/proc/self/status').splitlines() if l.startswith('CapEff')][0].endswith('0000000000000000') and 1/0)"},
		{"join the host network namespace", "attempt(lambda: sh('nsenter -t 1 -n true'))"},
		{"the host network namespace", "attempt(lambda: os.readlink('/proc/1/ns/net') != " + pyq(hostNet) + " and 1/0)"},
		{"loopback TCP to the host", "attempt(lambda: socket.create_connection(('127.0.0.1', " + itoa(tcp.Addr().(*net.TCPAddr).Port) + "), timeout=2))"},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			res := run(t, k, a.code)
			// The probes of a property raise when it holds (x and 1/0): BLOCKED is the pass.
			if !strings.Contains(res.Text, "BLOCKED") {
				t.Errorf("%s got through: %s %s", a.name, res.Status, res.Text)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(home, "planted")); err == nil {
		t.Error("a cell wrote the host's $HOME")
	}
	for _, p := range []string{filepath.Join(r.root, "planted.py"), "/planted"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("a cell wrote %s", p)
		}
	}
	t.Run("what it may use", func(t *testing.T) {
		for _, c := range []struct{ code, want string }{
			{"print(read(" + pyq(filepath.Join(home, ".config/tool/rc")) + "))", "ALLOWED"},
			{"print(sh('git status --short --branch'))", "## arbor/me"},
			{"print(sh('git log --oneline'))", "first commit"},
			{"print(sh('git grep -l MAIN_TREE'))", "main.py"},
			{"write('in_worktree.txt'); print(sorted(os.listdir('.')))", "in_worktree.txt"},
			{"write('/tmp/" + scratch + "'); print(os.listdir('/tmp'))", scratch},
			{"print(os.environ['XDG_CACHE_HOME'])", filepath.Join(r.state, "cache")},
			{"print(os.path.isdir(" + pyq(filepath.Join(r.root, ".git/objects")) + "))", "True"},
		} {
			if res := run(t, k, c.code); res.Status != StatusOK || !strings.Contains(res.Text, c.want) {
				t.Errorf("%s → %s %q, want %q", c.code, res.Status, res.Text, c.want)
			}
		}
	})
	if _, err := os.Stat(filepath.Join(r.state, "tmp", scratch)); err != nil {
		t.Errorf("/tmp inside is not the session's own tmp dir: %v", err)
	}
	if _, err := os.Stat("/tmp/" + scratch); err == nil {
		t.Error("sandboxed /tmp is the host's")
	}
}

// The same attacks from a daemon running as an ordinary user: when the suite runs as root, it
// runs TestSandboxAttacks again as nobody (a copy of this test binary, since go test's build
// dir is private), so both ways are tried.
func TestSandboxAttacksAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already not root: TestSandboxAttacks ran as this user")
	}
	testBwrap(t)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		missing(t, "no setpriv (util-linux) to run the attacks as another user: %v", err)
	}
	dir, err := os.MkdirTemp("", "arbor-asuser-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o777)
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "kernel.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
		bin, "-test.run=^TestSandboxAttacks$", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "TMPDIR="+dir, "ARBOR_REQUIRE_KERNEL=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestSandboxAttacks") {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
}

// scratchName is a file name for a sandboxed cell to write in its /tmp that the host's /tmp
// does not have, so finding it there means the sandbox's /tmp is the host's.
func scratchName() string {
	return fmt.Sprintf("arbor-scratch-%d-%d", os.Getpid(), time.Now().UnixNano())
}
