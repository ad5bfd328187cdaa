package agents

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/harness"
	"github.com/arborhq/arbor/agents/model/scripted"
)

// A note the agent writes from its kernel is a commit on the session's harness ref; it does not
// change the prompt of the turn that wrote it, and it is in the next turn's. A skill written in
// one turn imports in the next. A write to a shared scope is a proposal that waits for review.
func TestHarnessFromTheKernelAppliesAtTheNextTurn(t *testing.T) {
	e := newEnv(t, `{"rules":[
 {"when":{"task":"^learn","last":"^use the skill"},"code":"from arbor_skills import greet\nprint(greet.hello())"},
 {"when":{"task":"^learn","system":"RULE-XYZ"},"text":"rule visible"},
 {"when":{"task":"^learn","turn":1},"code":"v = await harness.notes.create('tests-first', 'Run the tests first', body='RULE-XYZ: always run the tests.')\nawait harness.skills.create('greet', 'Say hello', body='hello() -> str', module='def hello():\\n    return \"hi from a skill\"\\n')\np = await harness.notes.create('shared', 'x', body='y', scope='workspace')\nprint('proposed:', p['status'], p['proposal'])\nprint(v['applies'], [n['id'] for n in await harness.notes.list()], [(n['id'], n['scope']) for n in await harness.notes.search('ALWAYS tests')])"},
 {"when":{"task":"^learn"},"text":"rule not visible"}
],"default":{"text":"ok"}}`)
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	s := e.create("learn a rule")
	e.settled(s)
	outs := e.events(s, event.TypeToolFinished)
	if len(outs) != 1 {
		t.Fatalf("tool results %v", outs)
	}
	out := fmt.Sprint(outs[0]["output"])
	if !strings.Contains(out, "at the next turn ['tests-first'] [('tests-first', 'session')]") || !strings.Contains(out, "proposed: pending p") {
		t.Errorf("cell output: %s", out)
	}
	e.send(s, "again")
	e.send(s, "use the skill")
	var texts []string
	for _, m := range e.events(s, event.TypeAssistantMessage) {
		if t := fmt.Sprint(m["text"]); t != "" && t != "<nil>" {
			texts = append(texts, t)
		}
	}
	if len(texts) < 2 || texts[0] != "rule not visible" || texts[1] != "rule visible" {
		t.Errorf("answers %q: the note must reach the prompt at the next turn, not the one that wrote it", texts)
	}
	outs = e.events(s, event.TypeToolFinished)
	if last := fmt.Sprint(outs[len(outs)-1]["output"]); !strings.Contains(last, "hi from a skill") {
		t.Errorf("skill import: %s", last)
	}
	trailers := git(t, e.repo, "log", "--format=%(trailers)", "refs/arbor/harness/session/"+s.meta.ID)
	for _, want := range []string{"Arbor-Author: agent", "Arbor-Session: " + s.meta.ID, "Arbor-Turn: 1"} {
		if !strings.Contains(trailers, want) {
			t.Errorf("trailers lack %q:\n%s", want, trailers)
		}
	}
	if refs := git(t, e.repo, "for-each-ref", "refs/arbor/harness/workspace"); refs != "" {
		t.Errorf("the pending workspace proposal moved the workspace ref: %s", refs)
	}
	props := e.events(s, event.TypeHarnessProposed)
	if len(props) != 1 || props[0]["scope"] != "workspace" || props[0]["policy"] != "review" {
		t.Fatalf("harness_proposed events %v", props)
	}
	if refs := git(t, e.repo, "for-each-ref", "refs/arbor/proposals/"+fmt.Sprint(props[0]["proposal"])); refs == "" {
		t.Errorf("the proposal has no ref")
	}
	if applied := e.events(s, event.TypeHarnessApplied); len(applied) != 2 || applied[0]["by"] != "agent" || applied[0]["commit"] == "" {
		t.Errorf("harness_applied events %v, want the note and the skill", applied)
	}
	if u := s.usageNow(); u.HarnessEdits != 2 {
		t.Errorf("harness edits counted %d, want 2", u.HarnessEdits)
	}
}

