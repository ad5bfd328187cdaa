package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/eventlog"
)

const fanOutScript = `{"rules":[
 {"when":{"task":"^fan out","turn":1},"code":"hs = [await rlm(f'write part {i}', name=f'w{i}') for i in range(3)]\nprint(sorted(h.name for h in hs), hs[0].branch)"},
 {"when":{"task":"^fan out","turn":2},"text":"waiting for my three workers"},
 {"when":{"task":"^fan out","last":"wrote part"},"text":"noted"},
 {"when":{"task":"write part","turn":1},"code":"import re\nn = re.search(r'part (\\d)', open('/proc/self/cmdline').read() or '') \nopen('part.txt','w').write('work of this child\\n')\nr = await agent_message.send('wrote part', receiver_role='parent')\nprint(r['status'])"},
 {"when":{"task":"write part","turn":2},"text":"done"}
],"default":{"text":"nothing scripted"}}`

func TestFanOutChildrenReportBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fanOutScript)
	root := e.create("fan out the work")
	e.settled(root)

	kids := root.childIDs()
	if len(kids) != 3 {
		t.Fatalf("root has %d children, want 3", len(kids))
	}
	branches := git(t, e.repo, "branch", "--list", "arbor/*")
	for _, id := range kids {
		c, err := e.svc.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		if c.meta.Parent != root.meta.ID {
			t.Errorf("child %s parent = %q", id, c.meta.Parent)
		}
		if !strings.Contains(branches, c.meta.Branch) {
			t.Errorf("git does not list branch %s:\n%s", c.meta.Branch, branches)
		}
		if got := git(t, e.repo, "show", c.meta.Branch+":part.txt"); got != "work of this child\n" {
			t.Errorf("child %s part.txt on its branch = %q", c.meta.Name, got)
		}
		if st := c.State(); st != Idle {
			t.Errorf("child %s state %v", c.meta.Name, st)
		}
	}
	var reports int
	for _, m := range e.events(root, event.TypeUserMessage) {
		if strings.Contains(fmt.Sprint(m["text"]), "wrote part") {
			reports++
		}
	}
	if reports != 3 {
		t.Errorf("root received %d reports, want 3", reports)
	}
	// A child that messaged its parent sends no extra completion notice.
	for _, m := range e.events(root, event.TypeUserMessage) {
		if strings.Contains(fmt.Sprint(m["text"]), "without messaging you") {
			t.Errorf("unexpected completion notice: %v", m["text"])
		}
	}
	in := e.svc.Info(root)
	var childTokens int64
	for _, id := range kids {
		c, _ := e.svc.Get(id)
		childTokens += c.usageNow().InputTokens
	}
	if in.Total.InputTokens != in.Usage.InputTokens+childTokens || childTokens == 0 {
		t.Errorf("root total %d != own %d + children %d", in.Total.InputTokens, in.Usage.InputTokens, childTokens)
	}
	if in.Total.Messages < 3 {
		t.Errorf("total messages = %d, want >= 3", in.Total.Messages)
	}
	if out := git(t, e.repo, "status", "--porcelain"); out != "" {
		t.Errorf("the user's tree changed:\n%s", out)
	}
}

const depthScript = `{"rules":[
 {"when":{"task":"^level0","turn":1},"code":"h = await rlm('level1 task', name='one')\nprint('spawned', h.name)"},
 {"when":{"task":"^level1","turn":1},"code":"h = await rlm('level2 task', name='two')\nprint('spawned', h.name)"},
 {"when":{"task":"^level2","turn":1},"code":"try:\n    await rlm('level3 task')\nexcept ArborError as e:\n    print('refused:', e)"},
 {"when":{"task":"^level2","turn":2},"text":"level2 finished"}
],"default":{"text":"ok"}}`

