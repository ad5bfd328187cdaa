package agents

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/model"
)

// TestFullDiskFailsTheTurnAndRecovers: the disk holding the repository (its worktrees and
// the sessions' event logs, under .git/arbor) fills up in the
// middle of a turn (the cell itself fills it). The turn fails with a reason that names the
// file and the cause and says what to do; a message that cannot be recorded is refused, not
// half-taken; the service keeps answering; once there is room a message runs a new turn on a
// valid conversation, and a restart finds every acknowledged record.
func TestFullDiskFailsTheTurnAndRecovers(t *testing.T) {
	repo := smallDisk(t)
	filler := filepath.Join(repo, "filler")
	script := fmt.Sprintf(`{"rules":[
 {"when":{"task":"^fill","turn":1},"code":"f = open('%s', 'wb', buffering=0)\ntry:\n    while True: f.write(b'x' * 4096)\nexcept OSError as e:\n    print('disk full, errno', e.errno)\nf.close()\nprint('y' * 6000)"},
 {"when":{"task":"^fill"},"text":"done"}
],"default":{"text":"done"}}`, filler)
	e := newEnvIn(t, script, repo)
	userConfig(t, `{"sandbox":"off"}`) // the cell fills the disk through the main tree, which a sandbox hides
	s := e.create("fill the disk")
	e.settled(s)
	in := e.svc.Info(s)
	if in.State != Failed || !strings.Contains(in.Error, "no space left on device") ||
		!strings.Contains(in.Error, repo) || !strings.Contains(in.Error, "free space") {
		t.Fatalf("after the disk filled: state %v, reason %q; want failed naming the file, ENOSPC and what to do", in.State, in.Error)
	}
	if _, err := e.svc.Send(context.Background(), s.meta.ID, strings.Repeat("z", 6000), "auto"); err == nil ||
		!strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("a message on a full disk: %v; want a refusal naming the cause", err)
	}
	if list, err := e.svc.List(""); err != nil || len(list) != 1 {
		t.Fatalf("the service stopped answering on a full disk: %v %v", list, err)
	}
	before := s.log.LastSeq()

	os.Remove(filler)
	if _, err := e.svc.Send(context.Background(), s.meta.ID, "carry on", "auto"); err != nil {
		t.Fatalf("a message once there is room: %v", err)
	}
	e.settled(s)
	if st := s.State(); st != Idle {
		t.Fatalf("after freeing space the session is %v (%s), want idle", st, e.svc.Info(s).Error)
	}
	s.mu.Lock()
	conv := closeDanglingToolCalls(s.conv, "")
	dangling := len(conv) != len(s.conv)
	s.mu.Unlock()
	if dangling {
		t.Error("the conversation kept a tool call without a result")
	}
	if s.log.LastSeq() <= before {
		t.Fatal("the new turn recorded nothing")
	}
	acked, _ := s.Events(1)
	s.mu.Lock()
	live := append([]model.Message(nil), s.conv...)
	s.mu.Unlock()
	svc := e.restart()
	again, err := svc.Get(s.meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := again.Events(1)
	if err != nil || len(recs) < len(acked) {
		t.Fatalf("after a restart: %d records (%v), %d acknowledged before", len(recs), err, len(acked))
	}
	for i, r := range acked {
		if recs[i].Seq != r.Seq || recs[i].Type != r.Type || string(recs[i].Data) != string(r.Data) {
			t.Fatalf("after a restart record %d is %d %s, was %d %s", i, recs[i].Seq, recs[i].Type, r.Seq, r.Type)
		}
	}
	// Replay rebuilds the conversation the live session had, the failed turn's note included.
	again.mu.Lock()
	replayed := append([]model.Message(nil), again.conv...)
	again.mu.Unlock()
	if len(replayed) != len(live) {
		t.Fatalf("replayed conversation has %d messages, the live one had %d", len(replayed), len(live))
	}
	for i := range live {
		if live[i].Role != replayed[i].Role || live[i].ToolCallID != replayed[i].ToolCallID || live[i].Content != replayed[i].Content {
			t.Errorf("message %d: live %s %q, replayed %s %q", i, live[i].Role, live[i].Content, replayed[i].Role, replayed[i].Content)
		}
	}
}

// TestFullDiskStop: a stop whose record cannot be written still stops the work, says that a
// restart would resume the session, and a stop once there is room records it.
func TestFullDiskStop(t *testing.T) {
	repo := smallDisk(t)
	e := newEnvIn(t, `{"rules":[],"default":{"text":"ok"}}`, repo)
	s := e.create("stop on a full disk")
	e.settled(s)
	// Fill the disk to the byte, then use up the slack of the log's last page.
	filler := filepath.Join(repo, "filler")
	f, _ := os.OpenFile(filler, os.O_CREATE|os.O_WRONLY, 0o644)
	for {
		if _, err := f.Write(make([]byte, 4096)); err != nil {
			break
		}
	}
	f.Write(make([]byte, 1))
	f.Close()
	for _, pad := range []string{strings.Repeat("p", 200), ""} {
		for i := 0; i < 100; i++ {
			if _, err := s.append(context.Background(), event.ModelRetry{Error: pad}); err != nil {
				break
			}
		}
	}
	err := e.svc.Stop(context.Background(), s.meta.ID)
	if err == nil || !strings.Contains(err.Error(), "no space left on device") || !strings.Contains(err.Error(), "stop it again") {
		t.Fatalf("stop on a full disk: %v; want the cause and what to do", err)
	}
	if s.State() != Stopped || s.hasKernel() {
		t.Fatalf("after the stop: state %v, kernel %v; the work must stop anyway", s.State(), s.hasKernel())
	}
	os.Remove(filler)
	if err := e.svc.Stop(context.Background(), s.meta.ID); err != nil {
		t.Fatalf("stop again once there is room: %v", err)
	}
	states := e.events(s, event.TypeStateChanged)
	if last := states[len(states)-1]["state"]; last != "stopped" {
		t.Fatalf("last state record %v, want stopped", last)
	}
}

// smallDisk mounts a 4 MiB tmpfs on a fresh directory, for the repository: a real disk that
// fills up. It needs root (CI has it); elsewhere the test is skipped, saying why.
func smallDisk(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=4m"); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (needs root): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}
