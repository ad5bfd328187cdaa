package agents

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/heartbeat"
	"github.com/arborhq/arbor/agents/model/scripted"
)

// heartbeatDeliveries returns the heartbeat refs of a session's message_queued records.
func heartbeatDeliveries(t *testing.T, s *Session) []event.HeartbeatRef {
	t.Helper()
	return heartbeatDeliveriesFrom(t, s, 0)
}

// heartbeatDeliveriesFrom is heartbeatDeliveries of the records with seq >= from.
func heartbeatDeliveriesFrom(t *testing.T, s *Session, from uint64) []event.HeartbeatRef {
	t.Helper()
	recs, err := s.Events(from)
	if err != nil {
		t.Fatal(err)
	}
	var out []event.HeartbeatRef
	for _, r := range recs {
		if r.Type != string(event.TypeMessageQueued) {
			continue
		}
		q, err := event.As[event.MessageQueued](event.TypeMessageQueued, r.Data)
		if err != nil {
			t.Fatal(err)
		}
		if q.Heartbeat != nil {
			out = append(out, *q.Heartbeat)
		}
	}
	return out
}

// checkRuns: deliveries cover runs 1..n without gap or overlap; it returns n.
func checkRuns(t *testing.T, refs []event.HeartbeatRef) int {
	t.Helper()
	last := 0
	for _, r := range refs {
		if r.Count < 1 || r.Run-r.Count != last {
			t.Errorf("delivery %+v after run %d: a gap or an overlap (all: %+v)", r, last, refs)
		}
		last = r.Run
	}
	return last
}

// countHeartbeatRequests counts the model requests whose newest message is a heartbeat.
func countHeartbeatRequests(s *scripted.Script) func() int {
	var mu sync.Mutex
	n := 0
	s.Observe(func(r scripted.Request) {
		if strings.HasPrefix(r.Last, "[heartbeat ") {
			mu.Lock()
			n++
			mu.Unlock()
		}
	})
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

const busyBeatScript = `{"rules":[
 {"when":{"task":"^busy","turn":1},"code":"import time; time.sleep(4.5)\nprint('slept')"},
 {"when":{"task":"^busy"},"text":"checked"}
],"default":{"text":"ok"}}`

// A heartbeat every second on a session whose cell sleeps 4.5 s: the ticks that come while it
// is busy wait as one, delivered when the turn ends with the count it stands for; later ticks
// come one by one. Runs 1..N are each delivered exactly once, and every delivery is one model
// request.
func TestHeartbeatBusySessionCoalescesAndDropsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, busyBeatScript)
	requests := countHeartbeatRequests(e.script)
	s := e.create("busy with a long cell")
	// The user's heartbeat (model code may not make one this fast), made while the cell runs.
	e.waitFor("the long cell", func() bool { return len(e.events(s, event.TypeToolStarted)) > 0 })
	if _, err := e.svc.CreateHeartbeat(context.Background(), s.meta.ID, HeartbeatRequest{Instruction: "check the build", Every: "1s"}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("a delivery after the long cell and two more", func() bool { return len(heartbeatDeliveries(t, s)) >= 3 })
	hbs, err := e.svc.Heartbeats(s.meta.ID)
	if err != nil || len(hbs) != 1 {
		t.Fatalf("heartbeats %+v %v", hbs, err)
	}
	del, err := e.svc.DeleteHeartbeat(context.Background(), hbs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	e.settled(s)
	refs := heartbeatDeliveries(t, s)
	last := checkRuns(t, refs)
	if refs[0].Count < 3 {
		t.Errorf("first delivery %+v: the ticks of the 4.5 s cell were not coalesced", refs[0])
	}
	// Nothing dropped: every tick counted was delivered or was still waiting at the delete,
	// and the ticks counted are exactly the due times passed.
	if last+del.Pending != del.Ticks || del.Claimed > del.Delivered {
		t.Errorf("delivered runs 1..%d, %d pending, %d ticks (%+v)", last, del.Pending, del.Ticks, del.Heartbeat)
	}
	if due := int(del.Next.Sub(del.Created)/time.Second) - 1; del.Ticks != due {
		t.Errorf("%d ticks counted, %d due before %v", del.Ticks, due, del.Next)
	}
	var coalesced int
	for _, d := range e.events(s, event.TypeHeartbeatTick) {
		if d["status"] == "coalesced" {
			coalesced++
		}
	}
	if coalesced < 2 {
		t.Errorf("%d coalesced ticks in the log, want the busy ones", coalesced)
	}
	if n := requests(); n != len(refs) {
		t.Errorf("%d model requests for %d heartbeat deliveries", n, len(refs))
	}
	for _, d := range e.events(s, event.TypeUserMessage) {
		if d["from"] == "heartbeat" && !strings.HasPrefix(fmt.Sprint(d["text"]), "[heartbeat "+del.ID+", run ") {
			t.Errorf("delivered text %q", d["text"])
		}
	}
}

const bridgeBeatScript = `{"rules":[
 {"when":{"task":"^beats","turn":1},"code":"try:\n    await heartbeat.create('x', cron='61 * * * *')\nexcept ArborError as e:\n    print('ERR1', e)\ntry:\n    await heartbeat.create('x')\nexcept TypeError as e:\n    print('ERR2', e)\nh = await heartbeat.create('tidy up', cron='0 3 * * *')\nprint('LIST', [x['id'] for x in await heartbeat.list()] == [h['id']], h['cron'], h['pending'])\ntry:\n    await heartbeat.delete('hbnope')\nexcept ArborError as e:\n    print('ERR3', e)\nawait heartbeat.delete(h['id'])\nprint('AFTER', await heartbeat.list())\ntry:\n    await heartbeat.create('spin', every='1s')\nexcept ArborError as e:\n    print('ERR4', e)"},
 {"when":{"task":"^beats"},"text":"done"}
],"default":{"text":"ok"}}`

// The kernel's heartbeat object from a real cell: a bad cron names its field and position,
// a call without a schedule fails in Python, list and delete see this session's heartbeats,
// and an unknown id is named.
func TestHeartbeatFromAKernelCell(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridgeBeatScript)
	s := e.create("beats from the kernel")
	e.settled(s)
	out := fmt.Sprint(e.events(s, event.TypeToolFinished)[0]["output"])
	for _, want := range []string{`ERR1`, `field 1 (minute) "61" at position 1`, "ERR2 give exactly one of", "LIST True 0 3 * * * 0",
		`ERR3 unknown heartbeat "hbnope"`, "AFTER []", "ERR4 heartbeat: it would fire every 1s; a heartbeat from the session's code fires at most once every 1m0s"} {
		if !strings.Contains(out, want) {
			t.Errorf("cell output lacks %q:\n%s", want, out)
		}
	}
}

