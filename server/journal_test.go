package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/arborhq/arbor/agents"
)

// TestJournalRulesCoverRoutes: every route of the method table has exactly one line in the
// journal table, with a policy and a reason, and no line names a route that does not exist —
// so a new method cannot be added without deciding how it survives a crash.
func TestJournalRulesCoverRoutes(t *testing.T) {
	table := buildRoutes() // the daemon's table, without the test-only routes other tests add
	for name := range table {
		rule, ok := journalRules[name]
		if !ok {
			t.Errorf("route %s has no line in journalRules: say whether it is journalled and how it replays", name)
			continue
		}
		if rule.policy < notJournalled || rule.policy > reportOnly || rule.why == "" {
			t.Errorf("route %s: policy %d, reason %q; want a policy and why", name, rule.policy, rule.why)
		}
		if rule.policy == replayKeyed && rule.session == nil {
			t.Errorf("route %s: a keyed rule must name where its key is recorded", name)
		}
	}
	for name := range journalRules {
		if _, ok := table[name]; !ok {
			t.Errorf("journalRules has a line for %s, which is no route", name)
		}
	}
	// The requests that must survive a crash are journalled, and the read-only ones are not.
	for _, m := range []string{MethodSessionCreate, MethodSessionSend, MethodSessionStop, MethodSessionFork,
		MethodSessionAccept, MethodSessionMerge, MethodSessionDiscard, MethodHarnessPut, MethodHarnessDelete,
		MethodHarnessRollback, MethodRefineRun, MethodRefineAccept, MethodRefineReject, MethodTrustGrant, MethodTrustRevoke,
		MethodGoalSet, MethodGoalControl, MethodHeartbeatCreate, MethodHeartbeatDelete} {
		if !journalRules[m].journalled() {
			t.Errorf("%s changes state but is not journalled", m)
		}
	}
	for _, m := range []string{MethodSessions, MethodSessionLog, MethodSessionDiff, MethodSessionFileAt, MethodDaemonStatus,
		MethodTrustGet, MethodHarnessList, MethodHarnessGet, MethodHarnessHistory, MethodHarnessDiff,
		MethodRefineProposals, MethodRefineProposal, MethodDaemonStop, MethodGoalGet, MethodProgress, MethodHeartbeatList, MethodProfiles} {
		if journalRules[m].journalled() {
			t.Errorf("%s is journalled, but must not be", m)
		}
	}
	// Commands run their route through conn.serve, so what they change is journalled there.
	for cmd, m := range commandMethods {
		if _, ok := journalRules[m]; !ok {
			t.Errorf("command %s runs %s, which has no journal rule", cmd, m)
		}
	}
}

func TestJournalKeyedSession(t *testing.T) {
	if got := journalRules[MethodSessionSend].session(json.RawMessage(`{"id":"abc","text":"hi"}`)); got != "abc" {
		t.Errorf("send's session = %q, want abc", got)
	}
	if got := journalRules[MethodSessionSend].session(json.RawMessage(`[1,2`)); got != "" {
		t.Errorf("send's session of bad params = %q, want empty", got)
	}
	if got := journalRules[MethodSessionCreate].session(json.RawMessage(`{"id":"abc"}`)); got != "" {
		t.Errorf("create's session = %q, want empty (a new session)", got)
	}
}

// reopen is what the next daemon does: it reads what this one left.
func reopen(t *testing.T, j *journal) *journal {
	t.Helper()
	j.close()
	k, err := openJournal(j.dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.close() })
	return k
}

func keys(es []*journalEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Key)
	}
	return out
}