// rlm(task, spec=id) starts a child with the spec's instructions, model and step limit, and the
// child's log remembers which spec it ran under.
func TestSpawnWithASubagentSpec(t *testing.T) {
	e := newEnv(t, `{"rules":[
 {"when":{"task":"(?s)^review the change.*ROLE-ABC"},"text":"reviewing as told"},
 {"when":{"task":"^delegate","turn":1},"code":"await harness.subagents.create('reviewer', 'Reviews a diff', spec={'instructions': 'ROLE-ABC: review only, never edit.', 'maxTurnSteps': 2, 'model': 'reviewer-model'})\nh = await rlm('review the change', spec='reviewer')\ntry:\n    await rlm('x', spec='nobody')\nexcept ArborError as e:\n    print('refused:', e)\nprint(h.name)"},
 {"when":{"task":"^delegate"},"text":"ok"}
],"default":{"text":"no role seen"}}`)
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	userConfig(t, `{"models":{"reviewer-model":{"baseURL":"`+e.url+`","model":"scripted"}}}`)
	p := e.create("delegate a review")
	e.settled(p)
	out := fmt.Sprint(e.events(p, event.TypeToolFinished)[0]["output"])
	if !strings.Contains(out, `refused: rlm: spec="nobody": no subagent spec`) {
		t.Errorf("cell output: %s", out)
	}
	p.mu.Lock()
	kids := append([]string(nil), p.children...)
	p.mu.Unlock()
	if len(kids) != 1 {
		t.Fatalf("children %v", kids)
	}
	kid, _ := e.svc.Get(kids[0])
	e.settled(kid)
	if kid.meta.Spec != "reviewer" || kid.cfg.MaxTurnSteps != 2 || kid.meta.Model != "reviewer-model" || p.meta.Model == "reviewer-model" {
		t.Errorf("child spec %q, maxTurnSteps %d, model %q (parent's %q); want reviewer, 2 and reviewer-model", kid.meta.Spec, kid.cfg.MaxTurnSteps, kid.meta.Model, p.meta.Model)
	}
	msgs := e.events(kid, event.TypeAssistantMessage)
	if len(msgs) == 0 || fmt.Sprint(msgs[0]["text"]) != "reviewing as told" {
		t.Errorf("the child did not get its role's instructions: %v", msgs)
	}
}

// Twenty turns without a harness change send a byte-identical system prompt (provider prompt
// caches depend on it); a change between turns changes the next one's, and only from then on.
func TestPromptPrefixStableOverTwentyTurns(t *testing.T) {
	e := newEnv(t, `{"rules":[],"default":{"text":"ok"}}`)
	var mu sync.Mutex
	var systems []string
	e.script.Observe(func(r scripted.Request) {
		if strings.HasPrefix(r.Task, "keep going") {
			mu.Lock()
			systems = append(systems, r.System)
			mu.Unlock()
		}
	})
	ctx := context.Background()
	ws, err := e.svc.HarnessStore(ctx, e.repo, harness.ScopeWorkspace, "")
	if err != nil {
		t.Fatal(err)
	}
	v, err := ws.Put(ctx, harness.Entry{Kind: harness.Note, ID: "style", Title: "Style", Body: "NOTE-ONE: small commits."}, "", harness.Change{Author: "user"})
	if err != nil {
		t.Fatal(err)
	}
	s := e.create("keep going")
	e.settled(s)
	for i := 1; i < 20; i++ {
		e.send(s, fmt.Sprintf("turn %d", i+1))
	}
	if _, err := ws.Put(ctx, harness.Entry{Kind: harness.Note, ID: "style", Title: "Style", Body: "NOTE-TWO: tiny commits."}, v, harness.Change{Author: "user"}); err != nil {
		t.Fatal(err)
	}
	e.send(s, "after the change")
	mu.Lock()
	defer mu.Unlock()
	if len(systems) != 21 {
		t.Fatalf("%d requests, want 21", len(systems))
	}
	for i, sys := range systems[:20] {
		if sys != systems[0] {
			t.Fatalf("turn %d's system prompt differs from turn 1's", i+1)
		}
	}
	if !strings.Contains(systems[0], "NOTE-ONE") || !strings.Contains(systems[20], "NOTE-TWO") || strings.Contains(systems[20], "NOTE-ONE") {
		t.Errorf("the note in the prompt: first %v, after the change %v", strings.Contains(systems[0], "NOTE-ONE"), strings.Contains(systems[20], "NOTE-TWO"))
	}
	if !strings.HasPrefix(systems[20], systems[0][:strings.Index(systems[0], "NOTE-ONE")]) {
		t.Error("the base prompt before the harness block changed")
	}
}

// Model code in a loop cannot bury the user's review: a session's pending proposals in a scope
// are bounded, and the refusal says why.
func TestPendingProposalsBounded(t *testing.T) {
	e := newEnv(t, `{"rules":[
 {"when":{"task":"^flood","turn":1},"code":"n = 0\ntry:\n    for i in range(40):\n        await harness.notes.create(f'n{i}', 'x', body='y', scope='workspace')\n        n += 1\nexcept ArborError as e:\n    print('stopped after', n, ':', e)"},
 {"when":{"task":"^flood"},"text":"done"}
],"default":{"text":"ok"}}`)
	s := e.create("flood the review")
	e.settled(s)
	out := fmt.Sprint(e.events(s, event.TypeToolFinished)[0]["output"])
	if !strings.Contains(out, fmt.Sprintf("stopped after %d", maxPendingProposals)) || !strings.Contains(out, "waiting for review") {
		t.Errorf("cell output: %s", out)
	}
	ps, err := e.svc.Proposals(context.Background(), e.repo, harness.Pending)
	if err != nil || len(ps) != maxPendingProposals {
		t.Errorf("%d pending, %v; want %d", len(ps), err, maxPendingProposals)
	}
}