// Bad input: a stopped session takes no heartbeat; bad schedules and unknown ids are named.
func TestHeartbeatBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[],"default":{"text":"ok"}}`)
	s := e.create("nothing much")
	e.settled(s)
	ctx := context.Background()
	for _, tc := range []struct {
		req  HeartbeatRequest
		want string
	}{
		{HeartbeatRequest{Instruction: "x", Every: "10q"}, `every "10q": unknown unit "q" at position 3`},
		{HeartbeatRequest{Instruction: "x", Cron: "* * 32 * *"}, `field 3 (day of month) "32" at position 5`},
		{HeartbeatRequest{Instruction: " ", Every: "1m"}, "instruction is empty"},
		{HeartbeatRequest{Instruction: "x"}, "give every"},
	} {
		_, err := e.svc.CreateHeartbeat(ctx, s.meta.ID, tc.req)
		var re RequestError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want a request error with %q", tc.req, err, tc.want)
		}
	}
	if _, err := e.svc.DeleteHeartbeat(ctx, "hb12345678"); !errors.Is(err, heartbeat.ErrNotFound) || !strings.Contains(err.Error(), `"hb12345678"`) {
		t.Errorf("delete unknown: %v", err)
	}
	if err := e.svc.Stop(ctx, s.meta.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.CreateHeartbeat(ctx, s.meta.ID, HeartbeatRequest{Instruction: "x", Every: "1m"}); !errors.Is(err, ErrInvalidState) || !strings.Contains(err.Error(), "stopped") {
		t.Errorf("heartbeat on a stopped session: %v", err)
	}
}

// Ticks missed while the daemon is down come as one delivery at start, with their count; the
// run numbers go on without a gap, and an inactive session is revived by it.
func TestHeartbeatMissedTicksCoalesceAtStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[],"default":{"text":"ok"}}`)
	s := e.create("wait for beats")
	e.settled(s)
	ctx := context.Background()
	hb, err := e.svc.CreateHeartbeat(ctx, s.meta.ID, HeartbeatRequest{Instruction: "look around", Every: "1s"})
	if err != nil {
		t.Fatal(err)
	}
	e.waitFor("one delivery", func() bool { return len(heartbeatDeliveries(t, s)) >= 1 })
	e.settled(s)
	if err := e.svc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	closedAt := s.log.LastSeq() // deliveries after it are the new daemon's
	time.Sleep(3500 * time.Millisecond)
	svc2, err := New(Options{StateDir: e.svc.opts.StateDir, Overrides: e.svc.opts.Overrides})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc2.Close(context.Background()) })
	if err := svc2.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	s2, err := svc2.Get(s.meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	e.waitFor("the delivery at start", func() bool { return len(heartbeatDeliveriesFrom(t, s2, closedAt+1)) > 0 })
	if _, err := svc2.DeleteHeartbeat(ctx, hb.ID); err != nil {
		t.Fatal(err)
	}
	e2 := &testEnv{t: t, svc: svc2}
	e2.settled(s2)
	refs := heartbeatDeliveries(t, s2)
	checkRuns(t, refs)
	first := heartbeatDeliveriesFrom(t, s2, closedAt+1)[0]
	if first.Count < 3 {
		t.Errorf("first delivery after 3.5 s down: %+v, want the missed ticks counted into it", first)
	}
	var turns int
	for range e2.events(s2, event.TypeTurnStarted) {
		turns++
	}
	if turns < len(refs)+1 {
		t.Errorf("%d turns for the task and %d deliveries", turns, len(refs))
	}
}

