package kernelbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/arborhq/arbor/bench"
	"github.com/arborhq/arbor/kernel"
	"github.com/arborhq/arbor/sandbox"
)

func (e *env) launch() error {
	var plain []time.Duration
	for range e.runs {
		t := time.Now()
		k, err := e.start(e.opts())
		if err != nil {
			return err
		}
		plain = append(plain, time.Since(t))
		closeK(k)
	}
	ref, err := e.jc("launch", e.runs)
	if err != nil {
		return err
	}
	p50, sp := bench.MedianMs(plain)
	jc, _ := bench.MedianMs(ref)
	e.report.Add(bench.Figure{Name: "launch → ready, plain", Value: p50, Spread: sp, Unit: "ms",
		Reference: "jupyter_client wait_for_ready", RefValue: jc, Goal: "ratio < 1",
		Note: "Arbor's launcher skips the debugpy import"})

	m, err := kernel.NewManager(kernel.ManagerConfig{Python: e.py, StateDir: e.tmp("mgr"), Fork: true, MaxLive: 64, Logger: e.log})
	if err != nil {
		return err
	}
	defer m.Close()
	var forked []time.Duration
	for range e.runs {
		t := time.Now()
		k, err := m.Start(e.ctx, e.opts())
		if err != nil {
			return err
		}
		forked = append(forked, time.Since(t))
		closeK(k)
	}
	v, sp := bench.MedianMs(forked)
	e.report.Add(bench.Figure{Name: "launch → ready, fork server", Value: v, Spread: sp, Unit: "ms",
		Reference: "Arbor plain launch", RefValue: p50, Goal: "ratio <= 0.25"})

	// A sandboxed kernel cannot come from the fork server or the pool (its mounts are its own):
	// it is a plain launch under bwrap. Measured here beside both.
	if st := sandbox.Probe(e.ctx); st.Available {
		var boxed []time.Duration
		for range e.runs {
			o := e.opts()
			o.Sandbox = "bwrap"
			t := time.Now()
			k, err := e.start(o)
			if err != nil {
				return err
			}
			boxed = append(boxed, time.Since(t))
			closeK(k)
		}
		v, sp := bench.MedianMs(boxed)
		e.report.Add(bench.Figure{Name: "launch → ready, plain in the sandbox (bwrap)", Value: v, Spread: sp, Unit: "ms",
			Reference: "Arbor plain launch", RefValue: p50, Note: "the default where bubblewrap works; no fork server"})
	} else {
		e.log.Warn("kernelbench: no sandboxed launch figure", "reason", st.Reason)
	}

	pm, err := kernel.NewManager(kernel.ManagerConfig{Python: e.py, StateDir: e.tmp("pool"), Fork: true, PoolSize: 1, MaxLive: 64, Logger: e.log})
	if err != nil {
		return err
	}
	defer pm.Close()
	var pooled, first []time.Duration
	for range e.runs {
		if err := pm.WaitPool(e.ctx); err != nil {
			return err
		}
		t := time.Now()
		k, err := pm.Start(e.ctx, e.opts())
		if err != nil {
			return err
		}
		pooled = append(pooled, time.Since(t))
		if _, err := execOK(e.ctx, k, "1+1"); err != nil {
			return err
		}
		first = append(first, time.Since(t))
		closeK(k)
	}
	v, sp = bench.MedianMs(pooled)
	e.report.Add(bench.Figure{Name: "launch → ready, pool hand-out", Value: v, Spread: sp, Unit: "ms",
		Reference: "Arbor plain launch", RefValue: p50, Goal: "<= 5 ms",
		Note: "the adaptation cell (cwd, env, bridge) is checked by the first cell"})
	v, sp = bench.MedianMs(first)
	e.report.Add(bench.Figure{Name: "pool hand-out → first 1+1 result", Value: v, Spread: sp, Unit: "ms",
		Reference: "Arbor plain launch", RefValue: p50})
	return nil
}

