package kernelbench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/arborhq/arbor/bench"
	"github.com/arborhq/arbor/kernel"
)

// many starts ManyKernels kernels from the fork server, runs one cell in each, and sums their
// private memory. The reference is one plain kernel's start time and private memory, times N.
func (e *env) many() error {
	n := ManyKernels
	plain, err := e.start(e.opts())
	if err != nil {
		return err
	}
	t0 := time.Now()
	closeK(plain)
	plain, err = e.start(e.opts())
	if err != nil {
		return err
	}
	plainStart := time.Since(t0)
	if _, err := execOK(e.ctx, plain, "1+1"); err != nil {
		return err
	}
	plainMem, err := privateMB(plain.PID())
	closeK(plain)
	if err != nil {
		return err
	}

	m, err := kernel.NewManager(kernel.ManagerConfig{Python: e.py, StateDir: e.tmp("many"), Fork: true, MaxLive: n + 1, Logger: e.log})
	if err != nil {
		return err
	}
	defer m.Close()
	ks := make([]*kernel.Kernel, n)
	errs := make([]error, n)
	t := time.Now()
	var wg sync.WaitGroup
	for i := range ks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := m.Start(e.ctx, e.opts())
			if err == nil {
				_, err = execOK(e.ctx, k, "1+1")
			}
			ks[i], errs[i] = k, err
		}()
	}
	wg.Wait()
	wall := time.Since(t)
	var total float64
	for i, k := range ks {
		if errs[i] != nil {
			return fmt.Errorf("kernel %d: %w", i, errs[i])
		}
		mb, err := privateMB(k.PID())
		if err != nil {
			return err
		}
		total += mb
	}
	e.report.Add(bench.Figure{Name: fmt.Sprintf("%d kernels from the fork server, wall", n), Value: wall.Seconds(), Unit: "s",
		Reference: "N × one plain launch", RefValue: plainStart.Seconds() * float64(n), Note: "reference harness: ≈ 6 s on its machine"})
	e.report.Add(bench.Figure{Name: fmt.Sprintf("%d kernels, total private memory", n), Value: total, Unit: "MB",
		Reference: "N × one plain kernel", RefValue: plainMem * float64(n)})
	var cw sync.WaitGroup
	for _, k := range ks {
		cw.Add(1)
		go func() {
			defer cw.Done()
			k.Close(context.Background())
		}()
	}
	cw.Wait()
	return nil
}

// privateMB is Private_Clean + Private_Dirty of pid, in MB.
func privateMB(pid int) (float64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0, fmt.Errorf("memory of kernel %d: %w", pid, err)
	}
	var kb float64
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) >= 2 && (string(f[0]) == "Private_Clean:" || string(f[0]) == "Private_Dirty:") {
			v, _ := strconv.ParseFloat(string(f[1]), 64)
			kb += v
		}
	}
	return kb / 1024, nil
}
