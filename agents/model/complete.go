package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Complete streams one assistant reply (stream=true with
// stream_options.include_usage), calling onDelta (may be nil) with text as it
// arrives. Tool calls are accumulated from the stream deltas. Usage comes
// from the server, or is estimated at 4 characters per token when it sends
// none. Failures worth retrying are retried with backoff and jitter and
// counted in Reply.Retries; see the package doc. Errors name the endpoint,
// never the key; errors.Is(err, ErrContextOverflow) reports an overflow.
func (c *Client) Complete(ctx context.Context, req Request, onDelta func(string)) (*Reply, error) {
	if len(req.Messages) == 0 {
		return nil, fmt.Errorf("model %s: request has no messages", c.cfg.Name)
	}
	oreq, err := c.chatRequest(req)
	if err != nil {
		return nil, fmt.Errorf("model %s: build request: %w", c.cfg.Name, err)
	}
	maxRetries := max(c.cfg.MaxRetries, 0)
	for retries := 0; ; retries++ {
		hint := new(retryHint)
		reply, timedOut, err := c.attempt(withRetryHint(ctx, hint), oreq, onDelta)
		if err == nil {
			reply.Retries = retries
			c.log.Debug("model call done", "input_tokens", reply.Usage.InputTokens, "cached_input_tokens", reply.Usage.CachedInputTokens, "output_tokens", reply.Usage.OutputTokens,
				"estimated", reply.Usage.Estimated, "tool_calls", len(reply.ToolCalls), "finish", reply.FinishReason, "retries", retries)
			return reply, nil
		}
		if ctx.Err() != nil {
			return nil, c.abandoned(ctx, "")
		}
		if oreq.StreamOptions != nil && rejectsStreamOptions(err) {
			// Some servers (older Azure API versions, some proxies) refuse
			// stream_options. Drop it for good; usage is then estimated.
			c.log.Info("endpoint refuses stream_options; continuing without server-reported usage")
			c.noStreamOptions.Store(true)
			oreq.StreamOptions = nil
			retries--
			continue
		}
		e := c.classify(err, timedOut)
		if !e.retry || retries >= maxRetries {
			if retries > 0 {
				e.msg += fmt.Sprintf(" (gave up after %d retries)", retries)
			}
			c.log.Debug("model call failed", "err", e.msg, "retries", retries)
			return nil, e
		}
		delay := c.retryDelay(retries+1, hint.after)
		c.log.Warn("model call failed; retrying", "err", e.msg, "retry", retries+1, "delay", delay)
		if req.OnRetry != nil {
			req.OnRetry(retries+1, e)
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, c.abandoned(ctx, " while waiting to retry ("+e.msg+")")
		}
	}
}

// abandoned reports a call stopped by the caller's ctx. errors.Is works for
// both ctx.Err() and a custom cancellation cause.
func (c *Client) abandoned(ctx context.Context, when string) error {
	if cause := context.Cause(ctx); cause != ctx.Err() {
		return fmt.Errorf("model %s: call abandoned%s: %w: %w", c.cfg.Name, when, ctx.Err(), cause)
	}
	return fmt.Errorf("model %s: call abandoned%s: %w", c.cfg.Name, when, ctx.Err())
}

// attempt makes one streaming request under the per-attempt timeout.
func (c *Client) attempt(ctx context.Context, oreq openai.ChatCompletionRequest, onDelta func(string)) (_ *Reply, timedOut bool, _ error) {
	actx, cancel := context.WithTimeoutCause(ctx, c.cfg.Timeout, errAttemptTimeout)
	defer cancel()
	reply, err := c.stream(actx, oreq, onDelta)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(actx), errAttemptTimeout) {
		return nil, true, err
	}
	return reply, false, err
}

var errAttemptTimeout = errors.New("model call attempt timed out")

func (c *Client) stream(ctx context.Context, oreq openai.ChatCompletionRequest, onDelta func(string)) (*Reply, error) {
	s, err := c.api.CreateChatCompletionStream(ctx, oreq)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var acc accumulator
	for {
		chunk, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		acc.add(chunk, onDelta)
	}
	if acc.finish == "" {
		if acc.events == 0 {
			if ct := s.Header().Get("Content-Type"); !strings.Contains(ct, "event-stream") {
				return nil, &garbageError{fmt.Sprintf("response has content type %q and holds no stream events", ct)}
			}
		}
		return nil, fmt.Errorf("%w (after %d events)", errStreamCut, acc.events)
	}
	return c.finish(oreq, &acc), nil
}

