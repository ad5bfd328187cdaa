package model

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
)

// endpointError is what Complete returns for a failed call: a message that
// names the endpoint and the failure, with the API key redacted, and the
// cause for errors.Is/As (including ErrContextOverflow).
type endpointError struct {
	msg      string
	cause    error
	retry    bool
	overflow bool
}

func (e *endpointError) Error() string { return e.msg }

func (e *endpointError) Unwrap() []error {
	if e.overflow {
		return []error{ErrContextOverflow, e.cause}
	}
	return []error{e.cause}
}

// errStreamCut marks a stream that ended before the reply finished.
var errStreamCut = errors.New("stream ended before the reply finished")

// garbageError marks a response that is not a chat completion stream.
type garbageError struct{ what string }

func (e *garbageError) Error() string { return e.what }

// classify turns an attempt's error into an endpointError, deciding whether
// it is worth retrying. timedOut says the attempt hit Config.Timeout.
func (c *Client) classify(err error, timedOut bool) *endpointError {
	ep := "model endpoint " + c.cfg.BaseURL
	e := &endpointError{cause: err}
	var (
		apiErr  *openai.APIError
		reqErr  *openai.RequestError
		urlErr  *url.Error
		garbage *garbageError
		synErr  *json.SyntaxError
		typErr  *json.UnmarshalTypeError
	)
	switch {
	case timedOut:
		e.msg, e.retry = fmt.Sprintf("%s timed out after %s", ep, c.cfg.Timeout), true
	case errors.As(err, &apiErr):
		e.overflow = apiErr.HTTPStatusCode != http.StatusTooManyRequests &&
			(codeIs(apiErr.Code, "context_length_exceeded") || overflowText(apiErr.Message))
		e.retry = !e.overflow && retryStatus(apiErr.HTTPStatusCode, apiErr.Type)
		e.msg = fmt.Sprintf("%s %s: %s", ep, statusPhrase(apiErr.HTTPStatusCode, apiErr.HTTPStatus), apiErr.Message)
	case errors.As(err, &reqErr):
		body := strings.TrimSpace(string(reqErr.Body))
		e.overflow = reqErr.HTTPStatusCode != http.StatusTooManyRequests && overflowText(body)
		e.retry = !e.overflow && retryStatus(reqErr.HTTPStatusCode, "")
		e.msg = fmt.Sprintf("%s %s: %s", ep, statusPhrase(reqErr.HTTPStatusCode, reqErr.HTTPStatus), snippet(body))
	case isTLSErr(err):
		e.msg = fmt.Sprintf("%s refused: TLS failed (check the URL's scheme and the server's certificate): %v", ep, unwrapURL(err))
	case errors.As(err, &urlErr):
		// Connection-level failure before any response: refused, reset, DNS.
		e.msg, e.retry = fmt.Sprintf("%s unreachable: %v", ep, urlErr.Err), true
	case errors.As(err, &garbage), errors.Is(err, openai.ErrTooManyEmptyStreamMessages):
		e.msg = fmt.Sprintf("%s answered garbage: %v", ep, err)
	case errors.As(err, &synErr), errors.As(err, &typErr):
		e.msg = fmt.Sprintf("%s answered garbage: a stream event is not a chat completion chunk: %v", ep, err)
	case errors.Is(err, errStreamCut), errors.Is(err, io.ErrUnexpectedEOF), isNetErr(err):
		e.msg, e.retry = fmt.Sprintf("%s cut the stream mid-reply: %v", ep, err), true
	default:
		e.msg = fmt.Sprintf("%s failed: %v", ep, err)
	}
	if e.overflow {
		e.msg = fmt.Sprintf("%s: context window exceeded (%d tokens configured): %s", ep, c.cfg.ContextWindow, apiMessage(err))
	}
	if c.redact != nil {
		e.msg = c.redact.Replace(e.msg)
	}
	return e
}

func apiMessage(err error) string {
	var apiErr *openai.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Message
	}
	var reqErr *openai.RequestError
	if errors.As(err, &reqErr) {
		return snippet(string(reqErr.Body))
	}
	return err.Error()
}

// rejectsStreamOptions spots a 400 that names stream_options.
func rejectsStreamOptions(err error) bool {
	var apiErr *openai.APIError
	if errors.As(err, &apiErr) && apiErr.HTTPStatusCode == http.StatusBadRequest {
		m := strings.ToLower(apiErr.Message)
		return strings.Contains(m, "stream_options") || strings.Contains(m, "include_usage")
	}
	var reqErr *openai.RequestError
	if errors.As(err, &reqErr) && reqErr.HTTPStatusCode == http.StatusBadRequest {
		return strings.Contains(strings.ToLower(string(reqErr.Body)), "stream_options")
	}
	return false
}

// isTLSErr reports certificate and handshake failures, which retrying
// cannot fix.
func isTLSErr(err error) bool {
	var (
		verr *tls.CertificateVerificationError
		rerr tls.RecordHeaderError
		uerr x509.UnknownAuthorityError
		herr x509.HostnameError
		cerr x509.CertificateInvalidError
	)
	return errors.As(err, &verr) || errors.As(err, &rerr) || errors.As(err, &uerr) ||
		errors.As(err, &herr) || errors.As(err, &cerr)
}

func unwrapURL(err error) error {
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return urlErr.Err
	}
	return err
}

func isNetErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne)
}

func codeIs(code any, want string) bool {
	s, ok := code.(string)
	return ok && s == want
}

// overflowText recognises context-length errors across servers: OpenAI and
// vLLM ("maximum context length"), llama.cpp ("exceeds the available context
// size"), Anthropic-compatible proxies ("prompt is too long"), and others.
func overflowText(msg string) bool {
	m := strings.ToLower(msg)
	for _, s := range []string{
		"context_length_exceeded", "maximum context length", "context length", "context window",
		"available context size", "prompt is too long", "input is too long", "reduce the length of the messages",
	} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// retryStatus says whether a failure with this HTTP status (0 = an error
// event inside a 200 stream) is worth another attempt.
func retryStatus(status int, errType string) bool {
	switch {
	case status == 0:
		return errType != "invalid_request_error"
	case status == http.StatusRequestTimeout, status == http.StatusConflict,
		status == http.StatusTooEarly, status == http.StatusTooManyRequests:
		return true
	default:
		return status >= 500
	}
}

func statusPhrase(code int, status string) string {
	if code == 0 {
		return "sent an error mid-stream"
	}
	if status == "" {
		status = fmt.Sprintf("%d %s", code, http.StatusText(code))
	}
	return "answered " + status
}

func snippet(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		i := 300
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i] + "…"
	}
	if s == "" {
		s = "(empty body)"
	}
	return s
}
