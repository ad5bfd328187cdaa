package main

// The trust boundary, attacked end to end: a model-written cell, run by the real daemon the way
// `arbor run` runs it, tries every escape of the list and prints what it got. Each
// scenario runs as root and, when the tests run as root, as a throwaway user too, with the
// sandbox on (the default) and off (the user's opt-out).

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arborhq/arbor/sandbox"
)

// attackCell tries each escape and prints one JSON line: name → "blocked: …" or "OPEN: …".
// "git" is the opposite: the model's own worktree must stay usable.
const attackCell = `
import hashlib, json, os, socket, subprocess
r = {}
def is_key(v):
    return hashlib.sha256(v).hexdigest() == KEY_SHA256
def attempt(name, fn):
    try:
        r[name] = 'OPEN: ' + repr(fn())[:300]
    except BaseException as e:
        r[name] = 'blocked: ' + type(e).__name__ + ': ' + str(e)[:300]
def control():
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    s.connect(SOCK)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "arbor/sessions", "params": {}})
    s.sendall(("Content-Length: %d\r\n\r\n%s" % (len(body), body)).encode())
    data = s.recv(65536)
    if not data:
        raise ConnectionError('closed without an answer')
    return data
attempt('control_socket', control)
def environs():
    hits = []
    for pid in os.listdir('/proc'):
        if pid.isdigit():
            try:
                for kv in open('/proc/%s/environ' % pid, 'rb').read().split(b'\0'):
                    if is_key(kv.partition(b'=')[2]):
                        hits.append(pid)
            except OSError:
                pass
    if not hits:
        raise PermissionError('no readable environ holds the key')
    return hits
attempt('key_in_proc_environ', environs)
def key_env():
    hits = [k for k, v in os.environ.items() if is_key(v.encode())]
    if not hits:
        raise KeyError('not in os.environ')
    return hits
attempt('key_in_kernel_env', key_env)
attempt('ssh_key', lambda: open(os.path.join(HOMEDIR, '.ssh', 'id_rsa')).read())
def private_files():
    got = {}
    for p in ('/etc/shadow', '/etc/gshadow'):
        if os.path.exists(p):
            b = open(p).read()
            if b:
                got[p] = b[:40]
    if os.path.isdir('/etc/ssl/private') and os.listdir('/etc/ssl/private'):
        got['/etc/ssl/private'] = os.listdir('/etc/ssl/private')
    if not got:
        raise PermissionError('what only root may read under /etc is absent')
    return got
attempt('host_private_files', private_files)
attempt('main_tree_read', lambda: open(os.path.join(REPO, 'README.md')).read())
def write_main():
    with open(os.path.join(REPO, 'PWNED'), 'w') as f:
        f.write('x')
    return 'wrote'
attempt('main_tree_write', write_main)
attempt('other_worktrees', lambda: [d for d in os.listdir(os.path.join(REPO, '.git', 'arbor', 'worktrees')) if os.path.join(REPO, '.git', 'arbor', 'worktrees', d) != os.getcwd()] or (_ for _ in ()).throw(FileNotFoundError('only my own')))
def run(argv):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    if p.returncode:
        raise PermissionError((p.stderr or p.stdout).strip()[:200] or 'exit %d' % p.returncode)
    return p.stdout[:100] or 'exit 0'
attempt('remount_rw', lambda: run(['mount', '-o', 'remount,rw', '/']))
attempt('join_host_netns', lambda: run(['nsenter', '-t', '1', '-n', 'true']))
def caps():
    for line in open('/proc/self/status'):
        if line.startswith('CapEff'):
            v = int(line.split()[1], 16)
            if v:
                return hex(v)
    raise PermissionError('CapEff is 0')
attempt('capabilities', caps)
attempt('loopback_tcp', lambda: socket.create_connection(('127.0.0.1', PORT), timeout=3) and 'connected')
try:
    r['git'] = 'works: ' + run(['git', 'log', '--oneline', '-1'])
except BaseException as e:
    r['git'] = 'broken: ' + str(e)
print('ATTACK ' + json.dumps(r))
`

// attackWorld is one daemon's world for the attack, run as a throwaway user when env.cred is set.
type attackWorld struct{ *env }

func newAttackWorld(t *testing.T, as *osUser, sandboxMode, secret string, port int) *attackWorld {
	t.Helper()
	e := newEnv(t)
	w := &attackWorld{env: e}
	home := e.vars["HOME"]
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	writeFile(t, filepath.Join(home, ".ssh", "id_rsa"), "-----BEGIN OPENSSH PRIVATE KEY----- victim\n")
	// The cell knows the key only by its hash, so the key in the log could only come from
	// what the cell found.
	sum := sha256.Sum256([]byte(secret))
	code := fmt.Sprintf("SOCK, KEY_SHA256, HOMEDIR, REPO, PORT = %q, %q, %q, %q, %d\n", e.sock, hex.EncodeToString(sum[:]), home, e.repo, port) + attackCell
	script, _ := json.Marshal(map[string]any{
		"rules": []map[string]any{
			{"when": map[string]any{"task": "^attack", "turn": 1}, "code": code},
			{"when": map[string]any{"task": "^attack", "turn": 2}, "text": "done"},
			{"when": map[string]any{"task": "^neighbour"}, "text": "here"},
		},
		"default": map[string]any{"text": "ok"},
	})
	path := filepath.Join(e.root, "attack.json")
	writeFile(t, path, string(script))
	fm, url, err := startFakeModel(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fm.Process.Kill(); fm.Wait() })
	e.vars["ARBOR_MODEL_BASE_URL"] = url
	// The daemon holds a key in its environment, under a name no credential pattern matches.
	e.vars["ARBOR_API_KEY_ENV"] = "OPENAI_KEY"
	e.vars["OPENAI_KEY"] = secret
	if sandboxMode != "" {
		os.MkdirAll(filepath.Join(e.vars["XDG_CONFIG_HOME"], "arbor"), 0o700)
		writeFile(t, filepath.Join(e.vars["XDG_CONFIG_HOME"], "arbor", "config.json"), fmt.Sprintf(`{"sandbox": %q}`, sandboxMode))
	}
	if as != nil {
		uid, gid := as.uid, as.gid
		e.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
		e.vars["USER"], e.vars["LOGNAME"] = as.name, as.name
		for _, d := range []string{e.root, e.sockDir} {
			chownTree(t, d, uid, gid)
			// Its parents (t.TempDir's) are root's 0700: the user must be able to pass through.
			for p := filepath.Dir(d); p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
				os.Chmod(p, 0o711)
			}
		}
		os.Chmod(filepath.Dir(arborBin), 0o755)
	}
	return w
}

