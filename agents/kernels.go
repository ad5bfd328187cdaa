package agents

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/kernel"
)

// kernelSlot owns a session's kernel. It has a lock of its own, not the session's: starting a
// kernel takes seconds, and one start at a time must be waited for by whoever else wants the
// kernel, without holding up readers of the session. live answers without waiting.
type kernelSlot struct {
	mu sync.Mutex // held while a kernel starts
	k  *kernel.Kernel
	up atomic.Bool // k != nil
}

func (ks *kernelSlot) live() bool { return ks.up.Load() }

// current returns the kernel, waiting for a start in progress; nil when there is none.
func (ks *kernelSlot) current() *kernel.Kernel {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.k
}

// take removes and returns the kernel; the caller closes it.
func (ks *kernelSlot) take() *kernel.Kernel {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.setLocked(nil)
}

// setLocked replaces the kernel, returning the old one; the caller holds mu.
func (ks *kernelSlot) setLocked(k *kernel.Kernel) *kernel.Kernel {
	old := ks.k
	ks.k = k
	ks.up.Store(k != nil)
	return old
}

// warmKernel starts the session's kernel in the background so the first tool call does not
// wait for Python's imports.
func (s *Session) warmKernel() {
	s.svc.spawn(func() {
		ctx, cancel := context.WithTimeout(s.svc.ctx, 2*time.Minute)
		defer cancel()
		if _, _, err := s.ensureKernel(ctx); err != nil && s.svc.ctx.Err() == nil {
			s.svc.log.Warn("warm kernel", "session", s.meta.ID, "err", err)
		}
	})
}

// ensureKernel returns a live kernel, starting one (again) when there is none or it died. The
// notice tells the model when its namespace was lost or restored.
func (s *Session) ensureKernel(ctx context.Context) (*kernel.Kernel, string, error) {
	if _, err := s.awaitWorktree(ctx); err != nil { // the kernel's cwd
		return nil, "", err
	}
	ks := &s.kernel
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if s.State() == Stopped {
		return nil, "", fmt.Errorf("%w: session %s is stopped", ErrInvalidState, s.meta.ID)
	}
	notice := ""
	if k := ks.k; k != nil {
		select {
		case <-k.Done():
			s.append(ctx, event.Kernel{Event: "died", PID: k.PID()})
			k.Close(ctx)
			ks.setLocked(nil)
			notice = "the previous kernel died; this is a fresh kernel and earlier variables are gone"
		default:
			return k, "", nil
		}
	}
	snap := s.snapshotDir()
	opts := kernel.Options{
		Python:   s.cfg.KernelPython,
		Dir:      s.meta.Worktree,
		StateDir: filepath.Join(s.dir, "kernel"),
		Snapshot: snap,
		Revive:   true,
		Env:      []string{"ARBOR_SESSION=" + s.meta.ID, "ARBOR_SKILLS=" + s.skillsDir()},
		Host:     hostHandler{s},
		Logger:   s.svc.log.With("session", s.meta.ID),
		Limits:   s.cfg.Limits,
	}
	if err := s.kernelOptions(&opts); err != nil {
		s.append(ctx, event.Kernel{Event: "start_failed", Error: err.Error()})
		return nil, "", fmt.Errorf("start kernel: %w", err)
	}
	if err := s.gatewayOptions(&opts); err != nil {
		s.append(ctx, event.Kernel{Event: "start_failed", Error: err.Error()})
		return nil, "", fmt.Errorf("start kernel: %w", err)
	}
	if _, err := os.Stat(filepath.Join(snap, "manifest.json")); err == nil {
		opts.Restore = snap
	}
	k, err := s.svc.kernels.Start(ctx, opts)
	if err != nil {
		s.append(ctx, event.Kernel{Event: "start_failed", Error: err.Error()})
		return nil, "", fmt.Errorf("start kernel: %w", err)
	}
	ks.setLocked(k)
	s.mu.Lock()
	last := s.lastCell
	s.mu.Unlock()
	if last > 0 {
		// The model's cell numbers go on from where the last kernel stopped, so a number it
		// has seen (in _arbor_out[N], a traceback) never means two cells.
		if r, err := k.ExecuteHidden(ctx, fmt.Sprintf("get_ipython().execution_count = %d", last+1)); err != nil || r.Status != kernel.StatusOK {
			s.svc.log.Warn("continue cell numbers", "session", s.meta.ID, "err", err, "status", statusOf(r))
		}
	}
	sandboxed := opts.Sandbox != ""
	started := event.Kernel{Event: "started", PID: k.PID(), Sandboxed: &sandboxed}
	if opts.Gateway != nil {
		s.svc.log.Info("kernel runs on a gateway", "session", s.meta.ID, "url", opts.Gateway.URL)
	} else if !sandboxed {
		s.svc.log.Warn("kernel runs unsandboxed", "session", s.meta.ID, "sandbox", s.cfg.Sandbox, "reason", s.svc.sandbox.Reason)
	}
	if m := k.Restored(); m != nil {
		summary := m.Summary()
		if m.Error == "" && m.Cell > 0 && m.Cell < last {
			summary += fmt.Sprintf("; cells %d–%d ran after that snapshot, so what they assigned is gone", m.Cell+1, last)
		}
		notice = "this kernel was restarted and the namespace restored: " + summary
		started.Restored = summary
	}
	s.append(ctx, started)
	return k, notice, nil
}

