package main

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
)

// TestJournalCrashReplay kills the real daemon (SIGKILL, at the ARBOR_TEST_CRASH hook) after it
// journalled a request and before it ran it, and after it ran it and before it answered, for a
// send and a create (and after, for a heartbeat); the restarted daemon replays each once: the
// message is queued and delivered exactly once, the task makes exactly one session, the
// heartbeat exists once. daemon status says what became of the last.
func TestJournalCrashReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := sessionID(t, e.mustArbor("run", "--detach", "compute two"))
	e.mustArbor("log", id, "--follow")

	// crash runs one command under a daemon that dies at the hook, and checks it died there.
	crash := func(at string, args ...string) {
		t.Helper()
		e.mustArbor("daemon", "stop")
		e.vars["ARBOR_TEST_CRASH"] = at
		r := e.arbor(args...)
		pid := e.daemonPID()
		delete(e.vars, "ARBOR_TEST_CRASH") // the next command starts a daemon without the hook
		if r.code == 0 {
			t.Fatalf("%s: the command succeeded, so the daemon did not die at the hook:\n%s", at, r)
		}
		eventually(t, "the killed daemon to be gone", func() bool { return pid == 0 || syscall.Kill(pid, 0) != nil })
	}

	crash("journal:arbor/session.send:before", "send", id, "message one")
	e.mustArbor("log", id, "--follow") // a new daemon: it replays the send, and the turn runs
	crash("journal:arbor/session.send:after", "send", id, "message two")
	e.mustArbor("log", id, "--follow")
	evs := parseEvents(t, e.mustArbor("log", id, "--json"))
	for _, text := range []string{"message one", "message two"} {
		if q, d := countMessage(evs, "message_queued", text), countMessage(evs, "user_message", text); q != 1 || d != 1 {
			t.Errorf("%q: queued %d times, delivered %d times; want exactly once each", text, q, d)
		}
	}

	crash("journal:arbor/session.create:before", "run", "--detach", "compute two before")
	e.mustArbor("ls")
	crash("journal:arbor/session.create:after", "run", "--detach", "compute two after")
	tasks := map[string]int{}
	var ls []struct{ ID, Task string }
	if err := json.Unmarshal([]byte(e.mustArbor("ls", "--json").stdout), &ls); err != nil {
		t.Fatal(err)
	}
	for _, s := range ls {
		tasks[s.Task]++
	}
	for _, task := range []string{"compute two before", "compute two after"} {
		if tasks[task] != 1 {
			t.Errorf("task %q has %d sessions, want exactly 1 (sessions: %v)", task, tasks[task], tasks)
		}
	}

	// A heartbeat created just before the daemon died is there once, not twice.
	crash("journal:arbor/heartbeat.create:after", "heartbeat", id, "look around", "--every", "1h")
	var list struct {
		Heartbeats []struct{ ID, Instruction string }
	}
	if err := json.Unmarshal([]byte(e.mustArbor("heartbeats", id, "--json").stdout), &list); err != nil {
		t.Fatal(err)
	}
	if hbs := list.Heartbeats; len(hbs) != 1 || hbs[0].Instruction != "look around" {
		t.Errorf("heartbeats after the crash = %+v, want exactly the one", list.Heartbeats)
	}

	// The last daemon found the heartbeat that had been made; daemon status reports it.
	var st struct {
		Interrupted []struct{ Method, Outcome, Session string }
	}
	if err := json.Unmarshal([]byte(e.mustArbor("daemon", "status").stdout), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Interrupted) != 1 || st.Interrupted[0].Method != "arbor/heartbeat.create" || st.Interrupted[0].Outcome != "already applied" {
		t.Errorf("daemon status interrupted = %+v, want the heartbeat, already applied", st.Interrupted)
	}
	// An accept is not redone unseen: the user is told, by ls and daemon status.
	crash("journal:arbor/session.accept:before", "accept", id)
	if r := e.mustArbor("ls"); !strings.Contains(r.stderr, "arbor/session.accept (session "+id[:8]+"): not replayed") ||
		!strings.Contains(r.stderr, "arbor daemon status") {
		t.Errorf("arbor ls after an interrupted accept does not say so:\n%s", r)
	}
	if err := json.Unmarshal([]byte(e.mustArbor("daemon", "status").stdout), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Interrupted) != 1 || st.Interrupted[0].Method != "arbor/session.accept" || st.Interrupted[0].Outcome != "not replayed" {
		t.Errorf("daemon status interrupted = %+v, want the accept, not replayed", st.Interrupted)
	}

	if r := e.arbor("fsck"); r.code != 0 {
		t.Errorf("fsck after the crashes:\n%s", r)
	}
}

// countMessage counts events of type typ whose text is text.
func countMessage(evs []jsonEvent, typ, text string) int {
	n := 0
	for _, ev := range evs {
		var d struct{ Text string }
		if ev.Type == typ && json.Unmarshal(ev.Data, &d) == nil && strings.TrimSpace(d.Text) == text {
			n++
		}
	}
	return n
}