func chownTree(t *testing.T, dir string, uid, gid int) {
	t.Helper()
	filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			os.Lchown(p, uid, gid)
		}
		return nil
	})
}

// stop stops the world's daemon as its user (the shared cleanup then finds nothing left).
func (w *attackWorld) stop() {
	if w.cred != nil {
		w.arbor("daemon", "stop")
	}
}

// attack runs the attack session and returns what each attempt got.
func (w *attackWorld) attack() (map[string]string, result) {
	w.t.Helper()
	// Only the daemon holds the key: it starts with it, the commands after it run without, so
	// a hit in some process's environ can only be the daemon's.
	if r := w.arbor("ls"); r.code != 0 {
		w.t.Fatalf("start the daemon:\n%s", r)
	}
	secret := w.vars["OPENAI_KEY"]
	w.vars["OPENAI_KEY"] = ""
	defer func() { w.vars["OPENAI_KEY"] = secret }()
	nb := w.arbor("run", "neighbour session")
	if nb.code != 0 {
		w.t.Fatalf("neighbour session:\n%s", nb)
	}
	r := w.arbor("run", "attack the daemon")
	if r.code != 0 {
		w.t.Fatalf("attack session:\n%s", r)
	}
	id := sessionID(w.t, r)
	logr := w.arbor("log", "--json", id)
	for _, ev := range parseEvents(w.t, logr) {
		if ev.Type != "tool_finished" {
			continue
		}
		var d struct{ Output string }
		json.Unmarshal(ev.Data, &d)
		if _, js, ok := strings.Cut(d.Output, "ATTACK "); ok {
			js, _, _ = strings.Cut(js, "\n")
			out := map[string]string{}
			if err := json.Unmarshal([]byte(js), &out); err != nil {
				w.t.Fatalf("attack report %q: %v", js, err)
			}
			if strings.Contains(logr.stdout, secret) {
				w.t.Errorf("the key reached the session's event log")
			}
			return out, r
		}
		w.t.Fatalf("the attack cell printed no report: %s", d.Output)
	}
	w.t.Fatalf("no attack cell in the log:\n%s", logr.stdout)
	return nil, r
}

func loopbackServer(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestAttacksFromModelCode(t *testing.T) {
	probe := sandbox.Probe(t.Context())
	sandboxed := []string{"control_socket", "key_in_proc_environ", "key_in_kernel_env", "ssh_key",
		"host_private_files", "main_tree_read", "main_tree_write", "other_worktrees", "remount_rw", "join_host_netns",
		"capabilities", "loopback_tcp"}
	// Without the sandbox the cell has the user's own rights over files; what still holds is
	// that it cannot drive Arbor, and that no key is handed to it.
	unsandboxed := []string{"control_socket", "key_in_kernel_env"}
	for _, tc := range []struct {
		name    string
		mode    string
		asUser  bool
		blocked []string
	}{
		{"root/sandbox-default", "", false, sandboxed},
		{"user/sandbox-default", "", true, sandboxed},
		{"root/sandbox-off", "off", false, unsandboxed},
		// A non-dumpable daemon keeps its environ from the user's other processes.
		{"user/sandbox-off", "off", true, append(unsandboxed, "key_in_proc_environ")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.mode == "" && !probe.Available {
				t.Skipf("bubblewrap cannot sandbox here: %s", probe.Reason)
			}
			var as *osUser
			if tc.asUser {
				u := throwawayUser(t) // skips unless root: the tests then run unprivileged already
				as = &u
			}
			secret := fmt.Sprintf("sk-attack-%d", time.Now().UnixNano())
			w := newAttackWorld(t, as, tc.mode, secret, loopbackServer(t))
			defer w.stop()
			got, run := w.attack()
			for _, name := range tc.blocked {
				if v, ok := got[name]; !ok || !strings.HasPrefix(v, "blocked") {
					t.Errorf("%s: %s", name, v)
				}
			}
			if !strings.HasPrefix(got["git"], "works") {
				t.Errorf("git in the session's own worktree: %s", got["git"])
			}
			if _, err := os.Stat(filepath.Join(w.repo, "PWNED")); tc.mode == "" && err == nil {
				t.Error("the sandboxed cell wrote into the user's tree")
			}
			if tc.mode == "off" && !strings.Contains(run.stderr+run.stdout, "sandbox") {
				t.Errorf("arbor run with the sandbox off gave no warning:\n%s", run)
			}
			t.Logf("%s: %v", tc.name, got)
		})
	}
}