func TestDepthLimitAndCompletionNotice(t *testing.T) {
	t.Parallel()
	e := newEnv(t, depthScript)
	root := e.create("level0 root")
	e.settled(root)
	one, err := root.ownChild("one")
	if err != nil {
		t.Fatal(err)
	}
	two, err := one.ownChild("two")
	if err != nil {
		t.Fatal(err)
	}
	if len(two.childIDs()) != 0 {
		t.Errorf("depth 2 spawned a child")
	}
	outs := e.events(two, event.TypeToolFinished)
	if len(outs) == 0 || !strings.Contains(fmt.Sprint(outs[0]["output"]), "refused:") || !strings.Contains(fmt.Sprint(outs[0]["output"]), "depth limit is 2") {
		t.Errorf("grandchild's spawn was not refused with the depth limit: %v", outs)
	}
	// two never messaged its parent: one gets a completion notice with the final answer.
	var notice bool
	for _, m := range e.events(one, event.TypeUserMessage) {
		txt := fmt.Sprint(m["text"])
		if strings.Contains(txt, "without messaging you") && strings.Contains(txt, "level2 finished") {
			notice = true
			// One label: the delivery's, naming the sender once.
			if strings.Count(txt, "[message from child two]") != 1 || strings.Contains(txt, "[subagent") {
				t.Errorf("completion notice labelled more than once: %q", txt)
			}
		}
	}
	if !notice {
		t.Errorf("parent got no completion notice: %v", e.events(one, event.TypeUserMessage))
	}
}

const siblingScript = `{"rules":[
 {"when":{"task":"^parent","turn":1},"code":"a = await rlm('listener task', name='a')\nb = await rlm('talker task', name='b')\nprint('ok')"},
 {"when":{"task":"^talker","turn":1},"code":"print(await agent_message.send('hello sibling', receiver_name='a'))\nprint([x['name'] for x in await agent_message.list_agents()])\ntry:\n    await agent_message.send('x'*20000, receiver_role='parent')\nexcept ArborError as e:\n    print('too big:', e)\ntry:\n    await agent_message.send('x', receiver_role='child')\nexcept ArborError as e:\n    print('no child:', e)"},
 {"when":{"task":"^listener","last":"hello sibling"},"text":"heard my sibling"}
],"default":{"text":"ok"}}`

func TestSiblingMessagesAndLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, siblingScript)
	root := e.create("parent of two")
	e.settled(root)
	a, _ := root.ownChild("a")
	b, _ := root.ownChild("b")
	var heard bool
	for _, m := range e.events(a, event.TypeUserMessage) {
		if strings.Contains(fmt.Sprint(m["text"]), "hello sibling") && m["from"] == "sibling b" {
			heard = true
		}
	}
	if !heard {
		t.Errorf("a did not receive b's message: %v", e.events(a, event.TypeUserMessage))
	}
	out := fmt.Sprint(e.events(b, event.TypeToolFinished)[0]["output"])
	for _, want := range []string{"'status':", "too big:", "16384-byte limit", "no child:"} {
		if !strings.Contains(out, want) {
			t.Errorf("talker output lacks %q:\n%s", want, out)
		}
	}
}

func TestStopSubtree(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fanOutScript)
	root := e.create("fan out the work")
	e.settled(root)
	if err := e.svc.Stop(context.Background(), root.meta.ID); err != nil {
		t.Fatal(err)
	}
	for _, id := range append(root.childIDs(), root.meta.ID) {
		s, _ := e.svc.Get(id)
		if s.State() != Stopped || s.hasKernel() {
			t.Errorf("%s: state %v kernel %v after stopping the subtree", s.label(), s.State(), s.hasKernel())
		}
	}
	if _, err := e.svc.Send(context.Background(), root.meta.ID, "more", "auto"); err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Errorf("send to a stopped session: %v", err)
	}
}

