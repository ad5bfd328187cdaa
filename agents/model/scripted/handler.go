package scripted

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// maxRequestBytes bounds a request body; a real conversation at 128k tokens
// is well under this.
const maxRequestBytes = 32 << 20

// Handler serves /v1/chat/completions and /v1/models from the script.
// It logs nothing; [Serve] uses a handler that logs to its logger.
func (s *Script) Handler() http.Handler {
	return &handler{s: s, log: slog.New(slog.DiscardHandler)}
}

type handler struct {
	s   *Script
	log *slog.Logger
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case path == "/v1/chat/completions" && r.Method == http.MethodPost:
		h.chat(w, r)
	case path == "/v1/models" && r.Method == http.MethodGet:
		h.models(w)
	case path == "/v1/chat/completions" || path == "/v1/models":
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "", fmt.Sprintf("method %s not allowed on %s", r.Method, path))
	default:
		writeError(w, http.StatusNotFound, "invalid_request_error", "unknown_url", fmt.Sprintf("unknown path %s; the scripted model serves /v1/chat/completions and /v1/models", r.URL.Path))
	}
}

func (h *handler) models(w http.ResponseWriter) {
	writeJSON(w, http.StatusOK, wireModels{Object: "list", Data: []wireModel{{
		ID: h.s.model, Object: "model", OwnedBy: "arbor-scripted",
	}}})
}

func (h *handler) chat(w http.ResponseWriter, r *http.Request) {
	var req openai.ChatCompletionRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "read request body: "+err.Error())
		return
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "request body is not a valid chat completion request: "+err.Error())
		return
	}
	if len(req.Messages) == 0 {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "'messages' must be a non-empty array")
		return
	}
	conv := summarize(req.Messages)
	conv.cached = h.s.cache.request(req.Messages, conv)
	idx, reply := h.s.match(conv)
	prompt := promptTokens(reply, conv)
	h.s.observe(Request{System: conv.system, Task: conv.task, Last: conv.last, Model: req.Model, Tools: len(req.Tools),
		Messages: req.Messages, Chars: conv.chars, CachedChars: conv.cached, PromptTokens: prompt, CachedTokens: cachedTokens(prompt, conv)})
	h.log.Debug("scripted reply", "rule", idx+1, "turn", conv.turn, "stream", req.Stream)

	if reply.DelayMS > 0 {
		t := time.NewTimer(time.Duration(reply.DelayMS) * time.Millisecond)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if f := reply.Fail; f != nil && h.s.shouldFail(idx, f) {
		h.fail(w, f, req.Stream, conv)
		return
	}
	a := h.s.answer(reply, conv, len(req.Tools) == 0)
	if req.Stream {
		includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
		h.stream(w, req.Model, a, includeUsage, false)
		return
	}
	writeJSON(w, http.StatusOK, a.response(req.Model))
}

func (h *handler) fail(w http.ResponseWriter, f *Fail, stream bool, conv conversation) {
	switch {
	case f.Garbage:
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "<html><body>502 Bad Gateway (scripted garbage)</body></html>\n")
	case f.Cut:
		a := answer{text: "this reply is cut off mid-stream and never finishes", promptTokens: 1}
		if stream {
			h.stream(w, "", a, false, true)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, `{"id":"chatcmpl-cut","choices":[{"index":0,"message":{"role":"assis`)
		panic(http.ErrAbortHandler)
	default:
		typ, msg := f.Type, f.Message
		if typ == "" {
			typ = defaultErrorType(f.Status)
		}
		if msg == "" {
			msg = defaultErrorMessage(f, conv)
		}
		writeError(w, f.Status, typ, f.Code, msg)
	}
}

func defaultErrorType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	default:
		return "invalid_request_error"
	}
}

func defaultErrorMessage(f *Fail, conv conversation) string {
	switch {
	case f.Code == "context_length_exceeded":
		return fmt.Sprintf("This model's maximum context length is 128000 tokens. However, your messages resulted in %d tokens. (scripted)", 128000+conv.chars/4)
	case f.Status == http.StatusTooManyRequests:
		return "Rate limit reached; please try again shortly. (scripted)"
	case f.Status >= 500:
		return "The server had an error while processing your request. (scripted)"
	default:
		return fmt.Sprintf("scripted failure with status %d", f.Status)
	}
}

// errorBody is the OpenAI error envelope; go-openai and other clients parse it.
type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	var b errorBody
	b.Error.Message, b.Error.Type = msg, typ
	if code != "" {
		b.Error.Code = &code
	}
	writeJSON(w, status, b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		// Only our own types reach here; a failure is a bug worth seeing.
		panic(fmt.Sprintf("scripted: marshal response: %v", err))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(data, '\n'))
}

var errNoFlush = errors.New("response writer cannot flush")
