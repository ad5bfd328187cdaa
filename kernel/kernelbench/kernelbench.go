// Package kernelbench measures the kernel package for `arbor bench kernel`: every figure beside
// a reference measured in the same run — Python's jupyter_client against the same ipykernel
// (scripts embedded under ref/), or Arbor's own plain launch.
//
// Call [Run] with [Options] naming the figure groups wanted (none for all): launch, exec,
// stdout, bridge, interrupt, death, snapshot, many, gateway (kernels on a Jupyter Server
// against local ones, see gateway.go); and the runs, how many times each
// measurement is repeated (its median is the figure). Without the arbor binary:
//
//	go test ./kernel/kernelbench -run TestRun -v -args -kernelbench [-kernelbench.groups=exec,stdout] [-kernelbench.runs=5]
//
// The whole run takes a few minutes on two cores at 5 runs; "many" (100 kernels, ≈ 1.7 GB,
// started once per run) dominates.
package kernelbench

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/arborhq/arbor/bench"
	"github.com/arborhq/arbor/kernel"
)

//go:embed ref/jc_bench.py
var jcBench []byte

// Groups lists the figure groups in the order Run measures them.
var Groups = []string{"launch", "exec", "stdout", "bridge", "interrupt", "death", "snapshot", "many", "gateway"}

// ManyKernels is how many kernels the "many" group starts from the fork server.
var ManyKernels = 100

// Options choose what Run measures.
type Options struct {
	Groups []string     // figure groups to measure, from [Groups]; none: all
	Runs   int          // times each measurement is repeated, the figure being the median (5)
	Logger *slog.Logger // progress at Info; nil discards
}

// Validate reports unknown groups and negative runs.
func (o Options) Validate() error {
	for _, g := range o.Groups {
		if !slices.Contains(Groups, g) {
			return fmt.Errorf("kernel bench: unknown group %q; want one of %s", g, strings.Join(Groups, ", "))
		}
	}
	if o.Runs < 0 {
		return fmt.Errorf("kernel bench: %d runs", o.Runs)
	}
	return nil
}

type env struct {
	ctx    context.Context
	py     string
	dir    string // scratch, removed at the end
	runs   int
	log    *slog.Logger
	report *bench.Report
}

// Run measures the groups o names and returns the report.
func Run(ctx context.Context, o Options) (*bench.Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	which, logger := o.Groups, o.Logger
	if len(which) == 0 {
		which = Groups
	}
	if o.Runs == 0 {
		o.Runs = 5
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	py, err := kernel.FindPython()
	if err != nil {
		return nil, fmt.Errorf("kernel bench: %w", err)
	}
	dir, err := os.MkdirTemp("", "arbor-kernelbench-")
	if err != nil {
		return nil, fmt.Errorf("kernel bench: %w", err)
	}
	defer os.RemoveAll(dir)
	e := &env{ctx: ctx, py: py, dir: dir, runs: o.Runs, log: logger, report: &bench.Report{Suite: "kernel"}}
	steps := map[string]func() error{
		"launch": e.launch, "exec": e.exec, "stdout": e.stdout, "bridge": e.bridge,
		"interrupt": e.interrupt, "death": e.death, "snapshot": e.snapshot, "many": e.many,
		"gateway": e.gateway,
	}
	for _, g := range Groups {
		if !slices.Contains(which, g) {
			continue
		}
		logger.Info("kernel bench", "group", g)
		if err := steps[g](); err != nil {
			return e.report, fmt.Errorf("kernel bench %s: %w", g, err)
		}
	}
	return e.report, nil
}

// tmp returns a fresh directory under the scratch dir.
func (e *env) tmp(name string) string {
	d, err := os.MkdirTemp(e.dir, name+"-")
	if err != nil {
		panic(err) // the scratch dir was just created by us
	}
	return d
}

func (e *env) opts() kernel.Options {
	return kernel.Options{Python: e.py, Dir: e.tmp("wt"), StateDir: e.tmp("st"), Logger: e.log}
}

func (e *env) start(o kernel.Options) (*kernel.Kernel, error) {
	return kernel.Start(e.ctx, o)
}

func closeK(k *kernel.Kernel) { k.Close(context.Background()) }

// jc runs the embedded jupyter_client reference and returns its durations.
func (e *env) jc(what string, args ...int) ([]time.Duration, error) {
	script := filepath.Join(e.dir, "jc_bench.py")
	if err := os.WriteFile(script, jcBench, 0o600); err != nil {
		return nil, err
	}
	argv := []string{script, what}
	for _, a := range args {
		argv = append(argv, fmt.Sprint(a))
	}
	cmd := exec.CommandContext(e.ctx, e.py, argv...)
	cmd.Env = append(os.Environ(), "PYDEVD_DISABLE_FILE_VALIDATION=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tail := stderr.String()
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		return nil, fmt.Errorf("jupyter_client reference %s: %w\n%s", what, err, tail)
	}
	var res map[string][]float64
	if err := json.Unmarshal(out, &res); err != nil {
		return nil, fmt.Errorf("jupyter_client reference %s: %w: %s", what, err, out)
	}
	var ds []time.Duration
	for _, s := range res[what] {
		ds = append(ds, time.Duration(s*float64(time.Second)))
	}
	return ds, nil
}

// execOK runs code and fails unless it succeeded.
func execOK(ctx context.Context, k *kernel.Kernel, code string) (*kernel.Result, error) {
	res, err := k.Execute(ctx, code, kernel.ExecOptions{Timeout: 5 * time.Minute})
	if err != nil {
		return nil, err
	}
	if res.Status != kernel.StatusOK {
		return res, fmt.Errorf("cell %.40q: %s: %.300s", code, res.Status, res.Text)
	}
	return res, nil
}
