package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"

	"go.lsp.dev/jsonrpc2"
)

// fakeConn feeds a stream from r and records what the stream writes back.
type fakeConn struct {
	r  io.Reader
	mu sync.Mutex
	w  bytes.Buffer
}

func (c *fakeConn) Read(p []byte) (int, error) { return c.r.Read(p) }
func (c *fakeConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.w.Write(p)
}
func (c *fakeConn) Close() error { return nil }

// replies decodes the framed error responses the stream wrote.
func (c *fakeConn) replies(t *testing.T) []wireReply {
	t.Helper()
	c.mu.Lock()
	data := append([]byte(nil), c.w.Bytes()...)
	c.mu.Unlock()
	s := newStream(&fakeConn{r: bytes.NewReader(data)})
	var out []wireReply
	for {
		length, _, err := s.readHeader()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("the stream wrote a badly framed reply: %v\n%q", err, data)
		}
		body := make([]byte, length)
		if _, err := io.ReadFull(s.in, body); err != nil {
			t.Fatalf("reply body: %v", err)
		}
		var r wireReply
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatalf("reply is not JSON: %v\n%s", err, body)
		}
		out = append(out, r)
	}
}

type wireReply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func frame(body string) string { return fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body) }

const statusCall = `{"jsonrpc":"2.0","id":1,"method":"arbor/daemon.status"}`