// TestJournalEntries: an entry is a durable line; what has no done line comes back at the next
// open, in receive order, with what to replay; done entries do not.
func TestJournalEntries(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "journal")
	j, err := openJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("journal dir: %v %v, want 0700", fi, err)
	}
	first := j.stamp()
	second := j.stamp()
	if second <= first {
		t.Fatalf("stamps %d then %d: not increasing", first, second)
	}
	// Begun out of order: the later request's goroutine writes first.
	b, err := j.begin(second, MethodSessionSend, json.RawMessage(`{"id":"s1","text":"second <&>\nline"}`), "/repo")
	if err != nil {
		t.Fatal(err)
	}
	a, err := j.begin(first, MethodSessionCreate, json.RawMessage(`{"task":"first"}`), "/repo")
	if err != nil {
		t.Fatal(err)
	}
	c, err := j.begin(0, MethodSessionStop, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	finished, _ := j.begin(0, MethodSessionStop, json.RawMessage(`{"id":"x"}`), "")
	j.done(finished)
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(a.Key) || a.Key == b.Key {
		t.Fatalf("keys %s, %s: want distinct random 128-bit keys", a.Key, b.Key)
	}
	k := reopen(t, j)
	got := k.leftover
	if len(k.bad) != 0 || !slices.Equal(keys(got), []string{a.Key, b.Key, c.Key}) {
		t.Fatalf("leftover = %v (bad %v), want the three unfinished entries in receive order", keys(got), k.bad)
	}
	if g := got[1]; g.Method != MethodSessionSend || g.RootDir != "/repo" || g.Received().UnixNano() != second {
		t.Errorf("read back %+v", g)
	}
	var p SendParams
	if err := json.Unmarshal(got[1].Params, &p); err != nil || p.Text != "second <&>\nline" {
		t.Errorf("params read back: %+v %v", p, err)
	}
	for _, e := range got {
		if err := k.done(e); err != nil {
			t.Fatal(err)
		}
	}
	if l := reopen(t, k); len(l.leftover)+len(l.bad) != 0 {
		t.Errorf("after done: %v left, bad %v", keys(l.leftover), l.bad)
	}
}

// TestJournalCompacts: the file is emptied once nothing is in flight and it has grown, and an
// entry in flight keeps it.
func TestJournalCompacts(t *testing.T) {
	t.Parallel()
	j, err := openJournal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	big := json.RawMessage(`{"text":"` + strings.Repeat("x", compactAt/4) + `"}`)
	held, _ := j.begin(0, MethodSessionSend, json.RawMessage(`{"id":"held"}`), "")
	for range 8 {
		e, err := j.begin(0, MethodSessionSend, big, "")
		if err != nil {
			t.Fatal(err)
		}
		j.done(e)
	}
	if fi, _ := os.Stat(j.path); fi.Size() < compactAt {
		t.Fatalf("size %d with an entry in flight: compacted under it", fi.Size())
	}
	j.done(held)
	if fi, _ := os.Stat(j.path); fi.Size() != 0 {
		t.Errorf("size %d once nothing is in flight, want 0", fi.Size())
	}
}

// TestJournalCorruptEntries: damaged lines — a flipped byte that still parses, garbage,
// another format version — are reported, never fatal, a copy is kept, and the good entries
// around them are still replayed. A torn last line (a write a crash cut short, never
// acknowledged) is cut off without being reported as damage.
func TestJournalCorruptEntries(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j, err := openJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	good, _ := j.begin(0, MethodSessionStop, json.RawMessage(`{"id":"a"}`), "")
	j.begin(0, MethodSessionSend, json.RawMessage(`{"id":"a","text":"hello"}`), "")
	old, _ := j.begin(0, MethodSessionStop, json.RawMessage(`{"id":"a"}`), "")
	good2, _ := j.begin(0, MethodSessionStop, json.RawMessage(`{"id":"b"}`), "")
	j.close()
	data, err := os.ReadFile(j.path)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(data), "hello", "jello", 1)
	text = strings.Replace(text, `"v":1,"op":"begin","seq":`+fmt.Sprint(old.Seq), `"v":9,"op":"begin","seq":`+fmt.Sprint(old.Seq), 1)
	text += "\x00\xffnot json\n" + `{"v":1,"op":"begin","seq":1,"key":"torn","meth`
	os.WriteFile(j.path, []byte(text), 0o600)

	k, err := openJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer k.close()
	if !slices.Equal(keys(k.leftover), []string{good.Key, good2.Key}) {
		t.Fatalf("leftover = %v, want the two good entries", keys(k.leftover))
	}
	if len(k.bad) != 3 || !strings.Contains(k.bad[0].err.Error(), "checksum") || k.bad[0].line != 2 {
		t.Fatalf("bad = %v, want the flipped (a checksum mismatch, line 2), other-version and garbage lines", k.bad)
	}
	if kept, err := os.ReadFile(k.kept); err != nil || string(kept) != text {
		t.Errorf("copy of the damaged file: %v", err)
	}
	if now, _ := os.ReadFile(k.path); strings.Contains(string(now), "torn") {
		t.Errorf("the torn last line was not cut off")
	}

	// The daemon's start: corrupt lines reported, good entries replayed (here: stops of
	// unknown sessions, which fail and are reported as such), the file emptied.
	svc, err := agents.New(agents.Options{StateDir: t.TempDir(), PlainKernels: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close(context.Background()) })
	s := &Server{log: slog.New(slog.DiscardHandler), journal: k, agents: svc}
	s.replayJournal(t.Context())
	outs := s.interrupted.get()
	var corrupt, failed int
	for _, o := range outs {
		switch o.Outcome {
		case outcomeCorrupt:
			corrupt++
		case outcomeFailed:
			failed++
			if o.Method != MethodSessionStop || !strings.Contains(o.Detail, "session") {
				t.Errorf("failed replay reported as %+v", o)
			}
		}
	}
	if corrupt != 3 || failed != 2 {
		t.Errorf("outcomes %+v: want 3 corrupt and 2 failed", outs)
	}
	if fi, _ := os.Stat(k.path); fi.Size() != 0 {
		t.Errorf("journal size %d after the replay, want 0", fi.Size())
	}
	if l := reopen(t, k); len(l.leftover)+len(l.bad) != 0 {
		t.Errorf("the next start finds %v, bad %v", keys(l.leftover), l.bad)
	}
}

