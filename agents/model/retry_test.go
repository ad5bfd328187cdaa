package model

import (
	"io"
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
	}{
		{"absent", nil, 0},
		{"seconds", map[string]string{"Retry-After": "3"}, 3 * time.Second},
		{"fractional seconds", map[string]string{"Retry-After": "0.5"}, 500 * time.Millisecond},
		{"milliseconds win", map[string]string{"Retry-After": "3", "Retry-After-Ms": "250"}, 250 * time.Millisecond},
		{"http date", map[string]string{"Retry-After": now.Add(7 * time.Second).Format(http.TimeFormat)}, 7 * time.Second},
		{"date in the past", map[string]string{"Retry-After": now.Add(-time.Hour).Format(http.TimeFormat)}, 0},
		{"negative", map[string]string{"Retry-After": "-4"}, 0},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, v := range tt.header {
			h.Set(k, v)
		}
		if got := parseRetryAfter(h, now); got != tt.want {
			t.Errorf("%s: parseRetryAfter = %v; want %v", tt.name, got, tt.want)
		}
	}
}

func TestRetryDelay(t *testing.T) {
	t.Parallel()
	c := &Client{cfg: Config{Backoff: 100 * time.Millisecond}}
	tests := []struct {
		n          int
		retryAfter time.Duration
		lo, hi     time.Duration
	}{
		{1, 0, 50 * time.Millisecond, 100 * time.Millisecond},
		{3, 0, 200 * time.Millisecond, 400 * time.Millisecond},
		{20, 0, maxBackoff / 2, maxBackoff},
		{1, 5 * time.Second, 5 * time.Second, 5 * time.Second},
		{1, time.Hour, maxRetryAfter, maxRetryAfter},
	}
	for _, tt := range tests {
		for range 50 {
			if d := c.retryDelay(tt.n, tt.retryAfter); d < tt.lo || d > tt.hi {
				t.Fatalf("retryDelay(%d, %v) = %v; want within [%v, %v]", tt.n, tt.retryAfter, d, tt.lo, tt.hi)
			}
		}
	}
}

// A body closed before the stream said [DONE] (the caller gave up mid-reply) is closed as it
// is, without waiting for more of the model's stream; after [DONE] the rest is read.
func TestDoneDrainer(t *testing.T) {
	t.Parallel()
	r, w := io.Pipe()
	d := &doneDrainer{ReadCloser: r}
	go w.Write([]byte("data: {\"choices\":[]}\n\n"))
	buf := make([]byte, 64)
	if _, err := d.Read(buf); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { d.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close mid-stream waited for the rest of the stream")
	}

	r, w = io.Pipe()
	d = &doneDrainer{ReadCloser: r}
	rest := make(chan error, 1)
	go func() {
		w.Write([]byte("data: [DONE]\n\n"))
		_, err := w.Write([]byte("0\r\n\r\n")) // what is left after [DONE]; a pipe write waits for its reader
		w.Close()
		rest <- err
	}()
	if _, err := d.Read(buf); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if err := <-rest; err != nil {
		t.Errorf("the rest of a stream after [DONE] was not read before Close: %v", err)
	}
}
