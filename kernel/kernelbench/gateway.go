package kernelbench

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/arborhq/arbor/bench"
	"github.com/arborhq/arbor/kernel"
	"github.com/arborhq/arbor/kernel/jupytertest"
)

// GatewayKernels is how many kernels the "gateway" group starts at once, on the gateway and
// locally.
var GatewayKernels = 50

// gatewaySeqCells is how many 1+1 cells one kernel runs in a row for the sequential round trip.
const gatewaySeqCells = 200

// gateway measures kernels on a Jupyter Server against local ZeroMQ kernels in the same run:
// GatewayKernels started at once (each start's p50; locally from a Manager as the daemon
// configures it: fork server, boot slots), then 1+1 in all of them at once (p50 of every
// cell), and 1+1 in a row on one kernel. The server is ARBOR_BENCH_GATEWAY_URL (with the token
// in ARBOR_BENCH_GATEWAY_TOKEN), else a local jupyter server started for the run; without
// jupyter_server the group says so and measures nothing.
func (e *env) gateway() error {
	g := &kernel.Gateway{URL: os.Getenv("ARBOR_BENCH_GATEWAY_URL"), Token: os.Getenv("ARBOR_BENCH_GATEWAY_TOKEN")}
	where := g.URL
	if g.URL == "" {
		s, err := jupytertest.Launch()
		if err != nil {
			e.log.Warn("kernel bench: no gateway figures", "why", err)
			return nil
		}
		defer s.Close()
		g.URL, g.Token, g.KernelName = s.URL, s.Token, jupytertest.KernelName
		where = "a local jupyter server"
	}
	n := GatewayKernels
	var gs, ls, gr, lr, gq, lq []float64
	for range e.runs {
		start, rtt, seq, err := e.fanOut(n, nil)
		if err != nil {
			return fmt.Errorf("local kernels: %w", err)
		}
		ls, lr, lq = append(ls, ms(start)), append(lr, ms(rtt)), append(lq, ms(seq))
		if start, rtt, seq, err = e.fanOut(n, g); err != nil {
			return fmt.Errorf("gateway kernels: %w", err)
		}
		gs, gr, gq = append(gs, ms(start)), append(gr, ms(rtt)), append(gq, ms(seq))
	}
	add := func(name string, vals, refs []float64, ref string) {
		v, sp := bench.Median(vals)
		r, _ := bench.Median(refs)
		e.report.Add(bench.Figure{Name: name, Value: v, Spread: sp, Unit: "ms", Reference: ref, RefValue: r, Note: "gateway: " + where})
	}
	add(fmt.Sprintf("gateway kernel start, p50 of %d at once", n), gs, ls, fmt.Sprintf("local ZeroMQ kernels (fork server), %d at once", n))
	add(fmt.Sprintf("gateway 1+1 round trip, p50 over %d kernels at once", n), gr, lr, fmt.Sprintf("local ZeroMQ kernels, %d at once", n))
	add("gateway 1+1 round trip, one kernel, p50", gq, lq, "one local ZeroMQ kernel")
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// fanOut starts n kernels at once (on g, or locally when g is nil), then runs ten 1+1 cells in
// each, all kernels at once, then gatewaySeqCells in a row on the first. It returns the p50 of
// the starts, of the concurrent cells and of the sequential ones.
func (e *env) fanOut(n int, g *kernel.Gateway) (start, rtt, seq time.Duration, err error) {
	m, err := kernel.NewManager(kernel.ManagerConfig{Python: e.py, StateDir: e.tmp("fan"), Fork: true, MaxLive: n + 1, Logger: e.log})
	if err != nil {
		return 0, 0, 0, err
	}
	defer m.Close()
	ks := make([]*kernel.Kernel, n)
	starts := make([]time.Duration, n)
	errs := make([]error, n)
	defer func() {
		var cw sync.WaitGroup
		for _, k := range ks {
			if k != nil {
				cw.Go(func() { k.Close(context.Background()) })
			}
		}
		cw.Wait()
	}()
	var wg sync.WaitGroup
	for i := range ks {
		wg.Go(func() {
			o := e.opts()
			o.Gateway = g
			t := time.Now()
			k, err := m.Start(e.ctx, o)
			if err == nil {
				_, err = execOK(e.ctx, k, "1+1") // a kernel has started when it has answered a cell
			}
			ks[i], starts[i], errs[i] = k, time.Since(t), err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return 0, 0, 0, fmt.Errorf("kernel %d: %w", i, err)
		}
	}
	var mu sync.Mutex
	var cells []time.Duration
	for i := range ks {
		wg.Go(func() {
			for range 10 {
				t := time.Now()
				if _, err := execOK(e.ctx, ks[i], "1+1"); err != nil {
					errs[i] = err
					return
				}
				mu.Lock()
				cells = append(cells, time.Since(t))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return 0, 0, 0, fmt.Errorf("kernel %d: %w", i, err)
		}
	}
	var row []time.Duration
	for range gatewaySeqCells {
		t := time.Now()
		if _, err := execOK(e.ctx, ks[0], "1+1"); err != nil {
			return 0, 0, 0, err
		}
		row = append(row, time.Since(t))
	}
	return bench.Percentile(starts, 50), bench.Percentile(cells, 50), bench.Percentile(row, 50), nil
}
