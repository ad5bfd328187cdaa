package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// loopScript keeps a session busy: every model call asks for one more cell.
const loopScript = `{"rules":[
 {"when":{"task":"^looper"},"code":"import time\nn = globals().get('n', 0) + 1\nprint('step', n)\ntime.sleep(0.02)"}
],"default":{"text":"ok"}}`

// TestDaemonKill kills the daemon with SIGKILL while 4 sessions append to their logs, restarts
// it, and checks that every event a client saw acknowledged before the kill is still there, in
// order, exactly once; that fsck finds no corruption; and that the sessions work on.
// ARBOR_SOAK=1 runs 30 cycles.
func TestDaemonKill(t *testing.T) {
	t.Parallel()
	cycles := 3
	if os.Getenv("ARBOR_SOAK") == "1" {
		cycles = 30
	}
	e := newEnv(t)
	script := filepath.Join(e.root, "loop.json")
	writeFile(t, script, loopScript)
	fm, url, err := startFakeModel(script)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { fm.Process.Kill(); fm.Wait() }()
	e.vars["ARBOR_MODEL_BASE_URL"] = url
	writeFile(t, filepath.Join(e.repo, "arbor.json"), `{"maxTurnSteps": 100000}`)
	e.git(e.repo, "add", "arbor.json")
	e.git(e.repo, "commit", "-qm", "config")

	var ids []string
	for i := 0; i < 4; i++ {
		ids = append(ids, sessionID(t, e.mustArbor("run", "--detach", fmt.Sprintf("looper %d", i))))
	}
	for c := 0; c < cycles; c++ {
		// Let them append for a while, reading what the daemon has acknowledged.
		time.Sleep(time.Duration(300+rand.IntN(500)) * time.Millisecond)
		seen := map[string][]jsonEvent{}
		for _, id := range ids {
			seen[id] = parseEvents(t, e.mustArbor("log", id, "--json"))
		}
		pid := e.daemonPID()
		if pid == 0 {
			t.Fatal("no daemon pid")
		}
		syscall.Kill(pid, syscall.SIGKILL)
		eventually(t, "the killed daemon to be gone", func() bool { return syscall.Kill(pid, 0) != nil })

		if r := e.arbor("fsck"); r.code != 0 {
			t.Fatalf("cycle %d: fsck after kill -9:\n%s", c, r)
		}
		// The next command starts a new daemon, which recovers the sessions.
		for _, id := range ids {
			after := parseEvents(t, e.mustArbor("log", id, "--json"))
			checkPrefix(t, c, id, seen[id], after)
		}
		for _, id := range ids {
			e.mustArbor("send", id, "continue")
		}
	}
	for _, id := range ids {
		evs := parseEvents(t, e.mustArbor("log", id, "--json"))
		var recovered int
		for _, ev := range evs {
			if ev.Type == "recovered" {
				recovered++
			}
		}
		if recovered < cycles {
			t.Errorf("session %s recorded %d recoveries over %d kills", id, recovered, cycles)
		}
	}
}

// checkPrefix: every acknowledged event is still there with the same seq, type and data, and
// seqs run 1, 2, 3, … without gaps or repeats.
func checkPrefix(t *testing.T, cycle int, id string, before, after []jsonEvent) {
	t.Helper()
	if len(after) < len(before) {
		t.Fatalf("cycle %d: session %s lost acknowledged events: %d before the kill, %d after", cycle, id, len(before), len(after))
	}
	for i, ev := range after {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("cycle %d: session %s: event %d has seq %d", cycle, id, i, ev.Seq)
		}
		if i < len(before) {
			b := before[i]
			if b.Seq != ev.Seq || b.Type != ev.Type || !jsonEqual(b.Data, ev.Data) {
				t.Fatalf("cycle %d: session %s: acknowledged event %d changed: %s %s → %s %s", cycle, id, b.Seq, b.Type, b.Data, ev.Type, ev.Data)
			}
		}
	}
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	json.Unmarshal(a, &x)
	json.Unmarshal(b, &y)
	return fmt.Sprint(x) == fmt.Sprint(y) || strings.TrimSpace(string(a)) == strings.TrimSpace(string(b))
}

// TestKernelsDieWithTheDaemon: kill -9 of the daemon takes its kernels (forked, pooled, the
// fork server) with it; none lives on as an orphan holding a namespace.
func TestKernelsDieWithTheDaemon(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustArbor("run", "compute two plus two minus two")
	pid := e.daemonPID()
	if len(e.owned()) < 2 {
		t.Fatalf("expected the daemon and its kernels, found %v", e.owned())
	}
	syscall.Kill(pid, syscall.SIGKILL)
	if left := waitGone(e.owned, 10*time.Second); len(left) > 0 {
		t.Errorf("processes outlived the killed daemon: %v", left)
	}
}