func TestStreamRead(t *testing.T) {
	long := strings.Repeat("x", 2000)
	tests := []struct {
		name    string
		in      string
		method  string // the message Read returns; "" when it fails
		err     string // the error Read returns
		replies []int64
		replyID string // id of the first reply
		// replyHas is part of the first reply's message
		replyHas string
	}{
		{name: "valid", in: frame(statusCall), method: "arbor/daemon.status"},
		{name: "header case and extra headers",
			in:     "content-length: " + fmt.Sprint(len(statusCall)) + "\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" + statusCall,
			method: "arbor/daemon.status"},
		{name: "bare newlines", in: "Content-Length: " + fmt.Sprint(len(statusCall)) + "\n\n" + statusCall, method: "arbor/daemon.status"},
		{name: "notification", in: frame(`{"jsonrpc":"2.0","method":"initialized","params":{}}`), method: "initialized"},
		{name: "empty input", in: "", err: "EOF"},
		{name: "missing Content-Length", in: "Content-Type: x\r\n\r\n{}", err: "missing Content-Length", replies: []int64{-32700}},
		{name: "Content-Length not a number", in: "Content-Length: ten\r\n\r\n", err: `invalid Content-Length "ten"`, replies: []int64{-32700}},
		{name: "negative Content-Length", in: "Content-Length: -5\r\n\r\n", err: "invalid Content-Length", replies: []int64{-32700}},
		{name: "zero Content-Length", in: "Content-Length: 0\r\n\r\n", err: "invalid Content-Length", replies: []int64{-32700}},
		{name: "oversized", in: "Content-Length: 3221225472\r\n\r\n", err: "exceeds the limit", replies: []int64{-32700}},
		{name: "Content-Length beyond int64", in: "Content-Length: 99999999999999999999\r\n\r\n", err: "invalid Content-Length", replies: []int64{-32700}},
		{name: "header line too long", in: "X-Long: " + long + "\r\n\r\n", err: "too long", replies: []int64{-32700}},
		{name: "header without colon", in: "Content-Length 5\r\n\r\nhello", err: "invalid header line", replies: []int64{-32700}},
		{name: "header cut off", in: "Content-Len", err: "read header", replies: []int64{-32700}},
		{name: "truncated body", in: "Content-Length: 100\r\n\r\n{}", err: "read message body"},
		{name: "malformed JSON is skipped", in: frame(`{not json`) + frame(statusCall),
			method: "arbor/daemon.status", replies: []int64{-32700}, replyID: "null"},
		{name: "valid JSON that is no request keeps its id", in: frame(`{"jsonrpc":"2.0","id":7,"method":42}`) + frame(statusCall),
			method: "arbor/daemon.status", replies: []int64{-32600}, replyID: "7"},
		{name: "a JSON array is an invalid request", in: frame(`[1,2]`) + frame(statusCall),
			method: "arbor/daemon.status", replies: []int64{-32600}, replyID: "null"},
		{name: "nested arrays past the depth limit are refused and skipped",
			in:     frame(strings.Repeat("[", 3_000_000)) + frame(statusCall),
			method: "arbor/daemon.status", replies: []int64{-32700}, replyID: "null",
			replyHas: "JSON nesting depth 1001 at byte 1000 exceeds the limit of 1000"},
		{name: "nested objects past the depth limit are refused and skipped",
			in:     frame(`{"jsonrpc":"2.0","id":1,"method":"x","params":`+strings.Repeat(`{"a":`, 500_000)) + frame(statusCall),
			method: "arbor/daemon.status", replies: []int64{-32700}, replyHas: "exceeds the limit of 1000"},
		{name: "nesting at the limit is decoded",
			in:     frame(`{"jsonrpc":"2.0","id":1,"method":"arbor/daemon.status","params":` + strings.Repeat("[", 999) + strings.Repeat("]", 999) + "}"),
			method: "arbor/daemon.status"},
		{name: "brackets in strings do not count",
			in:     frame(`{"jsonrpc":"2.0","id":1,"method":"arbor/daemon.status","params":{"s":"` + strings.Repeat(`[\"`, 5000) + `"}}`),
			method: "arbor/daemon.status"},
		{name: "neither method nor id", in: frame(`{"jsonrpc":"2.0"}`) + frame(statusCall),
			method: "arbor/daemon.status", replies: []int64{-32600}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := &fakeConn{r: strings.NewReader(tt.in)}
			msg, n, err := newStream(fc).Read(t.Context())
			switch {
			case tt.err != "":
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("Read error = %v, want one containing %q", err, tt.err)
				}
			case err != nil:
				t.Errorf("Read: %v", err)
			default:
				req, ok := msg.(jsonrpc2.Request)
				if !ok || req.Method() != tt.method {
					t.Errorf("Read = %#v, want a request of %s", msg, tt.method)
				}
				if n != int64(len(tt.in)) {
					t.Errorf("Read counted %d bytes, want %d", n, len(tt.in))
				}
			}
			got := fc.replies(t)
			if len(got) != len(tt.replies) {
				t.Fatalf("replies = %+v, want codes %v", got, tt.replies)
			}
			for i, r := range got {
				if r.JSONRPC != "2.0" || r.Error == nil || r.Error.Code != tt.replies[i] || r.Error.Message == "" {
					t.Errorf("reply %d = %+v, want a JSON-RPC error %d with a message", i, r, tt.replies[i])
				}
			}
			if tt.replyHas != "" && len(got) > 0 && !strings.Contains(got[0].Error.Message, tt.replyHas) {
				t.Errorf("reply message = %q, want one containing %q", got[0].Error.Message, tt.replyHas)
			}
			if tt.replyID != "" && len(got) > 0 && string(got[0].ID) != tt.replyID {
				t.Errorf("reply id = %s, want %s", got[0].ID, tt.replyID)
			}
		})
	}
}

func TestStreamReadHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := newStream(&fakeConn{r: strings.NewReader(frame(statusCall))}).Read(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Read with a cancelled context = %v", err)
	}
}

func TestStreamWriteFrames(t *testing.T) {
	fc := &fakeConn{r: strings.NewReader("")}
	s := newStream(fc)
	call, err := jsonrpc2.NewCall(jsonrpc2.NewNumberID(3), "arbor/sessions", map[string]string{"dir": "/x"})
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.Write(t.Context(), call)
	if err != nil {
		t.Fatal(err)
	}
	fc.mu.Lock()
	out := fc.w.String()
	fc.mu.Unlock()
	if int64(len(out)) != n {
		t.Errorf("Write counted %d bytes, wrote %d", n, len(out))
	}
	back, _, err := newStream(&fakeConn{r: strings.NewReader(out)}).Read(t.Context())
	if err != nil {
		t.Fatalf("what Write wrote does not read back: %v\n%q", err, out)
	}
	if c, ok := back.(*jsonrpc2.Call); !ok || c.Method() != "arbor/sessions" || string(c.Params()) != `{"dir":"/x"}` {
		t.Errorf("read back %#v", back)
	}
}