// TestJournalReplayKeepsTheRest: replaying the entries an earlier daemon left never compacts
// away one not yet replayed, however big the file: a daemon that dies mid-replay finds the
// rest at its next start.
func TestJournalReplayKeepsTheRest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j, err := openJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	big := json.RawMessage(`{"id":"s","text":"` + strings.Repeat("x", compactAt+10) + `"}`)
	first, _ := j.begin(0, MethodSessionSend, big, "")
	second, _ := j.begin(0, MethodSessionSend, json.RawMessage(`{"id":"s","text":"two"}`), "")
	j.close()
	k, err := openJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.done(k.leftover[0]); err != nil { // replayed the first, then the daemon died
		t.Fatal(err)
	}
	l := reopen(t, k)
	if !slices.Equal(keys(l.leftover), []string{second.Key}) {
		t.Fatalf("after replaying %s only, the next start finds %v; want %s", first.Key[:8], keys(l.leftover), second.Key[:8])
	}
}

// TestJournalBeginIsNeverCompactedAway: a done racing a begin cannot empty the file between
// the begin's write and its registration: every begun entry is in the file until its done.
func TestJournalBeginIsNeverCompactedAway(t *testing.T) {
	t.Parallel()
	j, err := openJournal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	big := json.RawMessage(`{"id":"s","text":"` + strings.Repeat("y", compactAt/3) + `"}`)
	var wg sync.WaitGroup
	var lost atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 60 {
				e, err := j.begin(0, MethodSessionSend, big, "")
				if err != nil {
					t.Error(err)
					return
				}
				if data, _ := os.ReadFile(j.path); !bytes.Contains(data, []byte(e.Key)) {
					lost.Add(1)
				}
				j.done(e)
			}
		}()
	}
	wg.Wait()
	if n := lost.Load(); n > 0 {
		t.Errorf("%d begun entries were compacted away before their done", n)
	}
}

// TestJournalReplayThatKilledTheDaemon: an entry a start began replaying and never finished
// (the replay killed the daemon) is reported at the next start, not replayed again, so one bad
// request cannot make the daemon die at every start.
func TestJournalReplayThatKilledTheDaemon(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j, err := openJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := j.begin(0, MethodSessionStop, json.RawMessage(`{"id":"deadbeef"}`), "")
	j.close()
	k, err := openJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(k.leftover) != 1 || k.leftover[0].attempted {
		t.Fatalf("leftover = %+v", k.leftover)
	}
	if err := k.replaying(k.leftover[0]); err != nil { // then the daemon died
		t.Fatal(err)
	}
	k.close()
	l, err := openJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	if len(l.leftover) != 1 || !l.leftover[0].attempted || l.leftover[0].Key != e.Key {
		t.Fatalf("leftover = %+v, want the entry marked as attempted", l.leftover)
	}
	svc, err := agents.New(agents.Options{StateDir: t.TempDir(), PlainKernels: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close(context.Background()) })
	s := &Server{log: slog.New(slog.DiscardHandler), journal: l, agents: svc}
	s.replayJournal(t.Context())
	outs := s.interrupted.get()
	if len(outs) != 1 || outs[0].Outcome != outcomeFailed || !strings.Contains(outs[0].Detail, "began replaying it and died") || outs[0].Session != "deadbeef" {
		t.Errorf("outcome = %+v", outs)
	}
}