// exec times n round trips of 1+1 in a fresh kernel per run, beside jupyter_client doing the
// same; each run gives a p50 and a p99, and the figures are their medians over the runs.
func (e *env) exec() error {
	const n = 300
	pcts := []float64{50, 99}
	ours, refs := make([][]float64, len(pcts)), make([][]float64, len(pcts))
	for range e.runs {
		ds, err := e.execRun(n)
		if err != nil {
			return err
		}
		ref, err := e.jc("exec", n)
		if err != nil {
			return err
		}
		for i, p := range pcts {
			ours[i] = append(ours[i], bench.Ms(bench.Percentile(ds, p)))
			refs[i] = append(refs[i], bench.Ms(bench.Percentile(ref, p)))
		}
	}
	for i, p := range pcts {
		v, sp := bench.Median(ours[i])
		ref, _ := bench.Median(refs[i])
		e.report.Add(bench.Figure{Name: fmt.Sprintf("1+1 round trip p%.0f", p), Value: v, Spread: sp, Unit: "ms",
			Reference: "jupyter_client", RefValue: ref, Goal: "ratio <= 0.7",
			Note: fmt.Sprintf("%d round trips a run; reference kernel is stock ipykernel (history.sqlite on)", n)})
	}
	return nil
}

func (e *env) execRun(n int) ([]time.Duration, error) {
	k, err := e.start(e.opts())
	if err != nil {
		return nil, err
	}
	defer closeK(k)
	var ds []time.Duration
	for i := 0; i < n+10; i++ {
		t := time.Now()
		if _, err := execOK(e.ctx, k, "1+1"); err != nil {
			return nil, err
		}
		if i >= 10 {
			ds = append(ds, time.Since(t))
		}
	}
	return ds, nil
}

func (e *env) stdout() error {
	const mb = 10
	k, err := e.start(e.opts())
	if err != nil {
		return err
	}
	defer closeK(k)
	if _, err := execOK(e.ctx, k, fmt.Sprintf("import sys; s = 'x' * (%d << 20)", mb)); err != nil {
		return err
	}
	var ds []time.Duration
	for range e.runs {
		t := time.Now()
		res, err := execOK(e.ctx, k, "sys.stdout.write(s); sys.stdout.flush()")
		if err != nil {
			return err
		}
		ds = append(ds, time.Since(t))
		if len(res.Text) < mb<<20 {
			return fmt.Errorf("got %d bytes of output, want %d", len(res.Text), mb<<20)
		}
	}
	ref, err := e.jc("stdout", mb, e.runs)
	if err != nil {
		return err
	}
	rates := func(ds []time.Duration) []float64 {
		var xs []float64
		for _, d := range ds {
			xs = append(xs, float64(mb)/d.Seconds())
		}
		return xs
	}
	v, sp := bench.Median(rates(ds))
	jc, _ := bench.Median(rates(ref))
	e.report.Add(bench.Figure{Name: "10 MB stdout burst", Value: v, Spread: sp, Unit: "MB/s",
		Reference: "jupyter_client", RefValue: jc, Goal: "ratio >= 1.0"})
	return nil
}

type nopHost struct{}

func (nopHost) HandleHost(context.Context, string, json.RawMessage) (any, error) { return "ok", nil }

func (e *env) bridge() error {
	o := e.opts()
	o.Host = nopHost{}
	k, err := e.start(o)
	if err != nil {
		return err
	}
	defer closeK(k)
	// Per run: the cell's p50, p99 and host-call mean, then the reference's p50 and p99.
	var figs [5][]float64
	for range e.runs {
		v, err := bridgeRun(e.ctx, k)
		if err != nil {
			return err
		}
		for i := range figs {
			figs[i] = append(figs[i], v[i])
		}
	}
	med := func(i int) (float64, *bench.Spread) { return bench.Median(figs[i]) }
	v, sp := med(0)
	ref, _ := med(3)
	e.report.Add(bench.Figure{Name: "bridge round trip p50", Value: v, Spread: sp, Unit: "ms", Goal: "<= 0.2 ms",
		Reference: "kernel_info on control", RefValue: ref})
	v, sp = med(1)
	ref, _ = med(4)
	e.report.Add(bench.Figure{Name: "bridge round trip p99", Value: v, Spread: sp, Unit: "ms",
		Reference: "kernel_info on control", RefValue: ref})
	v, sp = med(2)
	e.report.Add(bench.Figure{Name: "bridge call to the host handler, mean", Value: v, Spread: sp, Unit: "ms",
		Note: "agent_message.inbox() through HostHandler"})
	return nil
}

