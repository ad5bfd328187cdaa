// Package scripted is an OpenAI-compatible chat completions server that
// answers from a JSON script instead of a model, so tests and the demo drive
// the real client code path end to end.
//
// Call [Load] (or [Parse]) to read a script, then [Serve] to listen on a
// loopback port, or mount [Script.Handler] in an httptest server:
//
//	s, err := scripted.Load("demo.json")
//	url, wait, err := scripted.Serve(ctx, "127.0.0.1:0", s, logger)
//	// point a model client at url ("http://127.0.0.1:PORT/v1"); cancel ctx, then wait()
//
// # Script format
//
//	{
//	  "model": "scripted",                      // optional id listed by /v1/models
//	  "rules": [
//	    {"when": {"task": "rename .*Foo", "turn": 1}, "code": "print(1)"},
//	    {"when": {"last": "Traceback"}, "text": "the cell failed; stopping"},
//	    {"when": {"task": "flaky"}, "fail": {"status": 500, "times": 2}, "text": "ok"}
//	  ],
//	  "default": {"text": "nothing scripted for this"}
//	}
//
// A rule matches when every condition it sets holds: "task" (a Go regexp)
// matches the conversation's first user message, "last" the newest message
// (user text or tool output), and "turn" equals the number of assistant
// messages so far + 1. The first matching rule answers; without a match the
// "default" reply answers. Rules are numbered from 1 in error messages. In the
// reply of a rule whose "last" has groups, {{last.N}} is the N-th group of its
// match (a refiner's reply can cite a seq from the prompt it was given, say).
//
// A reply carries "text", "code" (sent as a call of the python tool; when the
// request offers no tools it is sent as a ```python block inside the text
// instead), and "usage" ({"prompt_tokens": N, "completion_tokens": N};
// otherwise estimated at 4 characters per token). For tests of client
// robustness a reply may also carry:
//
//   - "delay_ms": N — wait N milliseconds before answering.
//   - "finish": "length" or "content_filter" — the finish_reason to answer with (a reply cut
//     at its token limit, a refusal) instead of stop or tool_calls.
//   - "fail": {"status": 429|500|..., "message": "...", "type": "...",
//     "code": "...", "times": N} — answer with an OpenAI-style JSON error
//     instead. {"cut": true, "times": N} cuts a stream after the first
//     content chunk (a non-stream request gets a truncated body).
//     {"garbage": true, "times": N} answers 200 with a body that is not JSON.
//     "times" is how many matching requests fail before the reply is given
//     normally (counted per rule over the script's lifetime, across all
//     conversations); 0 means every one fails. Use status 400 with code
//     "context_length_exceeded" to exercise context overflow handling.
//
// Unknown fields are refused, so a typo in a script fails at load time.
//
// # Prompt cache
//
// Like a provider's prompt cache, the server reports in usage.prompt_tokens_details
// .cached_tokens how much of each request it has seen before, so cached tokens measure how
// stable a client keeps the prefix of its requests, through the real client path. It is a
// measurement, not a guess: per conversation (the system prompt and the first user message;
// changing either starts a new one), the request's messages are compared with the previous
// request's from the start, byte for byte — whole messages while they are identical (role,
// text, tool calls, the call a tool message answers), then whole 256-character blocks of the
// first message that differs. The characters so matched, as a share of the characters the
// prompt tokens count, give the cached share of the prompt tokens (a scripted "usage"
// included). Only hashes of the latest request of the 256 most recently used conversations
// are kept. [Script.Observe] sees each request's messages and both counts.
package scripted

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sync"

	openai "github.com/sashabaranov/go-openai"
)

// Script is a parsed script. It is safe for concurrent use; it keeps the
// per-rule failure counters that "fail.times" needs.
type Script struct {
	name     string
	model    string
	rules    []rule
	deflt    Reply
	mu       sync.Mutex
	failed   map[int]int // rule index (-1 = default) → failures served
	observer func(Request)
	cache    *promptCache
}

// Request is what an observer sees of one chat request.
type Request struct {
	System string // the system messages, joined
	Task   string // the first user message
	Last   string // the newest message
	Model  string // the model id asked for
	Tools  int    // how many tools the request offers (none in fenced tool mode)
	// Messages are the request's messages as the client sent them.
	Messages []openai.ChatCompletionMessage
	// Chars is what the prompt tokens count: the characters of every message's text and
	// tool-call arguments. CachedChars is how many of them, from the start, repeat the
	// previous request of the same conversation byte for byte (see the package doc).
	Chars, CachedChars int
	// PromptTokens and CachedTokens are the usage reported for the request (what a
	// failing reply would have reported).
	PromptTokens, CachedTokens int
}

// Observe calls f with every chat request the script answers (tests read what a client sent).
func (s *Script) Observe(f func(Request)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.observer = f
}

func (s *Script) observe(req Request) {
	s.mu.Lock()
	f := s.observer
	s.mu.Unlock()
	if f != nil {
		f(req)
	}
}

// When holds a rule's conditions. Unset conditions always hold.
type When struct {
	Task string `json:"task,omitempty"`
	Turn int    `json:"turn,omitempty"`
	Last string `json:"last,omitempty"`
	// System matches the system prompt: what the harness put into the context, say.
	System string `json:"system,omitempty"`
}

// Reply is what a rule (or the default) answers.
type Reply struct {
	Text    string `json:"text,omitempty"`
	Code    string `json:"code,omitempty"`
	Usage   *Usage `json:"usage,omitempty"`
	DelayMS int    `json:"delay_ms,omitempty"`
	Fail    *Fail  `json:"fail,omitempty"`
	// Finish is the finish_reason to answer with instead of stop or tool_calls: "length",
	// "content_filter" (a refusal).
	Finish string `json:"finish,omitempty"`
}

