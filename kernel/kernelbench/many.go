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

// manyStatedS is the reference harness's wall time for the same 100 kernels, stated for its
// own machine: context, not a reference measured here.
const manyStatedS = 6

// many starts ManyKernels kernels from the fork server, runs one cell in each, and sums their
// private memory, once per run. The reference is one plain kernel's start time and private
// memory, times N, measured in the same run.
func (e *env) many() error {
	n := ManyKernels
	var walls, mems, refWalls, refMems []float64
	for range e.runs {
		start, mem, err := e.plainOne()
		if err != nil {
			return err
		}
		refWalls, refMems = append(refWalls, start.Seconds()*float64(n)), append(refMems, mem*float64(n))
		wall, total, err := e.manyRun(n)
		if err != nil {
			return err
		}
		walls, mems = append(walls, wall.Seconds()), append(mems, total)
	}
	v, sp := bench.Median(walls)
	ref, _ := bench.Median(refWalls)
	f := bench.Figure{Name: fmt.Sprintf("%d kernels from the fork server, wall", n), Value: v, Spread: sp, Unit: "s",
		Reference: "N × one plain launch", RefValue: ref}
	if n == 100 {
		f.Stated, f.StatedBy = manyStatedS, "reference harness, on its machine"
	}
	e.report.Add(f)
	v, sp = bench.Median(mems)
	ref, _ = bench.Median(refMems)
	e.report.Add(bench.Figure{Name: fmt.Sprintf("%d kernels, total private memory", n), Value: v, Spread: sp, Unit: "MB",
		Reference: "N × one plain kernel", RefValue: ref})
	return nil
}

// plainOne returns a plain kernel's start time (the second start, so the first pays for cold
// caches) and its private memory after one cell.
func (e *env) plainOne() (time.Duration, float64, error) {
	plain, err := e.start(e.opts())
	if err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	closeK(plain)
	plain, err = e.start(e.opts())
	if err != nil {
		return 0, 0, err
	}
	d := time.Since(t0)
	defer closeK(plain)
	if _, err := execOK(e.ctx, plain, "1+1"); err != nil {
		return 0, 0, err
	}
	mem, err := privateMB(plain.PID())
	return d, mem, err
}

// manyRun starts n kernels at once from a fresh fork server, runs 1+1 in each, and returns the
// wall time and their total private memory.
func (e *env) manyRun(n int) (time.Duration, float64, error) {
	m, err := kernel.NewManager(kernel.ManagerConfig{Python: e.py, StateDir: e.tmp("many"), Fork: true, MaxLive: n + 1, Logger: e.log})
	if err != nil {
		return 0, 0, err
	}
	defer m.Close()
	ks := make([]*kernel.Kernel, n)
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
	t := time.Now()
	var wg sync.WaitGroup
	for i := range ks {
		wg.Go(func() {
			k, err := m.Start(e.ctx, e.opts())
			if err == nil {
				_, err = execOK(e.ctx, k, "1+1")
			}
			ks[i], errs[i] = k, err
		})
	}
	wg.Wait()
	wall := time.Since(t)
	var total float64
	for i, k := range ks {
		if errs[i] != nil {
			return 0, 0, fmt.Errorf("kernel %d: %w", i, errs[i])
		}
		mb, err := privateMB(k.PID())
		if err != nil {
			return 0, 0, err
		}
		total += mb
	}
	return wall, total, nil
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
