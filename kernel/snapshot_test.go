package kernel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSnapshotRestore(t *testing.T) {
	k := startKernel(t, Options{Host: &recordingHost{}})
	mustOK(t, k, `
import json, socket, os as operating_system
n = 42
data = {'a': [1, 2, 3], 'b': 'text'}
big = list(range(100000))
def square(v):
    return v * v + n
class Point:
    def __init__(self, x): self.x = x
p = Point(3)
f = lambda v: v + 1
sock = socket.socket()
gen = (i for i in range(3))
_private = 1
shared = [1]
alias = shared
`)
	dir := filepath.Join(t.TempDir(), "snap")
	m, err := k.Snapshot(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	saved := map[string]string{}
	for _, v := range m.Vars {
		saved[v.Name] = v.Method
	}
	want := map[string]string{"n": "pickle", "data": "pickle", "big": "pickle", "square": "dill",
		"Point": "dill", "p": "dill", "f": "dill", "json": "import", "operating_system": "import", "socket": "import"}
	for name, method := range want {
		if saved[name] != method {
			t.Errorf("%s saved with %q, want %q (manifest %+v)", name, saved[name], method, m.Vars)
		}
	}
	skipped := map[string]string{}
	for _, v := range m.Skipped {
		skipped[v.Name] = v.Reason
	}
	for _, name := range []string{"sock", "gen"} {
		if skipped[name] == "" {
			t.Errorf("%s not skipped with a reason: %+v", name, m.Skipped)
		}
	}
	if saved["_private"] != "pickle" {
		t.Errorf("_private (a user's underscore name) not saved: %+v", m.Vars)
	}
	for _, name := range []string{"_", "_i", "_ih", "_1", "rlm", "agent_message", "ArborError", "In", "Out", "arbor_ping"} {
		if _, ok := saved[name]; ok {
			t.Errorf("%s should not be in the snapshot", name)
		}
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("snapshot dir mode: %v %v", fi, err)
	}
	// A second snapshot replaces the first; only one data file remains.
	if _, err := k.Snapshot(t.Context(), dir); err != nil {
		t.Fatal(err)
	}
	if ds, _ := filepath.Glob(filepath.Join(dir, "data-*")); len(ds) != 1 {
		t.Errorf("data files after two snapshots: %v", ds)
	}

	k2 := startKernel(t, Options{Restore: dir, Host: &recordingHost{}})
	r := k2.Restored()
	if r == nil || len(r.Vars) != len(m.Vars) || r.Error != "" {
		t.Fatalf("Restored() = %+v", r)
	}
	if !strings.Contains(r.Summary(), "not restored: ") || !strings.Contains(r.Summary(), "sock") {
		t.Errorf("summary %q", r.Summary())
	}
	res := mustOK(t, k2, "print(n, data['b'], len(big), square(2), p.x, f(1), json.dumps(1), operating_system.sep, _private)\nawait arbor_ping('runtime ok')")
	if !strings.HasPrefix(res.Text, "42 text 100000 46 3 2 1 / 1\n'runtime ok'") {
		t.Errorf("restored namespace: %q", res.Text)
	}
	// Two names for one object are one object after a restore.
	if res := mustOK(t, k2, "alias.append(2)\nprint(shared, alias is shared)"); strings.TrimSpace(res.Text) != "[1, 2] True" {
		t.Errorf("an aliased list after restore: %q, want [1, 2] True", res.Text)
	}
	// A restored function sees the live namespace, not the values of snapshot time.
	if res := mustOK(t, k2, "n = 100\nprint(square(2), square.__globals__ is globals())"); strings.TrimSpace(res.Text) != "104 True" {
		t.Errorf("a restored function after n changed: %q, want 104 True", res.Text)
	}
}

func TestRestoreMissingSnapshot(t *testing.T) {
	k := startKernel(t, Options{Restore: filepath.Join(t.TempDir(), "none")})
	if r := k.Restored(); r == nil || r.Error == "" {
		t.Fatalf("Restored() = %+v, want an error", r)
	}
	mustOK(t, k, "1")
}

func TestSnapshotCaps(t *testing.T) {
	k := startKernel(t, Options{SnapshotMaxVar: 1 << 20, SnapshotMaxTotal: 3 << 20})
	mustOK(t, k, "big = b'x' * (2 << 20)\na = b'a' * (900 << 10)\nb = b'b' * (900 << 10)\nc = b'c' * (900 << 10)\nd = b'd' * (900 << 10)\nsmall = 1")
	m, err := k.Snapshot(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, v := range m.Skipped {
		reasons[v.Name] = v.Reason
	}
	if !strings.Contains(reasons["big"], "per-variable cap") {
		t.Errorf("big: %q", reasons["big"])
	}
	if len(m.Vars) != 4 || !strings.Contains(reasons["d"], "snapshot cap") {
		t.Errorf("kept %d vars, skipped %v; want a, b, c, small kept and d over the total", len(m.Vars), reasons)
	}
	if m.TotalBytes > 3<<20 {
		t.Errorf("total %d over the cap", m.TotalBytes)
	}
}

// A cell that starts before the automatic snapshot's quiet time has passed must not leave the
// earlier cells' variables unsaved while it runs: a daemon that dies during a long cell would
// otherwise lose them without a word.
func TestSnapshotFlushedBeforeNextCell(t *testing.T) {
	snap := filepath.Join(t.TempDir(), "snap")
	k := startKernel(t, Options{Snapshot: snap, SnapshotDelay: time.Hour})
	mustOK(t, k, "x = 42")
	done := make(chan *Result, 1)
	go func() {
		res, _ := k.Execute(t.Context(), "import time; time.sleep(2); y = 1", ExecOptions{})
		done <- res
	}()
	// While the long cell runs, the snapshot on disk already holds x.
	deadline := time.Now().Add(1500 * time.Millisecond)
	var m *Manifest
	for time.Now().Before(deadline) {
		if got, err := readManifest(filepath.Join(snap, "manifest.json")); err == nil {
			m = got
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if res := <-done; res == nil || res.Status != StatusOK {
		t.Fatalf("long cell: %+v", res)
	}
	if m == nil {
		t.Fatal("no snapshot on disk while the next cell ran: x would be lost if the daemon died now")
	}
	found := false
	for _, v := range m.Vars {
		found = found || v.Name == "x"
	}
	if !found || m.Cell != 1 {
		t.Fatalf("snapshot taken before cell 2 = %+v (cell %d), want x saved as of cell 1", m.Vars, m.Cell)
	}
}

// Cells in quick succession pay for the pending snapshot once per SnapshotFlushAge, not before
// each of them: the first cell after one is flushed, the next ones within the age are not.
func TestSnapshotFlushedOncePerAge(t *testing.T) {
	snap := filepath.Join(t.TempDir(), "snap")
	k := startKernel(t, Options{Snapshot: snap, SnapshotDelay: time.Hour, SnapshotFlushAge: time.Hour})
	mustOK(t, k, "x = 1")
	mustOK(t, k, "y = 2") // flushes cell 1: no snapshot was ever taken
	m, err := readManifest(filepath.Join(snap, "manifest.json"))
	if err != nil || m.Cell != 1 {
		t.Fatalf("after cell 2: manifest %+v, %v; want the snapshot of cell 1", m, err)
	}
	mustOK(t, k, "z = 3")
	mustOK(t, k, "w = 4")
	if m, err := readManifest(filepath.Join(snap, "manifest.json")); err != nil || m.Cell != 1 {
		t.Fatalf("cells within the flush age took a snapshot: manifest %+v, %v; want still cell 1", m, err)
	}
}

// Bookkeeping code the daemon runs in a kernel does not shift the model's cell numbers.
func TestExecuteHiddenKeepsCellNumbers(t *testing.T) {
	k := startKernel(t, Options{})
	if r := mustOK(t, k, "a = 1"); r.ExecutionCount != 1 {
		t.Fatalf("first cell count %d", r.ExecutionCount)
	}
	res, err := k.ExecuteHidden(t.Context(), "hidden = 7")
	if err != nil || res.Status != StatusOK {
		t.Fatalf("hidden: %+v %v", res, err)
	}
	r := mustOK(t, k, "print(hidden)")
	if r.ExecutionCount != 2 || strings.TrimSpace(r.Text) != "7" {
		t.Fatalf("after a hidden cell: count %d text %q, want 2 and 7", r.ExecutionCount, r.Text)
	}
	if res, err := k.ExecuteHidden(t.Context(), "1/0"); err != nil || res.Status != StatusError {
		t.Fatalf("hidden error: %+v %v", res, err)
	}
}

func TestSummaryNamesEverythingSkipped(t *testing.T) {
	m := &Manifest{Cell: 4, Vars: []VarEntry{{Name: "a"}}}
	for i := range 8 {
		m.Skipped = append(m.Skipped, VarEntry{Name: "v" + itoa(i), Reason: "r"})
	}
	s := m.Summary()
	for i := range 8 {
		if !strings.Contains(s, "v"+itoa(i)) {
			t.Errorf("summary %q does not name v%d", s, i)
		}
	}
	if !strings.Contains(s, "as of cell 4") {
		t.Errorf("summary %q does not say which cell it reflects", s)
	}
}
