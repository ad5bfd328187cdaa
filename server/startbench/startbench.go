// Package startbench measures how fast Arbor's real binary gets going: daemon start to a
// ready socket, the idle memory of a daemon plus an editor's forwarder, and a client's launch
// to the first kernel result of a new session.
//
// Call [Run] with the path of the arbor binary.
package startbench

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/arborhq/arbor/agents/model/scripted"
	"github.com/arborhq/arbor/bench"
)

const script = `{"rules":[{"when":{"task":"bench","turn":1},"code":"1+1"}],"default":{"text":"done"}}`

// The seed harness's figures, stated in the issue for its own machine. It is not installable
// here, so they are shown for context only and never divide a figure measured here.
const (
	seedStated    = "seed harness, stated in the issue"
	seedReadyMs   = 693
	seedIdleRSSMB = 235
	seedFirstMs   = 6200
)

// Run starts daemons from exe in a private temp dir and measures each figure runs times
// (default 5), reporting medians.
func Run(ctx context.Context, exe string, runs int) (*bench.Report, error) {
	if runs <= 0 {
		runs = 5
	}
	tmp, err := os.MkdirTemp("", "arbor-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	s, err := scripted.Parse([]byte(script), "startup bench")
	if err != nil {
		return nil, err
	}
	mctx, stop := context.WithCancel(ctx)
	defer stop()
	url, _, err := scripted.Serve(mctx, "127.0.0.1:0", s, nil)
	if err != nil {
		return nil, err
	}
	repo := filepath.Join(tmp, "repo")
	if err := bench.GitRepo(repo, ""); err != nil {
		return nil, err
	}
	sock := filepath.Join(tmp, "run", "arbor.sock")
	env := append(os.Environ(), "ARBOR_SOCKET="+sock,
		"ARBOR_STATE_DIR="+filepath.Join(tmp, "state"), "XDG_CONFIG_HOME="+filepath.Join(tmp, "config"),
		"ARBOR_MODEL_BASE_URL="+url, "ARBOR_MODEL=scripted")

	rep := &bench.Report{Suite: "startup"}
	// The same binary's bare process start, `arbor version` to exit, is the floor under any
	// daemon start; interleaved with the daemon so a burst of load hits both.
	var ready, floor []time.Duration
	for range runs {
		d, err := DaemonReady(ctx, exe, env, sock)
		if err != nil {
			return nil, err
		}
		ready = append(ready, d)
		if d, err = version(ctx, exe, env); err != nil {
			return nil, err
		}
		floor = append(floor, d)
	}
	v, sp := bench.MedianMs(ready)
	ref, _ := bench.MedianMs(floor)
	rep.Add(bench.Figure{Name: "daemon start → ready socket", Value: v, Spread: sp, Unit: "ms",
		Reference: "arbor version, exec → exit", RefValue: ref, Stated: seedReadyMs, StatedBy: seedStated, Goal: "<= 50 ms"})

	var rss []float64
	for range runs {
		mb, err := idleRSS(ctx, exe, env, sock)
		if err != nil {
			return nil, err
		}
		rss = append(rss, mb)
	}
	v, sp = bench.Median(rss)
	rep.Add(bench.Figure{Name: "idle daemon + forwarder RSS", Value: v, Spread: sp, Unit: "MB",
		Stated: seedIdleRSSMB, StatedBy: seedStated, Goal: "<= 25 MB"})

	// Each run times a cold `arbor run` (no daemon: it starts one) and then a warm one.
	var cold, warm []time.Duration
	for range runs {
		stopDaemon(exe, env)
		d, err := firstResult(ctx, exe, env, repo)
		if err != nil {
			return nil, err
		}
		cold = append(cold, d)
		if d, err = firstResult(ctx, exe, env, repo); err != nil {
			return nil, err
		}
		warm = append(warm, d)
	}
	stopDaemon(exe, env)
	v, sp = bench.MedianMs(cold)
	rep.Add(bench.Figure{Name: "arbor run → first 1+1 result, daemon started by it", Value: v, Spread: sp, Unit: "ms",
		Stated: seedFirstMs, StatedBy: seedStated, Goal: "<= 1000 ms"})
	v, sp = bench.MedianMs(warm)
	rep.Add(bench.Figure{Name: "arbor run → first 1+1 result, daemon running", Value: v, Spread: sp, Unit: "ms"})
	return rep, nil
}

// version times `arbor version` from exec to exit.
func version(ctx context.Context, exe string, env []string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, exe, "version")
	cmd.Env = env
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("%s version: %v %s", exe, err, out)
	}
	return time.Since(start), nil
}

// DaemonReady starts `exe daemon` with env and times exec to the first connection accepted on
// sock, then stops it.
func DaemonReady(ctx context.Context, exe string, env []string, sock string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, exe, "daemon", "--idle-timeout", "0")
	cmd.Env = env
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }()
	for time.Since(start) < 10*time.Second {
		if c, err := net.Dial("unix", sock); err == nil {
			d := time.Since(start)
			c.Close()
			return d, nil
		}
		time.Sleep(200 * time.Microsecond)
	}
	return 0, fmt.Errorf("%s daemon did not listen on %s within 10 s", exe, sock)
}

func idleRSS(ctx context.Context, exe string, env []string, sock string) (float64, error) {
	d := exec.CommandContext(ctx, exe, "daemon", "--idle-timeout", "0")
	d.Env = env
	if err := d.Start(); err != nil {
		return 0, err
	}
	defer func() { d.Process.Signal(os.Interrupt); d.Wait() }()
	for i := 0; i < 1000; i++ {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	fwd := exec.CommandContext(ctx, exe, "lsp")
	fwd.Env = env
	in, _ := fwd.StdinPipe()
	if err := fwd.Start(); err != nil {
		return 0, err
	}
	defer func() { in.Close(); fwd.Wait() }()
	time.Sleep(500 * time.Millisecond)
	a, err := rssMB(d.Process.Pid)
	if err != nil {
		return 0, err
	}
	b, err := rssMB(fwd.Process.Pid)
	if err != nil {
		return 0, err
	}
	return a + b, nil
}

func rssMB(pid int) (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.Fields(rest)[0])
			return float64(kb) / 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}

// firstResult launches `arbor run` and times the first kernel result line.
func firstResult(ctx context.Context, exe string, env []string, repo string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, exe, "run", "bench one plus one")
	cmd.Env, cmd.Dir = env, repo
	out, _ := cmd.StdoutPipe()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer cmd.Wait()
	sc := bufio.NewScanner(out)
	var d time.Duration
	for sc.Scan() {
		if d == 0 && strings.Contains(sc.Text(), "result (ok)") {
			d = time.Since(start)
		}
	}
	if d == 0 {
		return 0, fmt.Errorf("arbor run printed no kernel result")
	}
	return d, nil
}

func stopDaemon(exe string, env []string) {
	cmd := exec.Command(exe, "daemon", "stop")
	cmd.Env = env
	cmd.Run()
}