// finish turns accumulated deltas into a Reply.
func (c *Client) finish(oreq openai.ChatCompletionRequest, acc *accumulator) *Reply {
	r := &Reply{Text: acc.text.String(), FinishReason: acc.finish}
	outChars := len(r.Text)
	for _, tc := range acc.calls {
		outChars += len(tc.args.String())
		if tc.name != ToolName {
			c.log.Warn("model called an unknown tool; running its code as python", "tool", tc.name)
		}
		id := tc.id
		if id == "" {
			id = newCallID("call_arbor_")
		}
		r.ToolCalls = append(r.ToolCalls, ToolCall{ID: id, Code: codeFromArgs(tc.args.String())})
	}
	if c.cfg.ToolMode == ToolModeFenced {
		var calls []ToolCall
		r.Text, calls = parseFenced(r.Text)
		r.ToolCalls = append(r.ToolCalls, calls...)
	}
	if u := acc.usage; u != nil && (u.PromptTokens > 0 || u.CompletionTokens > 0) {
		r.Usage = Usage{InputTokens: int64(u.PromptTokens), OutputTokens: int64(u.CompletionTokens)}
		if d := u.PromptTokensDetails; d != nil {
			r.Usage.CachedInputTokens = int64(min(d.CachedTokens, u.PromptTokens))
		}
	} else {
		r.Usage = Usage{
			InputTokens:  int64(estimateTokens(estimateRequestChars(oreq))),
			OutputTokens: int64(estimateTokens(outChars)),
			Estimated:    true,
		}
	}
	r.Usage.CostUSD = c.cfg.cost(r.Usage.InputTokens, r.Usage.OutputTokens)
	return r
}

func estimateTokens(chars int) int { return (chars + 3) / 4 }

// codeFromArgs extracts the code argument. Models sometimes name the field
// differently, send the code as a JSON string or bare; the kernel then reports
// any syntax error to the model, which is better than dropping the call.
func codeFromArgs(args string) string {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(args), &obj); err == nil {
		raw, ok := obj["code"]
		if !ok && len(obj) == 1 {
			for _, v := range obj {
				raw = v
			}
		}
		var code string
		if json.Unmarshal(raw, &code) == nil {
			return code
		}
	}
	var s string
	if err := json.Unmarshal([]byte(args), &s); err == nil {
		return s
	}
	return args
}

// accumulator collects one streamed choice.
type accumulator struct {
	events int
	text   strings.Builder
	calls  []*callAcc
	byIdx  map[int]*callAcc
	finish string
	usage  *openai.Usage
}

type callAcc struct {
	id, name string
	args     strings.Builder
}

func (a *accumulator) add(chunk openai.ChatCompletionStreamResponse, onDelta func(string)) {
	a.events++
	if chunk.Usage != nil {
		a.usage = chunk.Usage
	}
	for _, ch := range chunk.Choices {
		if ch.Index != 0 {
			continue // we ask for one choice; ignore any others
		}
		if d := ch.Delta.Content; d != "" {
			a.text.WriteString(d)
			if onDelta != nil {
				onDelta(d)
			}
		}
		for _, tc := range ch.Delta.ToolCalls {
			a.addCall(tc)
		}
		if ch.FinishReason != "" {
			a.finish = string(ch.FinishReason)
		}
	}
}

// addCall merges a tool-call delta. OpenAI sends an index with every delta;
// some servers send whole calls without one, told apart by their IDs.
func (a *accumulator) addCall(tc openai.ToolCall) {
	var cur *callAcc
	switch {
	case tc.Index != nil:
		if a.byIdx == nil {
			a.byIdx = map[int]*callAcc{}
		}
		cur = a.byIdx[*tc.Index]
		if cur == nil {
			cur = &callAcc{}
			a.byIdx[*tc.Index] = cur
			a.calls = append(a.calls, cur)
		}
	case len(a.calls) > 0 && (tc.ID == "" || tc.ID == a.calls[len(a.calls)-1].id):
		cur = a.calls[len(a.calls)-1]
	default:
		cur = &callAcc{}
		a.calls = append(a.calls, cur)
	}
	if tc.ID != "" {
		cur.id = tc.ID
	}
	if tc.Function.Name != "" {
		cur.name = tc.Function.Name
	}
	cur.args.WriteString(tc.Function.Arguments)
}
