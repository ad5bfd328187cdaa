package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/arborhq/arbor/agents/event"
)

const stopRaceScript = `{"rules":[
 {"when":{"task":"^spawner","turn":1},"code":"for i in range(8):\n    await rlm(f'leaf {i}', name=f'l{i}')\nprint('done')"},
 {"when":{"task":"^leaf"},"delay_ms":300,"text":"leaf done"},
 {"when":{"last":"go on"},"delay_ms":100,"code":"print('still running')"},
 {"when":{"last":"still running"},"delay_ms":100,"code":"print('still running')"}
],"default":{"text":"ok"}}`

// recordsAfterStop lists the types recorded after the session's stopped record.
func recordsAfterStop(t *testing.T, s *Session) []string {
	t.Helper()
	recs, err := s.Events(1)
	if err != nil {
		t.Fatal(err)
	}
	var after []string
	stopped := false
	for _, r := range recs {
		if r.Type == string(event.TypeStateChanged) {
			var d struct{ State string }
			json.Unmarshal(r.Data, &d)
			if d.State == "stopped" {
				stopped = true
				continue
			}
		}
		if stopped {
			after = append(after, r.Type)
		}
	}
	return after
}

// A Send racing a Stop never leaves a turn running: the stopped session calls no model and
// records no turn after its stopped record.
func TestStopRacingSendRunsNoTurn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stopRaceScript)
	ctx := context.Background()
	var sessions []*Session
	for i := 0; i < 20; i++ {
		s := e.create(fmt.Sprintf("idle %d", i))
		e.settled(s)
		done := make(chan struct{})
		go func() { e.svc.Send(ctx, s.meta.ID, "go on", "auto"); close(done) }()
		time.Sleep(time.Duration(i%10) * 100 * time.Microsecond)
		if err := e.svc.Stop(ctx, s.meta.ID); err != nil {
			t.Fatal(err)
		}
		<-done
		sessions = append(sessions, s)
	}
	time.Sleep(500 * time.Millisecond) // a turn that escaped would call the model meanwhile
	for _, s := range sessions {
		e.waitFor("the stopped session to let go", func() bool { return !s.busy() })
		for _, typ := range recordsAfterStop(t, s) {
			if typ == string(event.TypeAssistantMessage) || typ == string(event.TypeTurnStarted) || typ == string(event.TypeToolStarted) {
				t.Errorf("%s: %s recorded after stopped: %v", s.label(), typ, recordsAfterStop(t, s))
				break
			}
		}
	}
}

// Stopping a parent whose cell is spawning children stops every child, also those linked
// while the stop was under way; and no child can be started under a stopped parent.
func TestStopWhileSpawningStopsEveryChild(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stopRaceScript)
	ctx := context.Background()
	p := e.create("spawner")
	e.waitFor("the first child", func() bool { return len(p.childIDs()) >= 1 })
	if err := e.svc.Stop(ctx, p.meta.ID); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the parent to let go", func() bool { return !p.busy() })
	time.Sleep(300 * time.Millisecond)
	for _, id := range p.childIDs() {
		c, _ := e.svc.Get(id)
		if c.State() != Stopped {
			t.Errorf("child %s is %v after its parent was stopped", c.label(), c.State())
		}
	}
	_, err := e.svc.Create(ctx, CreateRequest{Task: "leaf late", Parent: p.meta.ID})
	if !errors.Is(err, ErrInvalidState) {
		t.Errorf("a child under a stopped parent: %v; want ErrInvalidState", err)
	}
}

// Revive turns only an inactive session idle: decided under the state lock, it never
// overwrites a turn's running.
func TestReviveLeavesRunningAlone(t *testing.T) {
	e := newEnv(t, stopRaceScript)
	s := e.create("idle one")
	e.settled(s)
	ctx := context.Background()
	s.setState(ctx, Running, "")
	if changed, err := s.setStateIf(ctx, []State{Inactive}, Idle, ""); changed || err != nil || s.State() != Running {
		t.Fatalf("setStateIf(inactive→idle) on a running session: changed %v err %v state %v", changed, err, s.State())
	}
	s.setState(ctx, Inactive, "")
	if err := e.svc.Revive(ctx, s.meta.ID); err != nil || s.State() != Idle {
		t.Fatalf("Revive of an inactive session: %v, state %v", err, s.State())
	}
}
