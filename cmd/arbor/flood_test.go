package main

// A client that sends requests and never reads the replies: the daemon's memory stays
// bounded, comes back when the client leaves, and other clients are served meanwhile.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arborhq/arbor/bench"
)

// TestNonReadingClient is the short version: 5,000 requests and a short write timeout, with
// no timing assertion, only the memory bound.
func TestNonReadingClient(t *testing.T) {
	t.Parallel()
	floodDaemon(t, 5000, time.Second, false)
}

// TestSoakNonReadingClient is `make soak`'s: 100,000 requests at the default write timeout,
// and a healthy client's p99 during the attack against its own baseline in the same run.
func TestSoakNonReadingClient(t *testing.T) {
	if os.Getenv("ARBOR_SOAK") == "" {
		t.Skip("a soak: run it with `make soak` (ARBOR_SOAK=1)")
	}
	floodDaemon(t, 100_000, 30*time.Second, true)
}

const maxExtraRSS = 100 << 20

func floodDaemon(t *testing.T, requests int, writeTimeout time.Duration, timed bool) {
	e := newEnv(t)
	bin := arborBin
	if timed {
		// Memory figures of a -race build are mostly the race detector's own bookkeeping,
		// which grows with every request served; the soak measures the build users run.
		bin = filepath.Join(t.TempDir(), "arbor")
		build := exec.Command("go", "build", "-o", bin, "./cmd/arbor")
		build.Dir = filepath.Join("..", "..")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build arbor: %v\n%s", err, out)
		}
	}
	d := e.startDaemonBin(bin, "--write-timeout", writeTimeout.String())
	eventually(t, "the daemon listens", e.listening) // the socket file exists before listen()
	pid := d.Process.Pid

	healthy := dialInitialized(t, e.sock)
	defer healthy.Close()
	status := func() time.Duration {
		t.Helper()
		start := time.Now()
		if err := healthy.status(); err != nil {
			t.Fatalf("the healthy client: %v", err)
		}
		return time.Since(start)
	}
	// The baseline phase is the healthy traffic alone, long enough for the daemon's heap to
	// reach the size that traffic keeps it at: the RSS reference then isolates what the
	// attack adds.
	phase := 500 * time.Millisecond
	if timed {
		phase = 15 * time.Second
	}
	for range 200 {
		status() // warm up
	}
	var baseline []time.Duration
	for start := time.Now(); time.Since(start) < phase; {
		baseline = append(baseline, status())
		if !timed {
			time.Sleep(10 * time.Millisecond)
		}
	}
	rssBase := vmRSS(t, pid)

	hostile := dialInitialized(t, e.sock)
	defer hostile.Close()
	req := []byte(frameOf(`{"jsonrpc":"2.0","id":1,"method":"arbor/daemon.status"}`))
	var sent atomic.Int64
	gone := make(chan error, 1)
	go func() {
		for {
			if _, err := hostile.nc.Write(req); err != nil {
				gone <- err
				return
			}
			if sent.Add(1) >= int64(requests) {
				time.Sleep(100 * time.Millisecond) // sent them all: wait to be disconnected
			}
		}
	}()
	start := time.Now()
	var during []time.Duration
	peak := rssBase
attack:
	for {
		select {
		case <-gone:
			break attack
		default:
		}
		if time.Since(start) > hangGuard {
			t.Fatalf("the non-reading client was not disconnected after %v (%d requests sent)", hangGuard, sent.Load())
		}
		during = append(during, status())
		peak = max(peak, vmRSS(t, pid))
		if !timed {
			time.Sleep(10 * time.Millisecond)
		}
	}
	attackTime := time.Since(start)
	// After the client leaves: what it held is released.
	time.Sleep(2 * time.Second)
	after := vmRSS(t, pid)
	for range 50 {
		status() // still served
	}

	if peak-rssBase > maxExtraRSS {
		t.Errorf("daemon RSS grew by %d MB with a non-reading client; want at most %d MB", (peak-rssBase)>>20, maxExtraRSS>>20)
	}
	if after-rssBase > maxExtraRSS/4 {
		t.Errorf("daemon RSS is %d MB above its baseline after the client left; want it back near it", (after-rssBase)>>20)
	}
	p99Base, p99During := bench.Percentile(baseline, 0.99), bench.Percentile(during, 0.99)
	if timed && p99During > 2*p99Base {
		t.Errorf("the healthy client's p99 was %v during the attack, over 2× its baseline %v", p99During, p99Base)
	}
	var rep bench.Report
	mb := func(b int64) float64 { return float64(b) / (1 << 20) }
	rep.Add(bench.Figure{Name: "daemon RSS, peak during the attack", Value: mb(peak), Unit: "MB", Reference: "RSS before", RefValue: mb(rssBase), Goal: fmt.Sprintf("<= +%d MB", maxExtraRSS>>20),
		Stated: 1860, StatedBy: "issue 9, before per-client bounds (13 MB before)"})
	rep.Add(bench.Figure{Name: "daemon RSS, 2 s after the client left", Value: mb(after), Unit: "MB", Reference: "RSS before", RefValue: mb(rssBase)})
	rep.Add(bench.Figure{Name: "healthy client p99, during the attack", Value: bench.Ms(p99During), Unit: "ms", Reference: "p99 before", RefValue: bench.Ms(p99Base), Goal: "ratio < 2"})
	rep.Add(bench.Figure{Name: "requests written before the disconnect", Value: float64(sent.Load()), Unit: "requests",
		Note: fmt.Sprintf("of %d tried; disconnected after %v (write timeout %v)", requests, attackTime.Round(time.Millisecond), writeTimeout)})
	var out bytes.Buffer
	rep.WriteTable(&out)
	t.Logf("non-reading client, %d healthy requests before and %d during:\n%s", len(baseline), len(during), out.String())
}

func frameOf(body string) string { return fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body) }

// vmRSS reads a process's resident set size in bytes.
func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// rawClient is a client on the daemon's socket that speaks the framing by hand.
type rawClient struct {
	nc net.Conn
	br *bufio.Reader
	id int
}

func dialInitialized(t *testing.T, sock string) *rawClient {
	t.Helper()
	nc, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	c := &rawClient{nc: nc, br: bufio.NewReader(nc)}
	if err := c.call("initialize", map[string]any{"capabilities": map[string]any{}}); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return c
}

func (c *rawClient) call(method string, params any) error {
	c.id++
	if err := writeFrame(c.nc, map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method, "params": params}); err != nil {
		return err
	}
	for {
		body, err := readFrame(c.br)
		if err != nil {
			return err
		}
		var m struct {
			ID    *int            `json:"id"`
			Error json.RawMessage `json:"error"`
		}
		json.Unmarshal(body, &m)
		if m.ID == nil || *m.ID != c.id {
			continue // a notification
		}
		if len(m.Error) > 0 {
			return fmt.Errorf("%s: %s", method, m.Error)
		}
		return nil
	}
}

func (c *rawClient) status() error { return c.call("arbor/daemon.status", nil) }

func (c *rawClient) Close() error { return c.nc.Close() }
