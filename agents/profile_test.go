package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/model/scripted"
	"github.com/arborhq/arbor/workspace"
)

const profileScript = `{"rules":[
 {"when":{"task":"^loop"},"code":"print('again')"},
 {"when":{"task":"^flaky"},"fail":{"status":500,"times":2},"text":"answered after failures"},
 {"when":{"task":"^parent","turn":1},"code":"h = await rlm('loop child')\nprint('spawned')"},
 {"when":{"task":"^parent"},"text":"parent done"}
],"default":{"text":"ok"}}`

// The eval profile changes the model id sent (through its provider), the tool mode, the
// retries and the steps of a turn; arbor.json's own model is the scripted one. It sets no
// gate or limit, which would make its runs autonomous (TestProfileMakesTheRunAutonomous).
const profileConfig = `{"models":{"scripted":{}},"profiles":{
 "eval":{"model":"scripted","provider":{"model":"eval-model-7"},"toolMode":"fenced","maxTurnSteps":2,
         "retry":{"maxRetries":1,"backoff":"1ms"},"cellTimeout":"5m"},
 "ci":{"until":"make test","maxTurns":3}}}`

// stubRequests records what reaches the model stub, per task.
type stubRequests struct {
	mu   sync.Mutex
	reqs []scripted.Request
}

func observeStub(s *scripted.Script) *stubRequests {
	r := &stubRequests{}
	s.Observe(func(req scripted.Request) {
		r.mu.Lock()
		r.reqs = append(r.reqs, req)
		r.mu.Unlock()
	})
	return r
}

func (r *stubRequests) of(taskPrefix string) []scripted.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []scripted.Request
	for _, q := range r.reqs {
		if strings.HasPrefix(q.Task, taskPrefix) {
			out = append(out, q)
		}
	}
	return out
}

