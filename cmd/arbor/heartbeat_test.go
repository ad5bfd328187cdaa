package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

type beatRef struct {
	ID    string `json:"id"`
	Run   int    `json:"run"`
	Count int    `json:"count"`
}

// heartbeatRuns returns the heartbeat refs of a session's message_queued events.
func heartbeatRuns(t *testing.T, e *env, id string) []beatRef {
	t.Helper()
	var out []beatRef
	for _, ev := range parseEvents(t, e.mustArbor("log", id, "--json")) {
		if ev.Type != "message_queued" {
			continue
		}
		var q struct {
			Heartbeat *beatRef `json:"heartbeat"`
		}
		json.Unmarshal(ev.Data, &q)
		if q.Heartbeat != nil {
			out = append(out, *q.Heartbeat)
		}
	}
	return out
}

// The daemon is killed (SIGKILL) right after it claimed a heartbeat's first run and before
// it delivered it. The next daemon delivers that run exactly once; the runs after it follow
// without a gap or a repeat.
func TestHeartbeatKilledMidTickDeliversOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := sessionID(t, e.mustArbor("run", "say hello"))
	e.mustArbor("daemon", "stop")
	e.vars["ARBOR_TEST_CRASH_AFTER_HEARTBEAT_CLAIM"] = "1"
	out := e.mustArbor("heartbeat", id, "look at the build", "--every", "1s").stdout
	f := strings.Fields(out)
	if len(f) < 2 || f[0] != "heartbeat" {
		t.Fatalf("arbor heartbeat printed %q", out)
	}
	hid := f[1]
	pid := e.daemonPID()
	eventually(t, "the daemon to kill itself after the claim", func() bool { return pid == 0 || syscall.Kill(pid, 0) != nil })
	store := filepath.Join(e.repo, ".git", "arbor", "sessions", id, "heartbeats.json")
	b, err := os.ReadFile(store)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Heartbeats []struct{ Claimed, Delivered int } `json:"heartbeats"`
	}
	json.Unmarshal(b, &st)
	if len(st.Heartbeats) != 1 || st.Heartbeats[0].Claimed != 1 || st.Heartbeats[0].Delivered != 0 {
		t.Fatalf("store after the crash: %s", b)
	}
	e.vars["ARBOR_TEST_CRASH_AFTER_HEARTBEAT_CLAIM"] = ""
	eventually(t, "run 1 delivered by the next daemon", func() bool { return len(heartbeatRuns(t, e, id)) >= 2 })
	e.mustArbor("heartbeat", "delete", hid)
	runs := heartbeatRuns(t, e, id)
	last := 0
	for _, r := range runs {
		if r.ID != hid || r.Count < 1 || r.Run-r.Count != last {
			t.Fatalf("deliveries %+v: a run lost or repeated", runs)
		}
		last = r.Run
	}
	if runs[0].Run != 1 || runs[0].Count != 1 {
		t.Errorf("the claimed run came as %+v, want run 1 alone", runs[0])
	}
}

// The CLI: create, list and delete a heartbeat; bad schedules and unknown ids are named.
func TestHeartbeatCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := sessionID(t, e.mustArbor("run", "say hello"))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"heartbeat", id, "x", "--every", "10q"}, `unknown unit "q" at position 3`},
		{[]string{"heartbeat", id, "x", "--cron", "*/15 * * 13 *"}, `field 4 (month) "13" at position 10`},
		{[]string{"heartbeat", id, "x"}, "exactly one of --every and --cron"},
		{[]string{"heartbeat", "delete", "hbnope"}, `unknown heartbeat "hbnope"`},
		{[]string{"heartbeats", "nosuchsession"}, "unknown session"},
	} {
		r := e.arbor(tc.args...)
		if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("want an error with %q:\n%s", tc.want, r)
		}
	}
	out := e.mustArbor("heartbeat", id, "tidy the changelog", "--cron", "0 3 * * *").stdout
	hid := strings.Fields(out)[1]
	if !strings.Contains(out, "cron 0 3 * * *") || !strings.Contains(out, "03:00:00") {
		t.Errorf("create printed %q", out)
	}
	list := e.mustArbor("heartbeats").stdout
	for _, want := range []string{"ID", "NEXT DUE", "PENDING", hid, id[:8], "cron 0 3 * * *", "0/0", "tidy the changelog"} {
		if !strings.Contains(list, want) {
			t.Errorf("arbor heartbeats lacks %q:\n%s", want, list)
		}
	}
	if l := e.mustArbor("heartbeats", id, "--json").stdout; !strings.Contains(l, `"id": "`+hid+`"`) {
		t.Errorf("arbor heartbeats --json:\n%s", l)
	}
	e.mustArbor("heartbeat", "delete", hid[:6])
	if l := e.mustArbor("heartbeats").stdout; !strings.Contains(l, "no heartbeats") {
		t.Errorf("after delete:\n%s", l)
	}
	e.mustArbor("stop", id)
	if r := e.arbor("heartbeat", id, "x", "--every", "1m"); r.code == 0 || !strings.Contains(r.stderr, "stopped") {
		t.Errorf("heartbeat on a stopped session:\n%s", r)
	}
}
