package startbench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/arborhq/arbor/bench"
)

// FloodOptions configure [Flood].
type FloodOptions struct {
	Exe      string        // the arbor binary
	Conns    int           // hostile connections (default 4)
	Phase    time.Duration // how long the healthy client is timed alone, and again under the flood (default 5 s)
	Interval time.Duration // the healthy client's pause between requests (default 5 ms)
}

// floodFrames are what each hostile connection sends in a loop: 3 MB frames nested past any
// decoder's sense, and garbage of the same size.
func floodFrames() [][]byte {
	const size = 3_000_000
	frame := func(body string) []byte {
		return []byte(fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body))
	}
	return [][]byte{
		frame(strings.Repeat("[", size)),
		frame(`{"jsonrpc":"2.0","id":1,"method":"arbor/daemon.status","params":` + strings.Repeat(`{"a":`, size/5)),
		frame(strings.Repeat("\x00garbage ", size/9)),
		frame(`{"jsonrpc":"2.0","id":2,"method":"arbor/daemon.status","params":"` + strings.Repeat("x", size) + `"`),
	}
}

// Flood measures a healthy client's arbor/daemon.status latency while several connections
// send malformed 3 MB frames as fast as the daemon reads them, beside the same client's
// latency alone in the same run, and the daemon's peak RSS beside its idle RSS.
func Flood(ctx context.Context, o FloodOptions) (*bench.Report, error) {
	if o.Conns <= 0 {
		o.Conns = 4
	}
	if o.Phase <= 0 {
		o.Phase = 5 * time.Second
	}
	if o.Interval <= 0 {
		o.Interval = 5 * time.Millisecond
	}
	tmp, err := os.MkdirTemp("", "arbor-flood-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	sock := filepath.Join(tmp, "run", "arbor.sock")
	d := exec.CommandContext(ctx, o.Exe, "daemon", "--idle-timeout", "0")
	d.Env = append(os.Environ(), "ARBOR_SOCKET="+sock, "ARBOR_STATE_DIR="+filepath.Join(tmp, "state"),
		"XDG_CONFIG_HOME="+filepath.Join(tmp, "config"), "ARBOR_MODEL_BASE_URL=http://127.0.0.1:1/v1", "ARBOR_MODEL=none")
	if err := d.Start(); err != nil {
		return nil, err
	}
	defer func() { d.Process.Signal(os.Interrupt); d.Wait() }()
	var healthy *floodClient
	for start := time.Now(); healthy == nil; time.Sleep(5 * time.Millisecond) {
		if healthy, err = dialFlood(sock); err != nil && time.Since(start) > 10*time.Second {
			return nil, fmt.Errorf("the daemon did not listen on %s: %w", sock, err)
		}
	}
	defer healthy.nc.Close()
	if err := healthy.call("initialize", `{"capabilities":{}}`); err != nil {
		return nil, err
	}
	pid := d.Process.Pid
	time.Sleep(o.Interval)
	for range 200 { // warm up
		if err := healthy.call("arbor/daemon.status", "null"); err != nil {
			return nil, err
		}
	}
	idle, err := rssMB(pid)
	if err != nil {
		return nil, err
	}
	timed := func(peak *float64) ([]time.Duration, error) {
		var ds []time.Duration
		for start := time.Now(); time.Since(start) < o.Phase; {
			t := time.Now()
			if err := healthy.call("arbor/daemon.status", "null"); err != nil {
				return nil, fmt.Errorf("the healthy client: %w", err)
			}
			ds = append(ds, time.Since(t))
			if mb, err := rssMB(pid); err == nil && peak != nil {
				*peak = max(*peak, mb)
			}
			time.Sleep(o.Interval)
		}
		return ds, nil
	}
	baseline, err := timed(nil)
	if err != nil {
		return nil, err
	}

	fctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var sent, refused atomic.Int64
	frames := floodFrames()
	for i := range o.Conns {
		wg.Add(1)
		go func() { defer wg.Done(); hostile(fctx, sock, frames, i, &sent, &refused) }()
	}
	peak := idle
	during, err := timed(&peak)
	stop()
	wg.Wait()
	if err != nil {
		return nil, err
	}
	if err := d.Process.Signal(syscall.Signal(0)); err != nil {
		return nil, fmt.Errorf("the daemon died under the flood: %w", err)
	}

	rep := &bench.Report{Suite: "flood"}
	p99b, p99d := bench.Percentile(baseline, 99), bench.Percentile(during, 99)
	p50b, p50d := bench.Percentile(baseline, 50), bench.Percentile(during, 50)
	note := fmt.Sprintf("%d hostile connections; %d frames of 3 MB sent, %d refusals read", o.Conns, sent.Load(), refused.Load())
	rep.Add(bench.Figure{Name: "healthy arbor/daemon.status p99, under the flood", Value: bench.Ms(p99d), Unit: "ms",
		Reference: "p99 alone", RefValue: bench.Ms(p99b), Goal: "ratio <= 2", Note: note})
	rep.Add(bench.Figure{Name: "healthy arbor/daemon.status p50, under the flood", Value: bench.Ms(p50d), Unit: "ms",
		Reference: "p50 alone", RefValue: bench.Ms(p50b)})
	rep.Add(bench.Figure{Name: "daemon RSS, peak under the flood", Value: peak, Unit: "MB",
		Reference: "idle RSS", RefValue: idle, Stated: 2780, StatedBy: "the report of the attack, before the depth limit (19.5 MB idle)"})
	return rep, nil
}

// hostile sends frames on one connection until ctx ends, reconnecting when the daemon hangs
// up, and counts the error replies it reads.
func hostile(ctx context.Context, sock string, frames [][]byte, i int, sent, refused *atomic.Int64) {
	for ctx.Err() == nil {
		nc, err := net.Dial("unix", sock)
		if err != nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		stop := context.AfterFunc(ctx, func() { nc.Close() })
		go func() {
			br := bufio.NewReader(nc)
			for {
				body, err := readFlood(br)
				if err != nil {
					return
				}
				if strings.Contains(string(body), `"error"`) {
					refused.Add(1)
				}
			}
		}()
		for n := i; ctx.Err() == nil; n++ {
			if _, err := nc.Write(frames[n%len(frames)]); err != nil {
				break
			}
			sent.Add(1)
		}
		stop()
		nc.Close()
	}
}

type floodClient struct {
	nc net.Conn
	br *bufio.Reader
	id int
}

func dialFlood(sock string) (*floodClient, error) {
	nc, err := net.Dial("unix", sock)
	if err != nil {
		return nil, err
	}
	return &floodClient{nc: nc, br: bufio.NewReader(nc)}, nil
}

// call sends one request and waits for its reply, skipping notifications.
func (c *floodClient) call(method, params string) error {
	c.id++
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, c.id, method, params)
	if _, err := fmt.Fprintf(c.nc, "Content-Length: %d\r\n\r\n%s", len(body), body); err != nil {
		return err
	}
	for {
		reply, err := readFlood(c.br)
		if err != nil {
			return err
		}
		var m struct {
			ID    *int            `json:"id"`
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(reply, &m) != nil || m.ID == nil || *m.ID != c.id {
			continue
		}
		if len(m.Error) > 0 {
			return fmt.Errorf("%s: %s", method, m.Error)
		}
		return nil
	}
}

func readFlood(br *bufio.Reader) ([]byte, error) {
	length := -1
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, err
		}
		line = strings.TrimSpace(line)
		if line == "" {
			break
		}
		if v, ok := strings.CutPrefix(line, "Content-Length:"); ok {
			if length, err = strconv.Atoi(strings.TrimSpace(v)); err != nil {
				return nil, err
			}
		}
	}
	if length < 0 {
		return nil, fmt.Errorf("reply without Content-Length")
	}
	body := make([]byte, length)
	_, err := io.ReadFull(br, body)
	return body, err
}