const waitScript = `{"rules":[
 {"when":{"task":"^boss","turn":1},"code":"h = await rlm('slow worker task', name='slow')\nprint('spawned')"},
 {"when":{"task":"^boss","turn":2},"text":"waiting for slow"},
 {"when":{"task":"^boss","last":"finished its turn"},"text":"got it"},
 {"when":{"task":"^slow worker","turn":1},"delay_ms":1500,"text":"slow result"}
],"default":{"text":"ok"}}`

func TestParentWaitsWithoutSpendingTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t, waitScript)
	root := e.create("boss of a slow worker")
	e.waitFor("parent idle while the child works", func() bool {
		return root.State() == Idle && len(root.childIDs()) == 1
	})
	child, _ := root.ownChild("slow")
	calls := e.svc.Info(root).Usage.ModelCalls
	if calls != 2 {
		t.Fatalf("parent made %d model calls before waiting, want 2", calls)
	}
	for child.State() != Idle {
		if got := e.svc.Info(root).Usage.ModelCalls; got != calls {
			t.Fatalf("the idle parent spent model calls while its child worked: %d → %d", calls, got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.settled(root)
	if got := e.svc.Info(root).Usage.ModelCalls; got != calls+1 {
		t.Errorf("parent woke %d times for one completion notice, want once", got-calls)
	}
}

const gatherScript = `{"rules":[
 {"when":{"task":"^gather","turn":1},"code":"import asyncio\nhs = await asyncio.gather(*[rlm(f'leaf {i}') for i in range(6)])\nprint(sorted(h.name for h in hs))"},
 {"when":{"task":"^gather"},"text":"ok"}
],"default":{"text":"ok"}}`

func TestConcurrentSpawnsGetDistinctNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t, gatherScript)
	root := e.create("gather six leaves")
	e.settled(root)
	names := map[string]bool{}
	for _, id := range root.childIDs() {
		c, _ := e.svc.Get(id)
		names[c.meta.Name] = true
	}
	if len(names) != 6 {
		t.Errorf("6 concurrent spawns got names %v", names)
	}
}

// lastState remembers the last snapshot and state record each session was announced with.
type lastState struct {
	mu     sync.Mutex
	snap   map[string]State
	record map[string]string
}

func (l *lastState) SessionChanged(in Info) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.snap[in.ID] = in.State
}

func (l *lastState) Event(session string, rec eventlog.Record) {
	if rec.Type != string(event.TypeStateChanged) {
		return
	}
	var d struct{ State string }
	json.Unmarshal(rec.Data, &d)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.record[session] = d.State
}

// A stop that races a turn starting (a message just sent) is final everywhere: in memory, in
// the log (no running or idle record after it), and in the last snapshot listeners were given.
func TestStopRacingATurnIsFinal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[],"default":{"text":"ok"}}`)
	l := &lastState{snap: map[string]State{}, record: map[string]string{}}
	defer e.svc.Subscribe(l)()
	ctx := context.Background()
	var sessions []*Session
	for i := 0; i < 6; i++ {
		s := e.create(fmt.Sprintf("race %d", i))
		e.settled(s)
		for round := 0; round < 3; round++ {
			if _, err := e.svc.Send(ctx, s.meta.ID, "again", "auto"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(i) * time.Millisecond)
		}
		if err := e.svc.Stop(ctx, s.meta.ID); err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
	}
	for _, s := range sessions {
		e.waitFor("turn to wind down", func() bool { return !s.busy() })
	}
	time.Sleep(100 * time.Millisecond)
	for _, s := range sessions {
		states := e.events(s, event.TypeStateChanged)
		last, _ := states[len(states)-1]["state"].(string)
		l.mu.Lock()
		snap, rec := l.snap[s.meta.ID], l.record[s.meta.ID]
		l.mu.Unlock()
		if s.State() != Stopped || last != "stopped" || snap != Stopped || rec != "stopped" {
			t.Errorf("%s: memory %v, last record %q, last announced %v, last record told %q; want stopped everywhere",
				s.label(), s.State(), last, snap, rec)
		}
	}
}