func writeConfig(t *testing.T, repo, cfg string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(repo, "arbor.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (e *testEnv) createWith(req CreateRequest) *Session {
	e.t.Helper()
	req.Dir = e.repo
	s, err := e.svc.Create(context.Background(), req)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// TestProfileApplied: a session run with a profile sends the profile's model id, in its tool
// mode, retries as it says and stops a turn at its step limit — all seen at the model stub —
// and records it in its first event; a session without it runs as arbor.json says.
func TestProfileApplied(t *testing.T) {
	t.Parallel()
	e := newEnv(t, profileScript)
	writeConfig(t, e.repo, profileConfig)
	stub := observeStub(e.script)

	loop := e.createWith(CreateRequest{Task: "loop with the profile", Profile: "eval"})
	e.settled(loop)
	reqs := stub.of("loop with")
	if len(reqs) != 2 {
		t.Fatalf("%d model requests in the turn, want maxTurnSteps 2", len(reqs))
	}
	for _, q := range reqs {
		if q.Model != "eval-model-7" || q.Tools != 0 {
			t.Fatalf("request with the profile: model %q, %d tools; want eval-model-7 and fenced (no tools)", q.Model, q.Tools)
		}
	}
	if f := e.events(loop, event.TypeTurnFailed); len(f) != 1 || !strings.Contains(fmt.Sprint(f[0]), "limit of 2 model calls") || f[0]["limit"] != "steps" {
		t.Fatalf("turn_failed: %v", f)
	}
	if outs := e.events(loop, event.TypeToolFinished); len(outs) != 2 {
		t.Fatalf("the fenced blocks should run: %d tool results", len(outs))
	}

	// Recorded in the first event with what it ran with.
	recs, _ := loop.Events(0)
	first, err := event.As[event.SessionCreated](event.TypeSessionCreated, recs[0].Data)
	if err != nil {
		t.Fatal(err)
	}
	var rec workspace.Profile
	if err := json.Unmarshal(first.ProfileSettings, &rec); err != nil {
		t.Fatal(err)
	}
	if first.Profile != "eval" || rec.ToolMode != "fenced" || rec.MaxTurnSteps != 2 || rec.Provider.Model != "eval-model-7" ||
		*rec.Retry.MaxRetries != 1 || rec.CellTimeout != 5*time.Minute || first.Model != "scripted" {
		t.Fatalf("session_created records profile %q %+v, model %q", first.Profile, rec, first.Model)
	}
	if p := loop.cfg.ActiveProfile; p == nil || p.Name != "eval" || loop.cfg.CellTimeout != 5*time.Minute {
		t.Fatalf("the session's configuration carries the profile: %+v", p)
	}

	// Retry policy: one retry, so two failing requests fail the turn...
	flaky := e.createWith(CreateRequest{Task: "flaky with the profile", Profile: "eval"})
	e.settled(flaky)
	if n := len(stub.of("flaky with")); n != 2 {
		t.Fatalf("%d requests with maxRetries 1, want 2", n)
	}
	if flaky.State() != Failed || len(e.events(flaky, event.TypeTurnFailed)) != 1 {
		t.Fatalf("the turn should fail after its one retry: state %v", flaky.State())
	}
	// (TestProfileRetriesSucceed has the same endpoint answer with more retries.) Without the
	// profile, arbor.json's settings: the python tool, its model id, more steps.
	plain := e.create("loop without a profile")
	e.settled(plain)
	preqs := stub.of("loop without")
	if len(preqs) < 3 || preqs[0].Model != "scripted" || preqs[0].Tools != 1 {
		t.Fatalf("without the profile: %d requests, first %+v; want more than 2 steps, model scripted, the python tool", len(preqs), preqs[0])
	}
	if recs, _ := plain.Events(0); strings.Contains(string(recs[0].Data), `"profile`) {
		t.Fatalf("a session without a profile records one: %s", recs[0].Data)
	}
}

// TestProfileRetriesSucceed: the same failing endpoint, with a profile allowing three
// retries, answers on the third request.
func TestProfileRetriesSucceed(t *testing.T) {
	e := newEnv(t, profileScript)
	writeConfig(t, e.repo, `{"models":{"scripted":{}},"profiles":{"patient":{"retry":{"maxRetries":3,"backoff":"1ms"}}}}`)
	stub := observeStub(e.script)
	s := e.createWith(CreateRequest{Task: "flaky but patient", Profile: "patient"})
	e.settled(s)
	if n := len(stub.of("flaky")); n != 3 || s.State() != Idle {
		t.Fatalf("%d requests, state %v; want 3 and idle", n, s.State())
	}
	if n := len(e.events(s, event.TypeModelRetry)); n != 2 {
		t.Fatalf("%d model_retry events, want 2", n)
	}
}

// TestProfileInheritedAndRecovered: a child runs with its parent's profile; after a restart,
// with the profile changed in arbor.json meanwhile, the session runs with what it recorded.
func TestProfileInheritedAndRecovered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, profileScript)
	writeConfig(t, e.repo, profileConfig)
	stub := observeStub(e.script)
	parent := e.createWith(CreateRequest{Task: "parent of a loop", Profile: "eval"})
	e.settled(parent)
	kids := parent.childIDs()
	if len(kids) != 1 {
		t.Fatalf("children %v", kids)
	}
	child, _ := e.svc.Get(kids[0])
	if child.meta.Profile != "eval" {
		t.Fatalf("the child's profile is %q, want its parent's", child.meta.Profile)
	}
	if reqs := stub.of("loop child"); len(reqs) != 2 || reqs[0].Model != "eval-model-7" || reqs[0].Tools != 0 {
		t.Fatalf("the child's requests: %+v", reqs)
	}

	// The profile changes (and drops its tool mode) while the daemon is down.
	writeConfig(t, e.repo, `{"models":{"scripted":{}},"profiles":{"eval":{"maxTurnSteps":5}}}`)
	svc := e.restart()
	e.svc = svc
	s, err := svc.Get(child.meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Send(context.Background(), s.meta.ID, "go on", "follow_up"); err != nil {
		t.Fatal(err)
	}
	e.settled(s)
	reqs := stub.of("loop child")
	if len(reqs) != 4 {
		t.Fatalf("%d requests after the restart's turn, want 2 more (the recorded maxTurnSteps)", len(reqs)-2)
	}
	for _, q := range reqs[2:] {
		if q.Model != "eval-model-7" || q.Tools != 0 {
			t.Fatalf("after the restart: model %q, %d tools; want the recorded profile's", q.Model, q.Tools)
		}
	}
}

// TestProfileRefused: an unknown profile is refused listing the defined ones and a bad
// setting naming it, before anything exists; a repository's completion gate is refused until
// the repository is trusted, while sessions without the profile start.
func TestProfileRefused(t *testing.T) {
	e := newEnv(t, profileScript)
	writeConfig(t, e.repo, profileConfig)
	nothingMade := func(what string) {
		t.Helper()
		if infos, _ := e.svc.List(e.repo); len(infos) != 0 {
			t.Fatalf("%s left sessions: %+v", what, infos)
		}
		if out := git(t, e.repo, "branch", "--list", "arbor/*"); out != "" {
			t.Fatalf("%s left branches: %s", what, out)
		}
	}
	_, err := e.svc.Create(context.Background(), CreateRequest{Task: "hi", Dir: e.repo, Profile: "nope"})
	if err == nil || !strings.Contains(err.Error(), `unknown profile "nope": the defined profiles are ci, eval`) {
		t.Fatalf("unknown profile: %v", err)
	}
	nothingMade("an unknown profile")

	_, err = e.svc.Create(context.Background(), CreateRequest{Task: "hi", Dir: e.repo, Profile: "ci"})
	var ue *workspace.UntrustedError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "profiles.ci.until") || !strings.Contains(err.Error(), "arbor trust ") {
		t.Fatalf("untrusted gate: %v", err)
	}
	nothingMade("an untrusted profile")
	plain := e.create("no profile needs no trust")
	e.settled(plain)

	e.trust()
	ci := e.createWith(CreateRequest{Task: "gated", Profile: "ci"})
	var rec workspace.Profile
	json.Unmarshal(ci.meta.ProfileSettings, &rec)
	if rec.Until != "make test" || ci.cfg.ActiveProfile.Until != "make test" {
		t.Fatalf("trusted gate not applied: %+v", rec)
	}
	e.settled(ci)

	writeConfig(t, e.repo, `{"profiles":{"eval":{"maxTurns":"four"}}}`)
	_, err = e.svc.Create(context.Background(), CreateRequest{Task: "hi", Dir: e.repo, Profile: "eval"})
	if err == nil || !strings.Contains(err.Error(), "profiles.eval: maxTurns: got a JSON string") {
		t.Fatalf("bad setting: %v", err)
	}
}

// TestProfileCompaction: a profile's compaction policy decides how much stays verbatim, and a
// fork of a session runs with the session's profile.
func TestProfileCompaction(t *testing.T) {
	t.Parallel()
	e := newEnv(t, growScript)
	writeConfig(t, e.repo, `{"models":{"scripted":{"contextWindow":1200}},"profiles":{"tight":{"compaction":{"keep":2}}}}`)
	s := e.createWith(CreateRequest{Task: "grow the context", Profile: "tight"})
	e.settled(s)
	comps := e.events(s, event.TypeCompaction)
	if len(comps) == 0 {
		t.Fatal("no compaction happened")
	}
	for _, c := range comps {
		// keep 2, moved back by one so a tool result keeps its call (the default keeps 6).
		if kept := c["kept"].(float64); kept < 2 || kept > 3 {
			t.Fatalf("a compaction kept %v messages, want the profile's 2 (3 with a tool call's result)", kept)
		}
	}
	f, err := e.svc.Fork(context.Background(), s.meta.ID, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if f.meta.Profile != "tight" || f.cfg.Compaction.Keep != 2 {
		t.Fatalf("the fork runs with profile %q, keep %d; want its source's", f.meta.Profile, f.cfg.Compaction.Keep)
	}
}