// gatewayOptions points the kernel at the workspace's gateway ("kernels.gateway"), if it has
// one: the kernel runs there, confined by the cluster rather than bubblewrap here, with the
// session's worktree at the same path (the shared-filesystem mode of DESIGN.md).
func (s *Session) gatewayOptions(o *kernel.Options) error {
	g := s.cfg.Kernels.Gateway
	if g == nil {
		return nil
	}
	tok, err := g.Token()
	if err != nil {
		return err
	}
	o.Gateway = &kernel.Gateway{URL: g.URL, Token: tok, KernelName: g.KernelName}
	o.Sandbox, o.SandboxHide, o.SandboxReadOnly, o.SandboxHome = "", nil, nil, nil
	return nil
}

func (s *Session) snapshotDir() string { return filepath.Join(s.dir, "kernel", "snapshot") }

// scheduleInactive arms the idle timer: an idle session past its idle timeout snapshots its
// namespace, stops its kernel and goes inactive. A message, an attach or a prompt revives it.
func (s *Session) scheduleInactive() {
	_, idle := s.cfg.Durations()
	if idle <= 0 {
		return
	}
	s.mu.Lock()
	if s.idleTimer != nil {
		s.idleTimer.Stop()
	}
	// The timer's work is a goroutine of the service like any other: Close stops the timer
	// and waits for a move to inactive already under way.
	s.idleTimer = time.AfterFunc(idle, func() { s.svc.spawn(s.goInactive) })
	s.mu.Unlock()
}

func (s *Session) goInactive() {
	s.mu.Lock()
	st := s.state
	quiet := (st == Idle || st == Failed) && s.holder == free && len(s.pending) == 0
	if quiet {
		s.holder = idleHolder // a message now waits for us to finish
	}
	s.mu.Unlock()
	if !quiet || s.svc.ctx.Err() != nil {
		if quiet {
			s.release()
		}
		return
	}
	ctx, cancel := context.WithTimeout(s.svc.ctx, time.Minute)
	defer cancel()
	if k := s.kernel.current(); k != nil {
		if m, err := k.Snapshot(ctx, s.snapshotDir()); err != nil {
			s.append(ctx, event.Kernel{Event: "snapshot_failed", Error: err.Error()})
		} else {
			s.append(ctx, event.Kernel{Event: "snapshot", Summary: m.Summary()})
		}
	}
	s.stopKernel(ctx)
	s.mu.Lock()
	w := s.watch
	s.watch = nil // inotify instances are per user and few: an inactive session holds none
	s.mu.Unlock()
	if w != nil {
		w.Close()
	}
	if st == Idle { // a failed session keeps its state and error; it just holds nothing
		s.setState(ctx, Inactive, "")
	}
	s.release()
}

// release gives up a reservation taken by goInactive or a merge, handing it to a turn for any
// message that arrived meanwhile.
func (s *Session) release() {
	s.mu.Lock()
	again := len(s.pending) > 0 && s.state != Stopped
	if again {
		s.holder = turnHolder
	} else {
		s.holder = free
	}
	s.mu.Unlock()
	if again && !s.svc.spawn(s.runTurns) {
		s.mu.Lock()
		s.holder = free // the service is closing: the message waits in the log for recovery
		s.mu.Unlock()
	}
	if !again {
		s.svc.heartbeatsFree(s) // ticks held back while the session was reserved
	}
}

func execOptions(timeout time.Duration) kernel.ExecOptions {
	return kernel.ExecOptions{Timeout: timeout}
}

// kernelStarter is how the service gets kernels: plainly, or from a fast-start manager.
type kernelStarter interface {
	Start(ctx context.Context, opts kernel.Options) (*kernel.Kernel, error)
}

type plainKernels struct{}

func (plainKernels) Start(ctx context.Context, opts kernel.Options) (*kernel.Kernel, error) {
	return kernel.Start(ctx, opts)
}

// managedKernels starts a kernel.Manager (fork server, warm pool, parking) on first use, so a
// daemon with no sessions starts no Python.
type managedKernels struct {
	cfg kernel.ManagerConfig
	mu  sync.Mutex
	m   *kernel.Manager
}

func (mk *managedKernels) Start(ctx context.Context, opts kernel.Options) (*kernel.Kernel, error) {
	mk.mu.Lock()
	if mk.m == nil {
		m, err := kernel.NewManager(mk.cfg)
		if err != nil {
			mk.mu.Unlock()
			return nil, err
		}
		mk.m = m
	}
	m := mk.m
	mk.mu.Unlock()
	return m.Start(ctx, opts)
}

func (mk *managedKernels) Close() error {
	mk.mu.Lock()
	defer mk.mu.Unlock()
	if mk.m == nil {
		return nil
	}
	return mk.m.Close()
}
