package main

// The sandbox's filesystem, attacked end to end by a cell run by the real daemon: reaching
// another workspace's kernel (its connection file and sockets), sharing /var/tmp with the host,
// and rebinding its own scratch to a host directory by replacing it with a symlink and killing
// its kernel. The attacking sessions work in repositories under /tmp, $HOME and /var/tmp (beside
// their victim, which lies there too); as root and as a throwaway user.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/arborhq/arbor/sandbox"
)

// fsAttackCell runs in the attacker's first cell; it ends by killing its own kernel.
const fsAttackCell = `
import glob, json, os, signal, socket, sys, time
r = {}
def attempt(name, fn):
    try:
        r[name] = 'OPEN: ' + repr(fn())[:300]
    except BaseException as e:
        r[name] = 'blocked: ' + type(e).__name__ + ': ' + str(e)[:200]
conns = []
for pat in (VICTIM + '/.git/arbor/sessions/*/kernel/kernel-*.json', RUNROOT + '/*/kernel-*.json', '/tmp/arbor-*/kernels/*/kernel-*.json'):
    conns += glob.glob(pat)
def steal():
    keys = [p for p in conns if '"key"' in open(p).read()]
    if not keys:
        raise FileNotFoundError('no connection file of another kernel in sight')
    return keys
attempt('other_connection_file', steal)
def connect():
    got = []
    for c in conns:
        for s in glob.glob(os.path.join(os.path.dirname(c), '*')):
            if s.endswith('.sock') or '/zmq-' in s:
                k = socket.socket(socket.AF_UNIX)
                try:
                    k.connect(s)
                    got.append(s)
                except OSError:
                    pass
    if not got:
        raise ConnectionError('no socket of another kernel reachable')
    return got
attempt('other_kernel_sockets', connect)
attempt('var_tmp_read', lambda: open(VARFILE).read())
def var_write():
    open(VARMARK, 'w').write('x')
    return 'wrote'
attempt('var_tmp_write', var_write)
state = os.path.dirname(os.environ['ARBOR_SKILLS'])
def rebind():
    done = []
    for d in ('tmp', 'cache', 'snapshot'):
        p = os.path.join(state, d)
        try:
            os.rename(p, p + '.old')
            os.symlink(HOMEVICTIM, p)
            done.append(d)
        except OSError:
            pass
    if not done:
        raise PermissionError('state dir entries cannot be replaced')
    return done
attempt('replace_state_dirs', rebind)
print('FSATTACK ' + json.dumps(r))
sys.stdout.flush()
time.sleep(0.5)  # the report reaches the daemon before the kernel goes
os.kill(os.getpid(), signal.SIGKILL)
`

// fsAfterRestart runs in the attacker's second cell, in the kernel started after the first
// killed its own.
const fsAfterRestart = `
import json, os
r = {}
state = os.path.dirname(os.environ['ARBOR_SKILLS'])
seen = []
for p in ['/tmp/secret'] + [os.path.join(state, d, 'secret') for d in ('tmp', 'cache', 'snapshot')]:
    try:
        seen.append(open(p).read())
    except OSError:
        pass
for p in ['/tmp/pwned'] + [os.path.join(state, d, 'pwned') for d in ('cache', 'snapshot')]:
    try:
        open(p, 'w').write('x')
    except OSError:
        pass
r['host_dir_after_restart'] = ('OPEN: ' + repr(seen)) if seen else 'blocked: nothing of the host dir in sight'
print('FSAFTER ' + json.dumps(r))
`

func TestFilesystemAttacksFromModelCode(t *testing.T) {
	if st := sandbox.Probe(t.Context()); !st.Available {
		t.Skipf("bubblewrap cannot sandbox here: %s", st.Reason)
	}
	for _, asUser := range []bool{false, true} {
		name := map[bool]string{false: "root", true: "user"}[asUser]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var as *osUser
			if asUser {
				u := throwawayUser(t)
				as = &u
			}
			fsAttackWorld(t, as)
		})
	}
}