// TestJournalFullDisk: a journal that cannot be written refuses the request with an error that
// names the disk problem, and leaves no entry behind.
func TestJournalFullDisk(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (needs root): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	j, err := openJournal(filepath.Join(dir, "journal"))
	if err != nil {
		t.Fatal(err)
	}
	fill(t, filepath.Join(dir, "filler"))
	_, err = j.begin(0, MethodSessionSend, json.RawMessage(`{"id":"a","text":"`+strings.Repeat("x", 8192)+`"}`), "")
	if err == nil || !strings.Contains(err.Error(), "no space left on device") || !strings.Contains(err.Error(), "refused, not run") ||
		!strings.Contains(err.Error(), "free disk space") {
		t.Fatalf("begin on a full disk: %v; want a refusal naming ENOSPC and what to do", err)
	}
	os.Remove(filepath.Join(dir, "filler"))
	e, err := j.begin(0, MethodSessionStop, json.RawMessage(`{"id":"a"}`), "")
	if err != nil {
		t.Fatalf("begin once there is room: %v", err)
	}
	if k := reopen(t, j); len(k.bad) != 0 || !slices.Equal(keys(k.leftover), []string{e.Key}) {
		t.Errorf("after a refused write: leftover %v, bad %v; want only the later entry, no partial line", keys(k.leftover), k.bad)
	}
}

func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			return
		}
	}
}