// bridgeRun returns, in ms, the bridge's p50 and p99, the host call's mean, and the reference's
// p50 and p99.
func bridgeRun(ctx context.Context, k *kernel.Kernel) ([5]float64, error) {
	var out [5]float64
	res, err := execOK(ctx, k, `
import time, json
ds = []
for i in range(2200):
    t = time.perf_counter()
    await arbor_ping(i)
    ds.append(time.perf_counter() - t)
ds = sorted(ds[200:])
t = time.perf_counter()
for i in range(2000):
    await agent_message.inbox()
host = (time.perf_counter() - t) / 2000
print(json.dumps([ds[len(ds)//2], ds[int(len(ds)*0.99)], host]))`)
	if err != nil {
		return out, err
	}
	var v []float64
	if err := json.Unmarshal([]byte(strings.TrimSpace(res.Text)), &v); err != nil || len(v) != 3 {
		return out, fmt.Errorf("bridge timings %q: %v", res.Text, err)
	}
	// Reference: the floor of any Jupyter-channel host call, a kernel_info round trip on control.
	var pings []time.Duration
	for i := 0; i < 500; i++ {
		t := time.Now()
		if err := k.Ping(ctx); err != nil {
			return out, err
		}
		pings = append(pings, time.Since(t))
	}
	return [5]float64{v[0] * 1e3, v[1] * 1e3, v[2] * 1e3,
		bench.Ms(bench.Percentile(pings, 50)), bench.Ms(bench.Percentile(pings, 99))}, nil
}

func (e *env) interrupt() error {
	k, err := e.start(e.opts())
	if err != nil {
		return err
	}
	defer closeK(k)
	var ds []time.Duration
	for range e.runs + 1 { // the first, slower in a fresh kernel, is reported apart
		started := make(chan struct{}, 1)
		done := make(chan *kernel.Result, 1)
		go func() {
			res, _ := k.Execute(e.ctx, "print('go', flush=True)\nimport time\ntime.sleep(60)", kernel.ExecOptions{
				OnOutput: func(kernel.Output) {
					select {
					case started <- struct{}{}:
					default:
					}
				}})
			done <- res
		}()
		<-started
		// Let the print's flush finish: a SIGINT inside ipykernel's iostream is swallowed.
		time.Sleep(100 * time.Millisecond)
		t0 := time.Now()
		var res *kernel.Result
		for res == nil {
			if err := k.Interrupt(e.ctx); err != nil {
				return err
			}
			select {
			case res = <-done:
			case <-time.After(2 * time.Second):
			}
		}
		if res.Error == nil || res.Error.Name != "KeyboardInterrupt" {
			return fmt.Errorf("interrupted cell: %s %q", res.Status, res.Text)
		}
		ds = append(ds, time.Since(t0))
	}
	first := ds[0]
	v, sp := bench.MedianMs(ds[1:])
	e.report.Add(bench.Figure{Name: "interrupt → KeyboardInterrupt reply", Value: v, Spread: sp, Unit: "ms",
		Goal: "<= 50 ms", Note: fmt.Sprintf("first in a kernel: %.0f ms", bench.Ms(first))})
	return nil
}

func (e *env) death() error {
	m, err := kernel.NewManager(kernel.ManagerConfig{Python: e.py, StateDir: e.tmp("mgr"), Fork: true, Logger: e.log})
	if err != nil {
		return err
	}
	defer m.Close()
	measure := func(k *kernel.Kernel) time.Duration {
		done := k.Done()
		t := time.Now()
		syscall.Kill(k.PID(), syscall.SIGKILL)
		<-done
		return time.Since(t)
	}
	var plain, forked []time.Duration
	for range e.runs {
		k, err := e.start(e.opts())
		if err != nil {
			return err
		}
		plain = append(plain, measure(k))
		closeK(k)
		fk, err := m.Start(e.ctx, e.opts())
		if err != nil {
			return err
		}
		forked = append(forked, measure(fk))
		closeK(fk)
	}
	v, sp := bench.MedianMs(plain)
	e.report.Add(bench.Figure{Name: "kill -9 → death noticed (process wait)", Value: v, Spread: sp, Unit: "ms", Goal: "<= 50 ms"})
	v, sp = bench.MedianMs(forked)
	e.report.Add(bench.Figure{Name: "kill -9 → death noticed (pidfd, forked)", Value: v, Spread: sp, Unit: "ms", Goal: "<= 50 ms"})
	return nil
}

// refNamespace is the reference namespace of issue 3: ~74 variables, ~11 MB, one unpicklable.
const refNamespace = `
import socket, collections
for i in range(30):
    globals()[f'l{i}'] = list(range(2000 * i))
for i in range(20):
    globals()[f'd{i}'] = {str(j): j * 1.5 for j in range(3000)}
for i in range(15):
    globals()[f's{i}'] = 'x' * 300000
blob = bytes(3_000_000)
counter = collections.Counter('abracadabra')
def f(x):
    return x + 1
class C:
    def __init__(self): self.v = 1
c = C()
sock = socket.socket()
gen = (i for i in range(3))
`

