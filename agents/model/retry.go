package model

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxRetryAfter caps how long a server's Retry-After can hold a call: a
// session waiting an hour inside one model call looks hung; failing lets the
// turn loop report it.
const maxRetryAfter = time.Minute

// retryDelay is the delay before retry n (from 1): Backoff doubled per retry
// and capped, with the upper half jittered so that concurrent sessions that
// hit the same rate limit spread out; never shorter than the server's
// Retry-After (capped).
func (c *Client) retryDelay(n int, retryAfter time.Duration) time.Duration {
	d := c.cfg.Backoff
	for i := 1; i < n && d < maxBackoff; i++ {
		d *= 2
	}
	d = min(d, maxBackoff)
	d = d/2 + rand.N(d/2+1)
	return max(d, min(retryAfter, maxRetryAfter))
}

// retryHint carries a Retry-After from the transport, which sees response
// headers, to the retry loop; go-openai's errors do not keep headers.
type retryHint struct{ after time.Duration }

type retryHintKey struct{}

func withRetryHint(ctx context.Context, h *retryHint) context.Context {
	return context.WithValue(ctx, retryHintKey{}, h)
}

// hintTransport records Retry-After on throttling responses. RoundTrip runs
// on the goroutine that called Do, so the hint needs no lock.
type hintTransport struct{ base http.RoundTripper }

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// wrapped transport.
func (t hintTransport) CloseIdleConnections() {
	if ci, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

func (t hintTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err == nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
		if h, ok := r.Context().Value(retryHintKey{}).(*retryHint); ok {
			h.after = parseRetryAfter(resp.Header, time.Now())
		}
	}
	if err == nil && resp.Body != nil {
		resp.Body = &doneDrainer{ReadCloser: resp.Body}
	}
	return resp, err
}

// doneDrainer reads a stream's body to its end on Close once the stream said data: [DONE]:
// the stream reader stops there, and a body closed before its end (the chunked terminator may
// arrive a moment after [DONE]) takes its connection with it, so the next call would dial
// again. A body closed mid-stream is closed as it is: draining it could wait on the model.
type doneDrainer struct {
	io.ReadCloser
	tail []byte // the last bytes read, to see [DONE]
}

func (d *doneDrainer) Read(p []byte) (int, error) {
	n, err := d.ReadCloser.Read(p)
	if n > 0 {
		d.tail = append(d.tail, p[:n]...)
		if len(d.tail) > 64 {
			d.tail = append(d.tail[:0], d.tail[len(d.tail)-64:]...)
		}
	}
	return n, err
}

func (d *doneDrainer) Close() error {
	if bytes.HasSuffix(bytes.TrimRight(d.tail, "\r\n "), []byte("data: [DONE]")) {
		io.CopyN(io.Discard, d.ReadCloser, 4<<10)
	}
	return d.ReadCloser.Close()
}

// parseRetryAfter reads retry-after-ms (OpenAI, Azure) or Retry-After in
// seconds or as an HTTP date. Unparsable or absent means 0.
func parseRetryAfter(h http.Header, now time.Time) time.Duration {
	if ms := strings.TrimSpace(h.Get("Retry-After-Ms")); ms != "" {
		if v, err := strconv.ParseFloat(ms, 64); err == nil && v > 0 {
			return time.Duration(v * float64(time.Millisecond))
		}
	}
	ra := strings.TrimSpace(h.Get("Retry-After"))
	if ra == "" {
		return 0
	}
	if v, err := strconv.ParseFloat(ra, 64); err == nil {
		if v <= 0 {
			return 0
		}
		return time.Duration(v * float64(time.Second))
	}
	if t, err := http.ParseTime(ra); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
