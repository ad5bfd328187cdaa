package scripted

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
)

// conversation is what rules match against.
type conversation struct {
	task   string // first user message
	last   string // newest message
	system string // the system messages, joined
	turn   int    // assistant messages so far + 1
	chars  int    // characters of the whole request, for usage estimates
	cached int    // of chars, the prefix repeating the conversation's previous request
}

func summarize(msgs []openai.ChatCompletionMessage) conversation {
	c := conversation{turn: 1}
	taskSet := false
	for _, m := range msgs {
		text := content(m)
		c.chars += len(text)
		for _, tc := range m.ToolCalls {
			c.chars += len(tc.Function.Arguments)
		}
		if m.Role == openai.ChatMessageRoleSystem {
			c.system += text
		}
		if m.Role == openai.ChatMessageRoleUser && !taskSet {
			c.task, taskSet = text, true
		}
		if m.Role == openai.ChatMessageRoleAssistant {
			c.turn++
		}
	}
	c.last = content(msgs[len(msgs)-1])
	return c
}

func content(m openai.ChatCompletionMessage) string {
	if len(m.MultiContent) == 0 {
		return m.Content
	}
	var b strings.Builder
	for _, p := range m.MultiContent {
		b.WriteString(p.Text)
	}
	return b.String()
}

// match returns the index of the first matching rule (-1 for the default)
// and its reply.
func (s *Script) match(c conversation) (int, Reply) {
	for i, r := range s.rules {
		if r.task != nil && !r.task.MatchString(c.task) {
			continue
		}
		if r.last != nil && !r.last.MatchString(c.last) {
			continue
		}
		if r.system != nil && !r.system.MatchString(c.system) {
			continue
		}
		if r.when.Turn != 0 && r.when.Turn != c.turn {
			continue
		}
		reply := r.reply
		if r.last != nil && r.last.NumSubexp() > 0 {
			// {{last.N}} in the reply is the N-th group of "last"'s match.
			m := r.last.FindStringSubmatch(c.last)
			for n := len(m) - 1; n >= 1; n-- {
				ph := fmt.Sprintf("{{last.%d}}", n)
				reply.Text = strings.ReplaceAll(reply.Text, ph, m[n])
				reply.Code = strings.ReplaceAll(reply.Code, ph, m[n])
			}
		}
		return i, reply
	}
	return -1, s.deflt
}

