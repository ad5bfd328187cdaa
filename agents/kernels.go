package agents

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

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
	notice := ""
	if s.kern != nil {
		select {
		case <-s.kern.Done():
			s.append(ctx, EvKernel, map[string]any{"event": "died", "pid": s.kern.PID()})
			s.kern.Close(ctx)
			s.kern = nil
			s.live.Store(false)
			notice = "the previous kernel died; this is a fresh kernel and earlier variables are gone"
		default:
			return s.kern, "", nil
		}
	}
	opts := kernel.Options{
		Python:   s.cfg.KernelPython,
		Dir:      s.meta.Worktree,
		StateDir: filepath.Join(s.dir, "kernel"),
		Env:      []string{"ARBOR_SESSION=" + s.meta.ID},
		Host:     hostHandler{s},
		Logger:   s.svc.log.With("session", s.meta.ID),
	}
	k, err := s.svc.kernels.Start(ctx, opts)
	if err != nil {
		s.append(ctx, EvKernel, map[string]any{"event": "start_failed", "error": err.Error()})
		return nil, "", fmt.Errorf("start kernel: %w", err)
	}
	s.kern = k
	s.live.Store(true)
	s.append(ctx, EvKernel, map[string]any{"event": "started", "pid": k.PID()})
	return k, notice, nil
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