// A daemon that died after claiming a run comes back to one of two logs: the run's message
// was queued (it is not delivered again) or it was not (it is delivered now, once).
func TestHeartbeatClaimResolvedByTheLog(t *testing.T) {
	t.Parallel()
	for _, queued := range []bool{true, false} {
		t.Run(fmt.Sprintf("queued=%v", queued), func(t *testing.T) {
			e := newEnv(t, `{"rules":[],"default":{"text":"ok"}}`)
			s := e.create("wait for beats")
			e.settled(s)
			ctx := context.Background()
			hb, err := e.svc.CreateHeartbeat(ctx, s.meta.ID, HeartbeatRequest{Instruction: "look around", Every: "1h"})
			if err != nil {
				t.Fatal(err)
			}
			ref := event.HeartbeatRef{ID: hb.ID, Run: 1, Count: 1}
			if queued {
				if _, err := s.enqueueMsg(ctx, event.MessageQueued{From: "heartbeat", Text: "[heartbeat] look around", Mode: "follow_up", Heartbeat: &ref}); err != nil {
					t.Fatal(err)
				}
				e.settled(s)
			}
			if err := e.svc.Close(ctx); err != nil {
				t.Fatal(err)
			}
			st, err := heartbeat.Open(filepath.Join(s.dir, "heartbeats.json"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Update(hb.ID, func(h *heartbeat.Heartbeat) bool { h.Ticks, h.Claimed, h.ClaimedCount = 1, 1, 1; return true }); err != nil {
				t.Fatal(err)
			}
			svc2, err := New(Options{StateDir: e.svc.opts.StateDir, Overrides: e.svc.opts.Overrides})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { svc2.Close(context.Background()) })
			if err := svc2.Recover(ctx); err != nil {
				t.Fatal(err)
			}
			s2, err := svc2.Get(s.meta.ID)
			if err != nil {
				t.Fatal(err)
			}
			e2 := &testEnv{t: t, svc: svc2}
			e2.waitFor("the claim resolved", func() bool {
				hbs, _ := svc2.Heartbeats(s.meta.ID)
				return len(hbs) == 1 && hbs[0].Delivered == 1 && hbs[0].Claimed == 0
			})
			e2.settled(s2)
			if refs := heartbeatDeliveries(t, s2); len(refs) != 1 || refs[0] != ref {
				t.Errorf("deliveries %+v, want run 1 once", refs)
			}
			if n := len(e2.events(s2, event.TypeUserMessage)); n != 2 { // the task and the heartbeat
				t.Errorf("%d messages delivered into the conversation, want the task's and the heartbeat's", n)
			}
		})
	}
}

// Ticks that come while the session is reserved by something other than a turn — a merge, the
// move to inactive — wait as one too, and are handed on when the reservation ends.
func TestHeartbeatCoalescesDuringAReservation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[],"default":{"text":"ok"}}`)
	s := e.create("reserved while ticking")
	e.settled(s)
	s.mu.Lock()
	s.holder = mergeHolder
	s.mu.Unlock()
	if _, err := e.svc.CreateHeartbeat(context.Background(), s.meta.ID, HeartbeatRequest{Instruction: "look", Every: "1s"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3500 * time.Millisecond)
	if refs := heartbeatDeliveries(t, s); len(refs) != 0 {
		t.Fatalf("deliveries during the reservation: %+v", refs)
	}
	s.release()
	e.waitFor("the held-back ticks", func() bool { return len(heartbeatDeliveries(t, s)) > 0 })
	refs := heartbeatDeliveries(t, s)
	if refs[0].Count < 3 {
		t.Errorf("first delivery %+v, want one standing for the 3 ticks held back", refs[0])
	}
	checkRuns(t, refs)
}

// A tick whose store write fails (here: the file replaced by a directory) loses no run: the
// heartbeat goes on once the disk takes writes again, and runs 1..N stay without a gap.
func TestHeartbeatSurvivesAFailedWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[],"default":{"text":"ok"}}`)
	s := e.create("ticking through a bad disk")
	e.settled(s)
	if _, err := e.svc.CreateHeartbeat(context.Background(), s.meta.ID, HeartbeatRequest{Instruction: "look", Every: "1s"}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("a first delivery", func() bool { return len(heartbeatDeliveries(t, s)) > 0 })
	path := filepath.Join(s.dir, "heartbeats.json")
	saved, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	os.Mkdir(path, 0o700)
	os.WriteFile(filepath.Join(path, "blocker"), []byte("x"), 0o600) // a non-empty dir: rename fails
	time.Sleep(2500 * time.Millisecond)
	os.RemoveAll(path)
	os.WriteFile(path, saved, 0o600)
	n := len(heartbeatDeliveries(t, s))
	e.waitFor("deliveries after the disk recovered", func() bool { return len(heartbeatDeliveries(t, s)) >= n+2 })
	e.settled(s)
	checkRuns(t, heartbeatDeliveries(t, s))
}