func (e *env) snapshot() error {
	o := e.opts()
	k, err := e.start(o)
	if err != nil {
		return err
	}
	defer closeK(k)
	if _, err := execOK(e.ctx, k, refNamespace); err != nil {
		return err
	}
	dir := e.tmp("snap")
	var ds []time.Duration
	var man *kernel.Manifest
	for range e.runs {
		t := time.Now()
		if man, err = k.Snapshot(e.ctx, dir); err != nil {
			return err
		}
		ds = append(ds, time.Since(t))
	}
	// Reference: dill.dump_session, which must first lose the unpicklable values.
	if _, err := execOK(e.ctx, k, "import dill, time, os\ndel sock, gen"); err != nil {
		return err
	}
	var dumps []float64
	for range e.runs {
		sec, err := cellSeconds(e.ctx, k, "dill.dump_session(os.path.join("+fmt.Sprintf("%q", dir)+", 'session.pkl'))")
		if err != nil {
			return err
		}
		dumps = append(dumps, sec*1e3)
	}
	v, sp := bench.MedianMs(ds)
	ref, _ := bench.Median(dumps)
	e.report.Add(bench.Figure{Name: "snapshot of the reference namespace", Value: v, Spread: sp, Unit: "ms",
		Reference: "dill.dump_session (after deleting the unpicklable)", RefValue: ref, Goal: "<= 200 ms",
		Note: fmt.Sprintf("%d vars saved, %d skipped, %.1f MB, %.0f ms inside the kernel", len(man.Vars), len(man.Skipped), float64(man.TotalBytes)/1e6, man.Seconds*1e3)})

	var plain, loads []float64
	var summary string
	for range e.runs {
		ro := e.opts()
		ro.Restore = dir
		rk, err := e.start(ro)
		if err != nil {
			return err
		}
		r := rk.Restored()
		if r == nil || r.Error != "" {
			closeK(rk)
			return errors.New("restore failed: " + r.Summary())
		}
		plain, summary = append(plain, r.Seconds*1e3), r.Summary()
		sec, err := cellSeconds(e.ctx, rk, "import dill\ndill.load_session("+fmt.Sprintf("%q", dir+"/session.pkl")+")")
		closeK(rk)
		if err != nil {
			return err
		}
		loads = append(loads, sec*1e3)
	}
	v, sp = bench.Median(plain)
	refLoad, _ := bench.Median(loads)
	e.report.Add(bench.Figure{Name: "restore of the reference namespace, plain kernel", Value: v, Spread: sp, Unit: "ms",
		Reference: "dill.load_session", RefValue: refLoad, Goal: "<= 200 ms", Note: summary})

	// The daemon's path: a forked kernel, whose template has imported dill already.
	m, err := kernel.NewManager(kernel.ManagerConfig{Python: e.py, StateDir: e.tmp("mgr"), Fork: true, Logger: e.log})
	if err != nil {
		return err
	}
	defer m.Close()
	var forked []float64
	for range e.runs {
		fo := e.opts()
		fo.Restore = dir
		fk, err := m.Start(e.ctx, fo)
		if err != nil {
			return err
		}
		if fr := fk.Restored(); fr != nil && fr.Error == "" {
			forked = append(forked, fr.Seconds*1e3)
		}
		closeK(fk)
	}
	if len(forked) > 0 {
		v, sp = bench.Median(forked)
		e.report.Add(bench.Figure{Name: "restore of the reference namespace, forked kernel", Value: v, Spread: sp, Unit: "ms",
			Reference: "dill.load_session", RefValue: refLoad, Goal: "<= 200 ms"})
	}
	return nil
}

// cellSeconds runs code in k and returns how long it took inside the kernel.
func cellSeconds(ctx context.Context, k *kernel.Kernel, code string) (float64, error) {
	res, err := execOK(ctx, k, "import time as _t\n_t0 = _t.perf_counter()\n"+code+"\nprint(_t.perf_counter() - _t0)")
	if err != nil {
		return 0, err
	}
	var sec float64
	if _, err := fmt.Sscan(strings.TrimSpace(res.Text), &sec); err != nil {
		return 0, fmt.Errorf("cell timing %q: %w", res.Text, err)
	}
	return sec, nil
}
