package main

// A fork bomb from a model's cell, run by the real daemon: the session's process budget stops
// it, the cell fails saying which limit and which setting, the daemon and a neighbour session
// keep working, and the bomb's processes are gone once its children exit and are reaped. As
// root (a cgroup bounds it) and as a throwaway user (RLIMIT_NPROC in the sandbox's user
// namespace, or a cgroup where one is delegated).

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arborhq/arbor/sandbox"
)

// bombCell forks children that sleep 3 s and exit until a fork fails or 3,000 have started, and
// fails with the fork's error: a fork bomb that cannot outlive the test.
const bombCell = `
import os, time
n, err = 0, None
try:
    while n < 3000:
        pid = os.fork()
        if pid == 0:
            time.sleep(3)
            os._exit(0)
        n += 1
except OSError as e:
    err = e
print("FORKS", n)
if err:
    raise err
`

// reapCell waits for the bomb's children, as a user's next cell would.
const reapCell = `
import os
try:
    while True:
        os.waitpid(-1, 0)
except ChildProcessError:
    print("REAPED")
`

const budgetProcesses = 200

func newBudgetWorld(t *testing.T, as *osUser) *env {
	t.Helper()
	e := newEnv(t)
	script, _ := json.Marshal(map[string]any{
		"rules": []map[string]any{
			{"when": map[string]any{"task": "^bomb", "turn": 1}, "code": bombCell},
			{"when": map[string]any{"task": "^bomb", "turn": 2}, "code": reapCell},
			{"when": map[string]any{"task": "^bomb", "turn": 3}, "text": "done"},
			{"when": map[string]any{"task": "^neighbour", "turn": 1}, "code": "print('NEIGHBOUR', 6*7)"},
			{"when": map[string]any{"task": "^neighbour", "turn": 2}, "text": "done"},
		},
		"default": map[string]any{"text": "ok"},
	})
	path := filepath.Join(e.root, "bomb.json")
	writeFile(t, path, string(script))
	fm, url, err := startFakeModel(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fm.Process.Kill(); fm.Wait() })
	e.vars["ARBOR_MODEL_BASE_URL"] = url
	os.MkdirAll(filepath.Join(e.vars["XDG_CONFIG_HOME"], "arbor"), 0o700)
	writeFile(t, filepath.Join(e.vars["XDG_CONFIG_HOME"], "arbor", "config.json"),
		fmt.Sprintf(`{"limits": {"processes": %d}}`, budgetProcesses))
	if as != nil {
		e.cred = &syscall.Credential{Uid: uint32(as.uid), Gid: uint32(as.gid), Groups: []uint32{}}
		e.vars["USER"], e.vars["LOGNAME"] = as.name, as.name
		for _, d := range []string{e.root, e.sockDir} {
			chownTree(t, d, as.uid, as.gid)
			for p := filepath.Dir(d); p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
				os.Chmod(p, 0o711)
			}
		}
		os.Chmod(filepath.Dir(arborBin), 0o755)
	}
	return e
}

// cellOutputs returns the outputs of a session's cells, in order.
func cellOutputs(t *testing.T, e *env, id string) []string {
	t.Helper()
	var out []string
	for _, ev := range parseEvents(t, e.arbor("log", "--json", id)) {
		if ev.Type == "tool_finished" {
			var d struct{ Output string }
			json.Unmarshal(ev.Data, &d)
			out = append(out, d.Output)
		}
	}
	return out
}

// sandboxProcs counts the processes, zombies included, in the pid namespace of the kernel whose
// command line names session id; -1 when there is none.
func sandboxProcs(id string) int {
	ents, _ := os.ReadDir("/proc")
	ns := ""
	for _, e := range ents {
		b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if c := string(b); strings.Contains(c, id) && strings.Contains(c, "arbor_kernel.py") && !strings.Contains(c, "bwrap") {
			ns, _ = os.Readlink("/proc/" + e.Name() + "/ns/pid")
			break
		}
	}
	if ns == "" {
		return -1
	}
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			if l, _ := os.Readlink("/proc/" + e.Name() + "/ns/pid"); l == ns {
				n++
			}
		}
	}
	return n
}

func TestAttackForkBomb(t *testing.T) {
	if probe := sandbox.Probe(t.Context()); !probe.Available {
		t.Skipf("bubblewrap cannot sandbox here: %s", probe.Reason)
	}
	for _, tc := range []struct {
		name   string
		asUser bool
	}{{"root", false}, {"user", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var as *osUser
			if tc.asUser {
				u := throwawayUser(t)
				as = &u
			}
			e := newBudgetWorld(t, as)
			if as != nil {
				defer e.arbor("daemon", "stop")
			}
			r := e.arbor("run", "bomb the machine")
			if r.code != 0 {
				t.Fatalf("bomb session:\n%s", r)
			}
			id := sessionID(t, r)
			nb := e.arbor("run", "neighbour check")
			if nb.code != 0 {
				t.Fatalf("a neighbour session after the fork bomb:\n%s", nb)
			}
			if outs := cellOutputs(t, e, sessionID(t, nb)); len(outs) == 0 || !strings.Contains(outs[0], "NEIGHBOUR 42") {
				t.Errorf("the neighbour's cell after the fork bomb: %q", outs)
			}
			outs := cellOutputs(t, e, id)
			if len(outs) < 2 {
				t.Fatalf("the bomb session ran %d cells, want 2: %q", len(outs), outs)
			}
			bomb := outs[0]
			t.Logf("%s: the bomb cell said:\n%s", tc.name, bomb)
			var n int
			if _, after, ok := strings.Cut(bomb, "FORKS "); ok {
				n, _ = strconv.Atoi(strings.Fields(after)[0])
			}
			if n <= 0 || n >= budgetProcesses {
				t.Errorf("the cell forked %d children under a budget of %d tasks", n, budgetProcesses)
			}
			if !strings.Contains(bomb, "BlockingIOError") || !strings.Contains(bomb, "process limit") || !strings.Contains(bomb, sandbox.SettingProcesses) {
				t.Errorf("the failed cell does not tell the model it met the process limit, naming %s", sandbox.SettingProcesses)
			}
			if !strings.Contains(outs[1], "REAPED") {
				t.Errorf("the kernel after the bomb: %q", outs[1])
			}
			st := e.arbor("daemon", "status")
			if st.code != 0 || !strings.Contains(st.stdout, `"budget": "processes: `) {
				t.Errorf("daemon status does not say how the budget is enforced:\n%s", st)
			}
			// Its children exit after 3 s and were reaped: only the sandbox's init and the
			// kernel remain.
			deadline := time.Now().Add(30 * time.Second)
			for c := sandboxProcs(id); c > 2; c = sandboxProcs(id) {
				if time.Now().After(deadline) {
					t.Fatalf("%d processes are still in the bomb session's sandbox", c)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}
