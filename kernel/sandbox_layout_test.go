package kernel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A cell that replaces its kernel's tmp, cache or snapshot with a symlink to a host directory
// and kills its kernel must not find that directory mounted in the next kernel: the state dir
// is read-only inside (its writable parts are mount points, which cannot be renamed), and the
// next sandbox opens them beneath it by descriptor without following a link.
func TestSandboxStateCannotBeRebound(t *testing.T) {
	testBwrap(t)
	victim := t.TempDir() // stands for $HOME: invisible to the sandbox (under the host's /tmp)
	os.WriteFile(filepath.Join(victim, "secret"), []byte("HOST_SECRET"), 0o600)
	state := filepath.Join(t.TempDir(), "kernel")
	snap := filepath.Join(state, "snapshot")
	k := startKernel(t, Options{Sandbox: "bwrap", StateDir: state, Snapshot: snap, Revive: true})
	attack := `import os
out = []
for d in ("tmp", "cache", "snapshot"):
    p = os.path.join(%[1]s, d)
    try:
        os.rename(p, p + ".old")
        os.symlink(%[2]s, p)
        out.append(d + " replaced")
    except OSError as e:
        out.append(d + " " + type(e).__name__)
print(out)`
	res := mustOK(t, k, strings.ReplaceAll(strings.ReplaceAll(attack, "%[1]s", pyQuote(state)), "%[2]s", pyQuote(victim)))
	t.Logf("attack: %s", strings.TrimSpace(res.Text))
	if strings.Contains(res.Text, "replaced") {
		t.Errorf("a cell renamed its kernel's state: %s", res.Text)
	}
	// Kill the kernel: the next cell revives it with a sandbox built from the state dir.
	run(t, k, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
	probe := `import os
seen = []
for p in ("/tmp/secret", %[1]s + "/tmp/secret", %[1]s + "/cache/secret", %[1]s + "/snapshot/secret"):
    try:
        seen.append(open(p).read())
    except OSError:
        pass
for p in ("/tmp/pwned", %[1]s + "/snapshot/pwned", %[1]s + "/cache/pwned"):
    try:
        open(p, "w").write("x")
    except OSError:
        pass
print("seen", seen)`
	res = run(t, k, strings.ReplaceAll(probe, "%[1]s", pyQuote(state)))
	t.Logf("after the restart: %s", strings.TrimSpace(res.Text))
	if strings.Contains(res.Text, "HOST_SECRET") {
		t.Errorf("the revived kernel reads the host directory: %s", res.Text)
	}
	if _, err := os.Stat(filepath.Join(victim, "pwned")); err == nil {
		t.Errorf("the revived kernel wrote into the host directory")
	}
}

// A state dir whose tmp, cache, snapshot or runtime someone replaced with a symlink is refused
// at start, never followed into a mount or written through.
func TestSandboxRefusesPlantedStateLinks(t *testing.T) {
	testBwrap(t)
	for _, d := range []string{"tmp", "cache", "snapshot", "runtime"} {
		t.Run(d, func(t *testing.T) {
			victim := t.TempDir()
			state := t.TempDir()
			os.Symlink(victim, filepath.Join(state, d))
			k, err := Start(t.Context(), Options{Python: testPython(t), Dir: t.TempDir(), StateDir: state,
				Snapshot: filepath.Join(state, "snapshot"), Sandbox: "bwrap"})
			if err == nil {
				k.Close(t.Context())
				t.Fatalf("a kernel started with %s a symlink to %s", d, victim)
			}
			if !strings.Contains(err.Error(), "refused") {
				t.Errorf("err = %v, want a refusal naming the link", err)
			}
			if ents, _ := os.ReadDir(victim); len(ents) != 0 {
				t.Errorf("the start wrote %v into the link's target", ents)
			}
		})
	}
}

// Another kernel's connection file (its HMAC key) and sockets are in a run dir of its own,
// outside every sandbox: a sandboxed cell can neither read the one nor connect to the others.
func TestSandboxOtherKernelsUnreachable(t *testing.T) {
	testBwrap(t)
	// State dirs outside the host's /tmp (which every sandbox replaces anyway), as a
	// repository's are.
	shared := func() string {
		d, err := os.MkdirTemp("/var/tmp", "arbor-kernel-state-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	a := startKernel(t, Options{Sandbox: "bwrap", StateDir: shared(), Host: &recordingHost{}})
	b := startKernel(t, Options{Sandbox: "bwrap", StateDir: shared(), Host: &recordingHost{}})
	pa := a.current()
	code := `import socket, os
got = []
try:
    got.append(open(%s).read())
except OSError as e:
    got.append("conn " + type(e).__name__)
for p in (%s, %s):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(p)
        got.append("CONNECTED " + p)
    except OSError as e:
        got.append("sock " + type(e).__name__)
print(got)`
	res := mustOK(t, b, "import os\n"+sprintf(code, pyQuote(pa.connPath), pyQuote(pa.conn.IP+"-1"), pyQuote(a.bridge.path)))
	t.Logf("from kernel b: %s", strings.TrimSpace(res.Text))
	if strings.Contains(res.Text, "CONNECTED") || strings.Contains(res.Text, "\"key\"") {
		t.Errorf("kernel b reached kernel a: %s", res.Text)
	}
	if fi, err := os.Stat(filepath.Dir(pa.connPath)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("run dir %s: %v %v, want a 0700 directory", filepath.Dir(pa.connPath), fi, err)
	}
}

func sprintf(format string, args ...string) string {
	for _, a := range args {
		format = strings.Replace(format, "%s", a, 1)
	}
	return format
}