func (s *Script) shouldFail(idx int, f *Fail) bool {
	if f.Times == 0 {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed[idx] >= f.Times {
		return false
	}
	s.failed[idx]++
	return true
}

var callSeq atomic.Int64

// answer is a reply rendered for one request.
type answer struct {
	finish       string // the finish_reason the script asks for ("" = stop or tool_calls)
	text         string
	code         string // empty in fenced mode or without code
	callID       string
	promptTokens int
	cachedTokens int
	outputTokens int
}

func (s *Script) answer(r Reply, c conversation, fenced bool) answer {
	a := answer{text: r.Text, finish: r.Finish}
	if r.Code != "" {
		if fenced {
			if a.text != "" {
				a.text += "\n\n"
			}
			a.text += "```python\n" + strings.TrimRight(r.Code, "\n") + "\n```"
		} else {
			a.code = r.Code
			a.callID = fmt.Sprintf("call_scripted_%d", callSeq.Add(1))
		}
	}
	a.promptTokens = promptTokens(r, c)
	a.cachedTokens = cachedTokens(a.promptTokens, c)
	if r.Usage != nil {
		a.outputTokens = r.Usage.CompletionTokens
	} else {
		a.outputTokens = estimate(len(a.text) + len(a.arguments()))
	}
	return a
}

// promptTokens is the reply's scripted prompt tokens, or the request's estimate.
func promptTokens(r Reply, c conversation) int {
	if r.Usage != nil {
		return r.Usage.PromptTokens
	}
	return estimate(c.chars)
}

// cachedTokens is the share of prompt tokens that the cached prefix of the request makes up.
func cachedTokens(prompt int, c conversation) int {
	if c.chars == 0 {
		return 0
	}
	return int(int64(prompt) * int64(c.cached) / int64(c.chars))
}

// estimate is the 4-characters-per-token rule of thumb, rounded up.
func estimate(chars int) int { return (chars + 3) / 4 }

func (a answer) arguments() string {
	if a.code == "" {
		return ""
	}
	b, _ := json.Marshal(map[string]string{"code": a.code})
	return string(b)
}

func (a answer) finishReason() *string {
	r := "stop"
	if a.code != "" {
		r = "tool_calls"
	}
	if a.finish != "" {
		r = a.finish
	}
	return &r
}

func (a answer) usage() *wireUsage {
	return &wireUsage{PromptTokens: a.promptTokens, CompletionTokens: a.outputTokens, TotalTokens: a.promptTokens + a.outputTokens,
		PromptTokensDetails: &wirePromptDetails{CachedTokens: a.cachedTokens}}
}

func (a answer) response(model string) wireChunk {
	msg := &wireMessage{Role: "assistant"}
	if text := a.text; text != "" || a.code == "" {
		msg.Content = &text // null beside tool calls, as OpenAI sends it
	}
	if a.code != "" {
		msg.ToolCalls = []wireToolCall{{
			ID: a.callID, Type: "function",
			Function: wireFunction{Name: "python", Arguments: a.arguments()},
		}}
	}
	return wireChunk{
		ID: "chatcmpl-scripted", Object: "chat.completion", Model: model,
		Choices: []wireChoice{{Message: msg, FinishReason: a.finishReason()}},
		Usage:   a.usage(),
	}
}

// stream writes the answer as server-sent events, in small pieces so that
// clients really have to reassemble text and tool-call arguments. With cut,
// the connection is aborted after the first content chunk.
func (h *handler) stream(w http.ResponseWriter, model string, a answer, includeUsage, cut bool) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "server_error", "", errNoFlush.Error())
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	send := func(delta *wireMessage, finish *string) {
		writeEvent(w, wireChunk{
			ID: "chatcmpl-scripted", Object: "chat.completion.chunk", Model: model,
			Choices: []wireChoice{{Delta: delta, FinishReason: finish}},
		})
		flusher.Flush()
	}
	empty := ""
	send(&wireMessage{Role: "assistant", Content: &empty}, nil)
	for _, piece := range pieces(a.text, 16) {
		send(&wireMessage{Content: &piece}, nil)
		if cut {
			// Abort the connection without the chunked terminator: the client
			// sees an unexpected EOF mid-reply, as when a proxy drops it.
			panic(http.ErrAbortHandler)
		}
	}
	if a.code != "" {
		zero := 0
		send(&wireMessage{ToolCalls: []wireToolCall{{
			Index: &zero, ID: a.callID, Type: "function", Function: wireFunction{Name: "python"},
		}}}, nil)
		for _, piece := range pieces(a.arguments(), 24) {
			send(&wireMessage{ToolCalls: []wireToolCall{{
				Index: &zero, Function: wireFunction{Arguments: piece},
			}}}, nil)
		}
	}
	send(&wireMessage{}, a.finishReason())
	if includeUsage {
		writeEvent(w, wireChunk{
			ID: "chatcmpl-scripted", Object: "chat.completion.chunk", Model: model,
			Choices: []wireChoice{}, Usage: a.usage(),
		})
	}
	w.Write([]byte("data: [DONE]\n\n"))
	flusher.Flush()
}

func writeEvent(w http.ResponseWriter, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("scripted: marshal chunk: %v", err))
	}
	w.Write([]byte("data: "))
	w.Write(data)
	w.Write([]byte("\n\n"))
}

// pieces splits s into chunks of about n bytes without splitting a rune.
func pieces(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		i := min(n, len(s))
		for i < len(s) && !utf8.RuneStart(s[i]) {
			i++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}
