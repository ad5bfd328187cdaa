package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/arborhq/arbor/agents"
	"github.com/arborhq/arbor/sandbox"
	"github.com/arborhq/arbor/server"
	"github.com/arborhq/arbor/workspace"
)

func cmdDaemon(ctx context.Context, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "stop":
			return daemonStop(ctx)
		case "status":
			return daemonStatus(ctx)
		}
	}
	fs := flag.NewFlagSet("daemon", flag.ContinueOnError)
	ov := workspace.OverridesFromEnv()
	socket := fs.String("socket", workspace.SocketPath(), "Unix socket to listen on (ARBOR_SOCKET)")
	stateDir := fs.String("state-dir", workspace.UserDirs().State, "daemon state directory (ARBOR_STATE_DIR)")
	idle := fs.Duration("idle-timeout", 15*time.Minute, "exit after this long with no clients and no live sessions (0 = never)")
	fs.StringVar(&ov.ModelBaseURL, "model-base-url", ov.ModelBaseURL, "OpenAI-compatible base URL (ARBOR_MODEL_BASE_URL)")
	fs.StringVar(&ov.Model, "model", ov.Model, "model id (ARBOR_MODEL)")
	fs.StringVar(&ov.APIKeyEnv, "api-key-env", ov.APIKeyEnv, "name of the variable holding the API key (ARBOR_API_KEY_ENV)")
	fs.StringVar(&ov.KernelPython, "kernel-python", ov.KernelPython, "Python with ipykernel (ARBOR_KERNEL_PYTHON)")
	maxKernels := fs.Int("max-kernels", 16, "kernel processes alive at once; idle ones beyond it are parked (snapshot, stop)")
	plain := fs.Bool("plain-kernels", false, "launch each kernel plainly instead of forking a pre-imported template")
	writeTimeout := fs.Duration("write-timeout", 30*time.Second, "disconnect a client that does not read what it is sent for this long")
	verbose := fs.Bool("v", false, "debug logging")
	if err := fs.Parse(args); err != nil {
		return err
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	opts := agents.Options{StateDir: *stateDir, Overrides: ov, Logger: logger,
		MaxKernels: *maxKernels, PlainKernels: *plain, SocketDir: filepath.Dir(*socket)}
	dopts := server.DaemonOptions{
		Socket: *socket, IdleTimeout: *idle, Version: version, Logger: logger,
		WriteTimeout: *writeTimeout, JournalDir: filepath.Join(*stateDir, "journal"),
	}
	daemonTestHooks(&opts, &dopts) // none in the binary users run (testhooks.go)
	svc, err := agents.New(opts)
	if err != nil {
		return err
	}
	// At start, not at the first kernel: this also removes what a killed daemon left.
	budget := sandbox.DetectBudget()
	logger.Info("kernel process budget", "enforced", budget.String())
	defer budget.Close()
	dopts.Agents = svc
	return server.RunDaemon(ctx, dopts)
}

func daemonStop(ctx context.Context) error {
	c, err := connect(ctx, false, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	st, err := server.DaemonStop.Call(ctx, c, server.Empty{})
	if err != nil {
		return err
	}
	// The connection closes as the daemon starts shutting down; it then still closes its
	// kernels and holds its lock. Report stopped only once the process is gone, so that
	// `arbor daemon stop && arbor run …` does not meet the old daemon's lock.
	deadline := time.After(30 * time.Second)
	select {
	case <-c.Done():
	case <-deadline:
		return fmt.Errorf("daemon pid %d did not stop within 30s", st.PID)
	}
	for processRuns(st.PID) {
		select {
		case <-deadline:
			return fmt.Errorf("daemon pid %d did not exit within 30s", st.PID)
		case <-time.After(20 * time.Millisecond):
		}
	}
	fmt.Printf("daemon pid %d stopped\n", st.PID)
	return nil
}

// processRuns reports whether pid is a running process (a zombie has finished).
func processRuns(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !os.IsNotExist(err) // no /proc: trust kill(pid, 0)
	}
	// The state follows the command name, which is in parentheses and may contain spaces.
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}

func daemonStatus(ctx context.Context) error {
	c, err := connect(ctx, false, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	st, err := server.DaemonStatus.Call(ctx, c, server.Empty{})
	if err != nil {
		return err
	}
	return printJSON(st)
}

func cmdLSP(ctx context.Context, args []string) error {
	nc, err := server.Dial(ctx, server.DialOptions{
		Socket: workspace.SocketPath(), Autostart: true,
		LogFile: workspace.UserDirs().State + "/daemon.log",
	})
	if err != nil {
		return err
	}
	return server.Forward(ctx, nc, os.Stdin, os.Stdout)
}