func fsAttackWorld(t *testing.T, as *osUser) {
	e := newEnv(t)
	home := e.vars["HOME"]
	// This world's runtime dir, so its kernels' run dirs are found there.
	runRoot := e.vars["XDG_RUNTIME_DIR"]
	os.MkdirAll(runRoot, 0o700)
	varDir, err := os.MkdirTemp("/var/tmp", "arbor-fs-attack-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(varDir) })
	os.Chmod(varDir, 0o755)
	victim := filepath.Join(varDir, "victim")
	homeRepo := filepath.Join(home, "src", "attacker")
	varRepo := filepath.Join(varDir, "attacker")
	for _, r := range []string{victim, homeRepo, varRepo} {
		os.MkdirAll(r, 0o755)
		e.git(r, "init", "-q", "-b", "main")
		e.git(r, "config", "user.name", testUserName)
		e.git(r, "config", "user.email", testUserEmail)
		writeFile(t, filepath.Join(r, "README.md"), "# "+filepath.Base(r)+"\n")
		e.git(r, "add", ".")
		e.git(r, "commit", "-q", "-m", "initial")
	}
	varFile := filepath.Join(varDir, "host-only.txt")
	writeFile(t, varFile, "VAR_TMP_HOST")
	varMark := filepath.Join("/var/tmp", filepath.Base(varDir)+"-from-sandbox")
	t.Cleanup(func() { os.Remove(varMark) })
	homeVictim := filepath.Join(home, "victim")
	os.MkdirAll(homeVictim, 0o755)
	writeFile(t, filepath.Join(homeVictim, "secret"), "HOME_SECRET")

	consts := fmt.Sprintf("VICTIM, RUNROOT, VARFILE, VARMARK, HOMEVICTIM = %q, %q, %q, %q, %q\n", victim, runRoot, varFile, varMark, homeVictim)
	script, _ := json.Marshal(map[string]any{
		"rules": []map[string]any{
			{"when": map[string]any{"task": "^victim", "turn": 1}, "code": "V = 1\nprint('victim up')"},
			{"when": map[string]any{"task": "^victim"}, "text": "done"},
			{"when": map[string]any{"task": "^attack", "turn": 1}, "code": consts + fsAttackCell},
			{"when": map[string]any{"task": "^attack", "turn": 2}, "code": fsAfterRestart},
			{"when": map[string]any{"task": "^attack"}, "text": "done"},
		},
		"default": map[string]any{"text": "ok"},
	})
	path := filepath.Join(e.root, "fsattack.json")
	writeFile(t, path, string(script))
	fm, url, err := startFakeModel(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fm.Process.Kill(); fm.Wait() })
	e.vars["ARBOR_MODEL_BASE_URL"] = url
	if as != nil {
		e.cred = &syscall.Credential{Uid: uint32(as.uid), Gid: uint32(as.gid), Groups: []uint32{}}
		e.vars["USER"], e.vars["LOGNAME"] = as.name, as.name
		for _, d := range []string{e.root, e.sockDir, varDir} {
			chownTree(t, d, as.uid, as.gid)
			for p := filepath.Dir(d); p != "/" && p != os.TempDir() && p != "/var/tmp"; p = filepath.Dir(p) {
				os.Chmod(p, 0o711)
			}
		}
		os.Chmod(filepath.Dir(arborBin), 0o755)
		defer e.arbor("daemon", "stop")
	}
	if r := e.arborIn(victim, "run", "victim session"); r.code != 0 {
		t.Fatalf("victim session:\n%s", r)
	}
	// The victim's kernel stays up: the attack has a target.
	live, _ := filepath.Glob(filepath.Join(runRoot, "arbor-kernels", "*", "kernel-*.json"))
	old, _ := filepath.Glob(filepath.Join(victim, ".git/arbor/sessions/*/kernel/kernel-*.json"))
	if len(live)+len(old) == 0 {
		t.Fatalf("the victim's kernel left no connection file to attack")
	}
	for _, repo := range []string{e.repo, homeRepo, varRepo} { // under /tmp, $HOME and /var/tmp
		where := strings.TrimPrefix(repo, filepath.Dir(e.root))
		r := e.arborIn(repo, "run", "attack the neighbours")
		if r.code != 0 {
			t.Fatalf("attack from %s:\n%s", where, r)
		}
		got := map[string]string{}
		for _, ev := range parseEvents(t, e.arborIn(repo, "log", "--json", sessionID(t, r))) {
			var d struct{ Output string }
			json.Unmarshal(ev.Data, &d)
			for _, tag := range []string{"FSATTACK ", "FSAFTER "} {
				if _, js, ok := strings.Cut(d.Output, tag); ok && ev.Type == "tool_finished" {
					js, _, _ = strings.Cut(js, "\n")
					json.Unmarshal([]byte(js), &got)
				}
			}
		}
		t.Logf("from %s: %v", where, got)
		for _, name := range []string{"other_connection_file", "other_kernel_sockets", "var_tmp_read", "replace_state_dirs", "host_dir_after_restart"} {
			if v, ok := got[name]; !ok || !strings.HasPrefix(v, "blocked") {
				t.Errorf("from %s: %s: %q", where, name, v)
			}
		}
		if v := got["var_tmp_write"]; !strings.HasPrefix(v, "OPEN") {
			t.Errorf("from %s: the sandbox has no /var/tmp of its own: %s", where, v)
		}
		if _, err := os.Stat(varMark); err == nil {
			t.Errorf("from %s: a write to /var/tmp inside the sandbox landed on the host's", where)
		}
		if _, err := os.Stat(filepath.Join(homeVictim, "pwned")); err == nil {
			t.Errorf("from %s: the restarted kernel wrote into the host directory", where)
		}
	}
}
