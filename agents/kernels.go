package agents

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/kernel"
)

// warmKernel starts the session's kernel in the background so the first tool call does not
// wait for Python's imports.
func (s *Session) warmKernel() {
	s.svc.wg.Add(1)
	go func() {
		defer s.svc.wg.Done()
		ctx, cancel := context.WithTimeout(s.svc.ctx, 2*time.Minute)
		defer cancel()
		if _, _, err := s.ensureKernel(ctx); err != nil && s.svc.ctx.Err() == nil {
			s.svc.log.Warn("warm kernel", "session", s.meta.ID, "err", err)
		}
	}()
}

// ensureKernel returns a live kernel, starting one (again) when there is none or it died. The
// notice tells the model when its namespace was lost or restored.
func (s *Session) ensureKernel(ctx context.Context) (*kernel.Kernel, string, error) {
	s.kmu.Lock()
	defer s.kmu.Unlock()
	if s.State() == Stopped {
		return nil, "", fmt.Errorf("%w: session %s is stopped", ErrInvalidState, s.meta.ID)
	}
	notice := ""
	if s.kern != nil {
		select {
		case <-s.kern.Done():
			s.append(ctx, event.Kernel{Event: "died", PID: s.kern.PID()})
			s.kern.Close(ctx)
			s.kern = nil
			s.live.Store(false)
			notice = "the previous kernel died; this is a fresh kernel and earlier variables are gone"
		default:
			return s.kern, "", nil
		}
	}
	snap := s.snapshotDir()
	opts := kernel.Options{
		Python:       s.cfg.KernelPython,
		Dir:          s.meta.Worktree,
		StateDir:     filepath.Join(s.dir, "kernel"),
		Snapshot:     snap,
		Revive:       true,
		Sandbox:      s.cfg.Sandbox,
		AllowNetwork: s.cfg.AllowNetwork,
		Env:          []string{"ARBOR_SESSION=" + s.meta.ID},
		Host:         hostHandler{s},
		Logger:       s.svc.log.With("session", s.meta.ID),
	}
	if _, err := os.Stat(filepath.Join(snap, "manifest.json")); err == nil {
		opts.Restore = snap
	}
	k, err := s.svc.kernels.Start(ctx, opts)
	if err != nil {
		s.append(ctx, event.Kernel{Event: "start_failed", Error: err.Error()})
		return nil, "", fmt.Errorf("start kernel: %w", err)
	}
	s.kern = k
	s.live.Store(true)
	started := event.Kernel{Event: "started", PID: k.PID()}
	if m := k.Restored(); m != nil {
		notice = "this kernel was restarted and the namespace restored: " + m.Summary()
		started.Restored = m.Summary()
	}
	s.append(ctx, started)
	return k, notice, nil
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
	s.idleTimer = time.AfterFunc(idle, s.goInactive)
	s.mu.Unlock()
}

func (s *Session) goInactive() {
	s.mu.Lock()
	st := s.state
	quiet := (st == Idle || st == Failed) && !s.turnActive && len(s.pending) == 0
	if quiet {
		s.turnActive = true // reserve the session: a message now waits for us to finish
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
	s.kmu.Lock()
	k := s.kern
	s.kmu.Unlock()
	if k != nil {
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

// release gives up a reservation taken by goInactive, starting a turn for any message that
// arrived meanwhile.
func (s *Session) release() {
	s.mu.Lock()
	again := len(s.pending) > 0 && s.state != Stopped
	if !again {
		s.turnActive = false
	}
	s.mu.Unlock()
	if again {
		s.svc.wg.Add(1)
		go s.runTurns()
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