func TestCrashAtValid(t *testing.T) {
	for v, want := range map[string]bool{
		"": true, "journal:arbor/session.send:before": true, "journal:arbor/session.create:after": true,
		"journal:arbor/sessions:before": false, "journal:arbor/session.send:during": false, "send": false,
	} {
		if got := validCrashAt(v); got != want {
			t.Errorf("validCrashAt(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestDaemonRefusesUnjournalled: with the journal's disk full, a request that changes state is
// refused naming the disk problem (a send to a session that does not exist would otherwise be
// answered "unknown session": it never ran), and a read-only request is still answered.
func TestDaemonRefusesUnjournalled(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (needs root): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	d := startTestDaemonOpts(t, "", func(o *DaemonOptions) { o.JournalDir = filepath.Join(dir, "journal") })
	r := d.raw(t)
	r.call(1, MethodSessions, map[string]any{})
	if m := r.reply(); m.Error != nil {
		t.Fatalf("sessions: %+v", m.Error)
	}
	fill(t, filepath.Join(dir, "filler"))
	r.call(2, MethodSessionSend, map[string]any{"id": "0123456789abcdef", "text": strings.Repeat("x", 8192)})
	r.expectError(-32603, "no space left on device")
	// An editor command runs the same request, journalled the same way.
	r.call(5, "workspace/executeCommand", map[string]any{"command": CmdSend,
		"arguments": []any{map[string]any{"id": "0123456789abcdef", "text": strings.Repeat("x", 8192)}}})
	r.expectError(-32603, "no space left on device")
	r.call(3, MethodSessions, map[string]any{})
	if m := r.reply(); m.Error != nil {
		t.Fatalf("sessions on a full disk: %+v", m.Error)
	}
	os.Remove(filepath.Join(dir, "filler"))
	r.call(4, MethodSessionSend, map[string]any{"id": "0123456789abcdef", "text": "x"})
	r.expectError(CodeUnknownSession, "0123456789abcdef")
}

// TestDaemonReportsInterrupted: entries an earlier daemon left are dealt with before the first
// request is served: a refine.run is reported, not rerun; a stop of a session that is gone
// fails and is reported; a corrupt entry is set aside — and daemon.status lists them in order.
func TestDaemonReportsInterrupted(t *testing.T) {
	jdir := filepath.Join(t.TempDir(), "journal")
	j, err := openJournal(jdir)
	if err != nil {
		t.Fatal(err)
	}
	j.begin(0, MethodRefineRun, json.RawMessage(`{"session":"0123456789abcdef"}`), "")
	j.begin(0, MethodSessionStop, json.RawMessage(`{"id":"fedcba9876543210"}`), "")
	j.close()
	f, _ := os.OpenFile(j.path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("{\"v\":1,\n")
	f.Close()
	d := startTestDaemonOpts(t, "", func(o *DaemonOptions) { o.JournalDir = jdir })
	r := d.raw(t)
	r.call(1, MethodSessions, map[string]any{}) // waits for recovery, and so for the replay
	if m := r.reply(); m.Error != nil {
		t.Fatalf("sessions: %+v", m.Error)
	}
	r.call(2, MethodDaemonStatus, nil)
	m := r.reply()
	var st DaemonStatusResult
	if err := json.Unmarshal(m.Result, &st); err != nil {
		t.Fatal(err)
	}
	got := st.Interrupted
	if len(got) != 3 || got[0].Outcome != outcomeCorrupt ||
		got[1].Method != MethodRefineRun || got[1].Outcome != outcomeNotReplayed || !strings.Contains(got[1].Detail, "not redone") ||
		got[2].Method != MethodSessionStop || got[2].Outcome != outcomeFailed || got[2].Session != "" && got[2].Session != "fedcba9876543210" {
		t.Fatalf("interrupted = %+v", got)
	}
	if fi, _ := os.Stat(j.path); fi.Size() != 0 {
		t.Errorf("journal size %d after the replay, want 0", fi.Size())
	}
}

// FuzzJournalOpen: whatever bytes the journal file holds, opening it does not panic, every entry
// it returns is a well-formed begin that has no done line, and appending after it starts a line
// of its own (the next open reads the new entry back).
func FuzzJournalOpen(f *testing.F) {
	dir := f.TempDir()
	j, _ := openJournal(dir)
	a, _ := j.begin(0, MethodSessionSend, json.RawMessage(`{"id":"a","text":"hi"}`), "/r")
	b, _ := j.begin(0, MethodSessionStop, json.RawMessage(`{"id":"a"}`), "")
	j.done(a)
	j.close()
	good, _ := os.ReadFile(j.path)
	f.Add(good)
	f.Add(good[:len(good)-7])
	f.Add([]byte("\n\n{}\n{\"v\":1,\"op\":\"done\",\"key\":\"" + b.Key + "\",\"crc\":0}\n"))
	f.Add([]byte{0, 0xff, '\n', '{'})
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "requests.jsonl"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		j, err := openJournal(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range j.leftover {
			if e.Op != "begin" || e.Key == "" || e.Method == "" || e.V != journalVersion {
				t.Fatalf("leftover %+v is no well-formed begin", e)
			}
		}
		n := len(j.leftover)
		e, err := j.begin(0, MethodSessionStop, json.RawMessage(`{"id":"z"}`), "")
		if err != nil {
			t.Fatal(err)
		}
		j.close()
		k, err := openJournal(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer k.close()
		if len(k.leftover) != n+1 || !slices.ContainsFunc(k.leftover, func(x *journalEntry) bool { return x.Key == e.Key }) {
			t.Fatalf("after appending to %q: %d entries (want %d) including the new one", data, len(k.leftover), n+1)
		}
	})
}

// A journal line nested past the depth limit is not decoded, even with a checksum that holds:
// no daemon wrote it, since the framing let no request that deep in.
func TestJournalLineTooDeep(t *testing.T) {
	e := &journalEntry{V: journalVersion, Op: "begin", Key: "k", Method: MethodSessionStop,
		Params: json.RawMessage(strings.Repeat("[", 1000) + strings.Repeat("]", 1000))}
	line, err := e.line()
	if err != nil {
		t.Fatal(err)
	}
	_, err = parseEntry(bytes.TrimSpace(line))
	if err == nil || !strings.Contains(err.Error(), "JSON nesting depth 1001 at byte") {
		t.Errorf("parseEntry = %v, want it refused by depth", err)
	}
}
