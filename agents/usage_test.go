package agents

import (
	"sync"
	"testing"

	"github.com/arborhq/arbor/agents/model/scripted"
)

const cacheScript = `{"rules":[
 {"when":{"task":"^cached","last":"x{100}"},"text":"done"},
 {"when":{"task":"^cached"},"code":"print('x' * 400)"}
],"default":{"text":"ok"}}`

// TestCachedInputTokensAccounted: the cached tokens the endpoint reports for each model call
// reach the session's usage, the log, and the usage a restart replays from the log.
func TestCachedInputTokensAccounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, cacheScript)
	var mu sync.Mutex
	var cached, prompt int64
	e.script.Observe(func(r scripted.Request) {
		mu.Lock()
		cached += int64(r.CachedTokens)
		prompt += int64(r.PromptTokens)
		mu.Unlock()
	})
	s := e.create("cached tokens please")
	e.settled(s)
	if _, err := s.enqueue(t.Context(), "user", "once more", "auto"); err != nil {
		t.Fatal(err)
	}
	e.settled(s)
	u := e.svc.Info(s).Usage
	mu.Lock()
	wantCached, wantPrompt := cached, prompt
	mu.Unlock()
	if u.ModelCalls != 4 || u.InputTokens != wantPrompt {
		t.Fatalf("usage %+v; want 4 model calls and the %d input tokens the model reported", u, wantPrompt)
	}
	// Every call after the first repeats the one before and appends to it.
	if u.CachedInputTokens != wantCached || wantCached == 0 || wantCached >= wantPrompt {
		t.Errorf("cached input tokens %d; want the %d the model reported (of %d input tokens)", u.CachedInputTokens, wantCached, wantPrompt)
	}
	var logged int64
	for _, m := range e.events(s, "assistant_message") {
		n, _ := m["usage"].(map[string]any)["cachedInputTokens"].(float64)
		logged += int64(n)
	}
	if logged != wantCached {
		t.Errorf("assistant_message events record %d cached input tokens, want %d", logged, wantCached)
	}
	recs, err := s.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	r := &Session{meta: s.meta}
	r.replay(recs)
	if r.usage.CachedInputTokens != wantCached || r.usage.InputTokens != wantPrompt {
		t.Errorf("replayed usage %+v; want %d cached of %d input tokens", r.usage, wantCached, wantPrompt)
	}
	if got := (Usage{CachedInputTokens: 3}).Add(Usage{CachedInputTokens: 4}); got.CachedInputTokens != 7 {
		t.Errorf("Add: %d cached input tokens, want 7", got.CachedInputTokens)
	}
}
