package scripted

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

// TestPromptCache sends requests through the real go-openai client and checks the cached
// tokens the server reports against the prefix each request shares with the one before.
func TestPromptCache(t *testing.T) {
	t.Parallel()
	s, err := Parse([]byte(`{"rules":[{"when":{"task":"^fixed"},"text":"ok","usage":{"prompt_tokens":1000,"completion_tokens":1}}],"default":{"text":"ok"}}`), "cache.json")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []Request
	s.Observe(func(r Request) { mu.Lock(); seen = append(seen, r); mu.Unlock() })
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = srv.URL + "/v1"
	c := openai.NewClientWithConfig(cfg)
	send := func(msgs ...openai.ChatCompletionMessage) openai.Usage {
		t.Helper()
		resp, err := c.CreateChatCompletion(t.Context(), openai.ChatCompletionRequest{Model: "m", Messages: msgs})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Usage.PromptTokensDetails == nil {
			t.Fatalf("usage %+v has no prompt_tokens_details", resp.Usage)
		}
		return resp.Usage
	}
	msg := func(role, text string) openai.ChatCompletionMessage {
		return openai.ChatCompletionMessage{Role: role, Content: text}
	}
	sys := msg("system", strings.Repeat("You are a careful agent. ", 40)) // 1,000 characters
	task := msg("user", "rename the Foo type everywhere")
	call := openai.ChatCompletionMessage{Role: "assistant", ToolCalls: []openai.ToolCall{{ID: "c1", Type: "function",
		Function: openai.FunctionCall{Name: "python", Arguments: `{"code":"print(1)"}`}}}}
	out := msg("tool", strings.Repeat("output line\n", 100))
	out.ToolCallID = "c1"

	first := send(sys, task)
	if got := first.PromptTokensDetails.CachedTokens; got != 0 {
		t.Errorf("first request of a conversation: %d cached tokens, want 0", got)
	}
	// The second request repeats the first and appends: the first's characters are cached.
	second := send(sys, task, call, out)
	want := second.PromptTokens * (len(sys.Content) + len(task.Content)) / (len(sys.Content) + len(task.Content) + len(call.ToolCalls[0].Function.Arguments) + len(out.Content))
	if got := second.PromptTokensDetails.CachedTokens; got != want || got == 0 {
		t.Errorf("appended request: %d cached tokens, want %d", got, want)
	}
	// The same request again is all cached.
	if u := send(sys, task, call, out); u.PromptTokensDetails.CachedTokens != u.PromptTokens {
		t.Errorf("repeated request: %d of %d prompt tokens cached, want all", u.PromptTokensDetails.CachedTokens, u.PromptTokens)
	}
	// A tool output changed near its end keeps its unchanged blocks and nothing after.
	out2 := out
	out2.Content = out.Content[:len(out.Content)-10] + "changed!!\n"
	send(sys, task, call, out2)
	mu.Lock()
	last := seen[len(seen)-1]
	mu.Unlock()
	wantChars := len(sys.Content) + len(task.Content) + len(call.ToolCalls[0].Function.Arguments) + (len(out.Content)-10)/cacheBlock*cacheBlock
	if last.CachedChars != wantChars || last.Chars != wantChars-(len(out.Content)-10)/cacheBlock*cacheBlock+len(out2.Content) {
		t.Errorf("changed tool output: %d of %d characters cached, want %d", last.CachedChars, last.Chars, wantChars)
	}
	if len(last.Messages) != 4 || last.Messages[3].Content != out2.Content {
		t.Errorf("observer saw messages %+v; want the request's four", last.Messages)
	}
	// A changed system prompt is another conversation: nothing is cached.
	sys2 := msg("system", "Changed: "+sys.Content)
	if u := send(sys2, task, call, out); u.PromptTokensDetails.CachedTokens != 0 {
		t.Errorf("changed system prompt: %d cached tokens, want 0", u.PromptTokensDetails.CachedTokens)
	}
	// A scripted usage is split the same way.
	fixed := msg("user", "fixed usage")
	send(sys, fixed)
	if u := send(sys, fixed); u.PromptTokens != 1000 || u.PromptTokensDetails.CachedTokens != 1000 {
		t.Errorf("scripted usage repeated: %+v, want all 1000 prompt tokens cached", u)
	}
	// A message edited in its first block shares nothing of it.
	edited := send(sys, task, msg("assistant", "x"+strings.Repeat("y", 600)))
	_ = edited
	u := send(sys, task, msg("assistant", "z"+strings.Repeat("y", 600)))
	if want := u.PromptTokens * (len(sys.Content) + len(task.Content)) / (len(sys.Content) + len(task.Content) + 601); u.PromptTokensDetails.CachedTokens != want {
		t.Errorf("edited first block: %d cached tokens, want %d", u.PromptTokensDetails.CachedTokens, want)
	}
}

// TestPromptCacheBounded: the cache forgets the least recently used conversation beyond its
// bound, and keeps hashes, not text.
func TestPromptCacheBounded(t *testing.T) {
	t.Parallel()
	c := newPromptCache()
	req := func(task string) int {
		msgs := []openai.ChatCompletionMessage{{Role: "system", Content: "sys"}, {Role: "user", Content: task}}
		return c.request(msgs, summarize(msgs))
	}
	req("first")
	if got := req("first"); got != len("sys")+len("first") {
		t.Fatalf("repeated request: %d characters cached, want %d", got, len("sysfirst"))
	}
	for i := range cacheConversations {
		req(fmt.Sprint("task ", i))
	}
	if c.lru.Len() != cacheConversations || len(c.convs) != cacheConversations {
		t.Errorf("cache holds %d conversations (%d keys), want %d", c.lru.Len(), len(c.convs), cacheConversations)
	}
	if got := req("first"); got != 0 {
		t.Errorf("a conversation pushed out of the cache: %d characters cached, want 0", got)
	}
	long := strings.Repeat("a", 10*cacheBlock)
	msgs := []openai.ChatCompletionMessage{{Role: "user", Content: long}}
	if s := c.sign(msgs[0]); len(s.blocks) != 10 || s.chars != len(long) {
		t.Errorf("signature of %d characters: %d blocks, %d chars; want 10 blocks", len(long), len(s.blocks), s.chars)
	}
}