// Usage overrides the estimated token counts of a reply.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// Fail makes a reply fail the first Times matching requests (0 = always).
// Exactly one of Status, Cut and Garbage is set.
type Fail struct {
	Status  int    `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
	Type    string `json:"type,omitempty"`
	Code    string `json:"code,omitempty"`
	Cut     bool   `json:"cut,omitempty"`
	Garbage bool   `json:"garbage,omitempty"`
	Times   int    `json:"times,omitempty"`
}

type ruleJSON struct {
	When *When `json:"when"`
	Reply
}

type rule struct {
	when   When
	task   *regexp.Regexp
	last   *regexp.Regexp
	system *regexp.Regexp
	reply  Reply
}

type scriptJSON struct {
	Model   string            `json:"model"`
	Rules   []json.RawMessage `json:"rules"`
	Default json.RawMessage   `json:"default"`
}

// Load reads and parses the script file at path.
func Load(path string) (*Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read script: %w", err)
	}
	return Parse(data, filepath.Base(path))
}

// Parse parses a script; name is used in error messages. Errors name the
// script, the rule (numbered from 1) and what is wrong.
func Parse(data []byte, name string) (*Script, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("script %s: "+format, append([]any{name}, args...)...)
	}
	var top scriptJSON
	if err := decodeStrict(data, &top); err != nil {
		return nil, fail("%v", describeJSONError(data, err))
	}
	s := &Script{name: name, model: top.Model, failed: map[int]int{}, cache: newPromptCache()}
	if s.model == "" {
		s.model = "scripted"
	}
	for i, raw := range top.Rules {
		var rj ruleJSON
		if err := decodeStrict(raw, &rj); err != nil {
			return nil, fail("rule %d: %v", i+1, describeJSONError(nil, err))
		}
		r, err := compileRule(rj)
		if err != nil {
			return nil, fail("rule %d: %v", i+1, err)
		}
		s.rules = append(s.rules, r)
	}
	if len(top.Default) > 0 && !bytes.Equal(bytes.TrimSpace(top.Default), []byte("null")) {
		if err := decodeStrict(top.Default, &s.deflt); err != nil {
			return nil, fail("default: %v", describeJSONError(nil, err))
		}
		if err := s.deflt.validate(); err != nil {
			return nil, fail("default: %v", err)
		}
	} else {
		s.deflt = Reply{Text: "scripted model: no rule matched and the script has no default"}
	}
	return s, nil
}

func compileRule(rj ruleJSON) (rule, error) {
	var r rule
	if rj.When != nil {
		r.when = *rj.When
	}
	var err error
	if r.task, err = compileOptional(r.when.Task); err != nil {
		return r, fmt.Errorf("when.task: %w", err)
	}
	if r.last, err = compileOptional(r.when.Last); err != nil {
		return r, fmt.Errorf("when.last: %w", err)
	}
	if r.system, err = compileOptional(r.when.System); err != nil {
		return r, fmt.Errorf("when.system: %w", err)
	}
	if r.when.Turn < 0 {
		return r, fmt.Errorf("when.turn: %d is negative; turns count from 1", r.when.Turn)
	}
	r.reply = rj.Reply
	return r, r.reply.validate()
}

func compileOptional(expr string) (*regexp.Regexp, error) {
	if expr == "" {
		return nil, nil
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("invalid regexp: %w", err)
	}
	return re, nil
}

func (r Reply) validate() error {
	if r.Text == "" && r.Code == "" && r.Fail == nil {
		return errors.New(`empty reply: set "text", "code" or "fail"`)
	}
	if r.DelayMS < 0 {
		return fmt.Errorf("delay_ms: %d is negative", r.DelayMS)
	}
	if u := r.Usage; u != nil && (u.PromptTokens < 0 || u.CompletionTokens < 0) {
		return errors.New("usage: token counts must not be negative")
	}
	if f := r.Fail; f != nil {
		kinds := 0
		if f.Status != 0 {
			kinds++
			if f.Status < 400 || f.Status > 599 {
				return fmt.Errorf("fail.status: %d is not an HTTP error status (400-599)", f.Status)
			}
		}
		if f.Cut {
			kinds++
		}
		if f.Garbage {
			kinds++
		}
		if kinds != 1 {
			return errors.New(`fail: set exactly one of "status", "cut" or "garbage"`)
		}
		if f.Times < 0 {
			return fmt.Errorf("fail.times: %d is negative", f.Times)
		}
		if f.Times > 0 && r.Text == "" && r.Code == "" {
			return errors.New(`fail.times: after the failures the reply has nothing to say; set "text" or "code"`)
		}
	}
	return nil
}

// decodeStrict decodes exactly one JSON value, refusing unknown fields.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// describeJSONError makes decoding errors readable; with data it adds the
// line number (only meaningful for the whole file, not for a rule's slice).
func describeJSONError(data []byte, err error) error {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
		if te.Field != "" {
			err = fmt.Errorf("%s: expected %s, got JSON %s", te.Field, te.Type, te.Value)
		}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("unexpected end of JSON")
	}
	if off >= 0 && data != nil {
		return fmt.Errorf("line %d: %v", lineOf(data, off), err)
	}
	return err
}

func lineOf(data []byte, off int64) int {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	return bytes.Count(data[:off], []byte("\n")) + 1
}