// endless yields the same byte forever without allocating.
type endless byte

func (b endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// allocated reports the bytes f allocated on the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before) // TotalAlloc only grows: no GC needed
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A peer must not make the daemon allocate what it announces or what it streams: not a
// 3 GiB Content-Length, and not a header line that never ends.
func TestStreamReadDoesNotAllocateForThePeer(t *testing.T) {
	const budget = 1 << 20 // the read buffer, the first piece of a body, and small change
	tests := []struct {
		name string
		in   io.Reader
		err  string
	}{
		{"3 GiB Content-Length", io.MultiReader(strings.NewReader("Content-Length: 3221225472\r\n\r\n"), endless('{')), "exceeds the limit"},
		{"header line without end", io.LimitReader(endless('a'), 256<<20), "too long"},
		{"header value without end", io.MultiReader(strings.NewReader("Content-Length: 1"), io.LimitReader(endless('0'), 256<<20)), "too long"},
		// Refused after its first 1,001 bytes: the rest is read past, never kept.
		{"30 MiB of nested arrays", io.MultiReader(strings.NewReader("Content-Length: 31457280\r\n\r\n"), io.LimitReader(endless('['), 30<<20)), "EOF"},
		// Refused by its first byte: no JSON-RPC message starts so.
		{"30 MiB of garbage", io.MultiReader(strings.NewReader("Content-Length: 31457280\r\n\r\n"), io.LimitReader(endless(0), 30<<20)), "EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			n := allocated(func() { _, _, err = newStream(&fakeConn{r: tt.in}).Read(t.Context()) })
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Read error = %v, want one containing %q", err, tt.err)
			}
			if n > budget {
				t.Errorf("Read allocated %d MiB for a hostile peer, want at most %d MiB", n>>20, budget>>20)
			}
		})
	}
}

// FuzzStreamRead feeds arbitrary bytes to the framing reader: it must not panic, must not
// count more bytes than it was given, must not return a message above the cap, and must not
// allocate beyond the cap whatever the headers announce.
func FuzzStreamRead(f *testing.F) {
	for _, seed := range []string{
		frame(statusCall),
		frame(`{not json`) + frame(statusCall),
		"Content-Length: 3221225472\r\n\r\n",
		"content-length: 2\nX: y\n\n{}",
		"Content-Length: 5\r\nContent-Length: 2\r\n\r\n[]",
		frame(`{"jsonrpc":"2.0","id":"x","result":null}`),
		frame(`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}`),
		"\r\n\r\n",
		frame(strings.Repeat("[", 1001)) + frame(statusCall),
		frame(strings.Repeat("[", 1000)),
		frame(`{"jsonrpc":"2.0","id":1,"method":"x","params":` + strings.Repeat(`{"a":`, 1001)),
		frame(`{"jsonrpc":"2.0","id":1,"method":"x","params":"` + strings.Repeat(`[\"`, 1001) + `"}`),
	} {
		f.Add([]byte(seed))
	}
	const max = 4 << 10
	f.Fuzz(func(t *testing.T, data []byte) {
		fc := &fakeConn{r: bytes.NewReader(data)}
		s := newStream(fc)
		s.max = max
		var total int64
		n := allocated(func() {
			for range 64 {
				msg, n, err := s.Read(t.Context())
				total += n
				if err != nil {
					return
				}
				if msg == nil {
					t.Fatalf("Read returned neither a message nor an error")
				}
			}
		})
		if total > int64(len(data)) {
			t.Errorf("Read counted %d bytes of a %d-byte input", total, len(data))
		}
		// Every error reply is well framed, and echoes a bounded part of the input.
		for _, r := range fc.replies(t) {
			if len(r.ID) > maxEcho || r.Error == nil || len(r.Error.Message) > maxErrorMessage+64 {
				t.Errorf("error reply echoes too much: id %d bytes, %+v", len(r.ID), r.Error)
			}
		}
		// The read buffer, the largest body the cap allows, its decoding (a few times its size),
		// and the error replies: anything beyond is an allocation the peer chose.
		if budget := uint64(256<<10 + 64*len(data)); n > budget {
			t.Errorf("Read allocated %d bytes for a %d-byte input (budget %d)", n, len(data), budget)
		}
	})
}
