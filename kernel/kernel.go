package kernel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Kernel is one live IPython kernel. Its methods are safe for concurrent use; cells run one at a
// time in the order Execute is called.
type Kernel struct {
	opts     Options
	log      *slog.Logger
	python   string
	launcher string
	bridge   *bridge

	execSem chan struct{} // one cell at a time; a channel so waiting honours ctx

	mu       sync.Mutex
	p        *proc // current process; replaced by a restart
	restored *Manifest
	lastSnap string // dir of the last snapshot taken
	closed   bool

	done     chan struct{} // closed when the kernel is dead for good
	doneOnce sync.Once
	wg       sync.WaitGroup // watcher goroutines
}

// Start launches a kernel and returns once it answers kernel_info with iopub connected. ctx
// bounds startup only; the kernel outlives it. Call Close to stop it.
func Start(ctx context.Context, opts Options) (*Kernel, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	py := opts.Python
	if py == "" {
		var err error
		if py, err = FindPython(); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("start kernel: state dir: %w", err)
	}
	if err := os.Chmod(opts.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("start kernel: state dir: %w", err)
	}
	launcher, err := installRuntime(filepath.Join(opts.StateDir, "runtime"))
	if err != nil {
		return nil, err
	}
	k := &Kernel{
		opts: opts, log: log, python: py, launcher: launcher,
		execSem: make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	if opts.Host != nil {
		if k.bridge, err = newBridge(opts.StateDir, opts.Host, log); err != nil {
			return nil, err
		}
	}
	p, err := k.launch(ctx, opts.Restore)
	if err != nil {
		k.closeBridge()
		return nil, err
	}
	k.p = p
	k.watch(p)
	return k, nil
}

// launch starts one process for k, restoring the snapshot in restore when it is not "".
func (k *Kernel) launch(ctx context.Context, restore string) (*proc, error) {
	s := launchSpec{python: k.python, launcher: k.launcher, tag: newID()[:8], env: k.env()}
	if restore != "" {
		s.restore = restore
		s.report = filepath.Join(k.opts.StateDir, "restore-"+s.tag+".json")
	}
	p, err := launch(ctx, k.opts, s, k.log)
	if err != nil {
		return nil, err
	}
	if restore != "" {
		m, err := readRestoreReport(s.report)
		if err != nil {
			k.log.Warn("kernel: restore report", "err", err)
		}
		k.mu.Lock()
		k.restored = m
		k.mu.Unlock()
	}
	k.log.Info("kernel: started", "pid", p.pid, "dir", k.opts.Dir, "transport", p.conn.Transport)
	return p, nil
}

// secretEnv matches variable names that look like credentials. Model API keys must never reach
// kernels (the model could print them), so they are dropped from the inherited environment;
// Options.Env can still pass anything explicitly.
var secretEnv = regexp.MustCompile(`(?i)(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)`)

func (k *Kernel) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if secretEnv.MatchString(name) || strings.HasPrefix(name, "ARBOR_") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		"PYDEVD_DISABLE_FILE_VALIDATION=1", // silences debugpy's frozen-module warnings
		"PYTHONUNBUFFERED=1",
		"MPLBACKEND=agg",
	)
	if k.bridge != nil {
		env = append(env, "ARBOR_BRIDGE="+k.bridge.path, "ARBOR_BRIDGE_TOKEN="+k.bridge.token)
	}
	return append(env, k.opts.Env...)
}

// watch closes k.done when p dies, unless p was replaced by a restart or k was closed first.
func (k *Kernel) watch(p *proc) {
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		<-p.exited
		k.mu.Lock()
		current := k.p == p
		k.mu.Unlock()
		if current {
			if !k.isClosed() {
				k.log.Warn("kernel: process died", "pid", p.pid, "status", p.waitErr)
			}
			k.markDone()
		}
	}()
}

func (k *Kernel) markDone() { k.doneOnce.Do(func() { close(k.done) }) }

func (k *Kernel) isClosed() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.closed
}

// current returns the live process.
func (k *Kernel) current() *proc {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.p
}

// Done is closed when the kernel process dies (or after Close).
func (k *Kernel) Done() <-chan struct{} { return k.done }

// PID is the process id of the current kernel process (the leader of its process group).
func (k *Kernel) PID() int { return k.current().pid }

// Restored describes the snapshot restored at the last (re)start, or nil if none was.
func (k *Kernel) Restored() *Manifest {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.restored
}

// ErrDead is returned when a kernel is used after it died or was closed.
var ErrDead = errors.New("kernel is not running")

// Interrupt asks the kernel to interrupt the running cell: interrupt_request on the control
// channel, falling back to SIGINT to the process group when control does not answer.
func (k *Kernel) Interrupt(ctx context.Context) error {
	p := k.current()
	if p.isExited() {
		return fmt.Errorf("interrupt kernel: %w", ErrDead)
	}
	if err := p.interruptRequest(ctx, time.Second); err == nil {
		return nil
	} else if ctx.Err() != nil {
		return fmt.Errorf("interrupt kernel: %w", err)
	}
	if err := p.signal(syscall.SIGINT); err != nil {
		return fmt.Errorf("interrupt kernel: %w", err)
	}
	return nil
}

// interruptRequest sends interrupt_request and waits up to wait for interrupt_reply.
func (p *proc) interruptRequest(ctx context.Context, wait time.Duration) error {
	h, box, err := p.ch.request(p.ch.control, "interrupt_request", struct{}{})
	if err != nil {
		return err
	}
	defer p.ch.unregister(h.MsgID)
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-box.notify:
			for _, m := range box.take() {
				if m.Header.MsgType == "interrupt_reply" {
					return nil
				}
			}
		case <-t.C:
			return errors.New("no interrupt_reply")
		case <-p.exited:
			return ErrDead
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close shuts the kernel down: shutdown_request on control, a short wait, then SIGKILL to the
// whole process group. It returns when the process is reaped and every goroutine has exited.
func (k *Kernel) Close(ctx context.Context) error {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		<-k.done
		return nil
	}
	k.closed = true
	p := k.p
	k.mu.Unlock()

	if !p.isExited() {
		if h, box, err := p.ch.request(p.ch.control, "shutdown_request", map[string]bool{"restart": false}); err == nil {
			t := time.NewTimer(time.Second)
			select {
			case <-p.exited:
			case <-box.notify:
				// The reply comes before the process exits; give it a moment to do so.
				t.Reset(300 * time.Millisecond)
				select {
				case <-p.exited:
				case <-t.C:
				case <-ctx.Done():
				}
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
			p.ch.unregister(h.MsgID)
		}
	}
	// Kill the group even after a clean exit: cells may have left subprocesses behind.
	p.kill()
	<-p.exited
	p.ch.close()
	p.sockCancel()
	k.closeBridge()
	k.markDone()
	k.wg.Wait()
	k.log.Info("kernel: closed", "pid", p.pid)
	return nil
}

func (k *Kernel) closeBridge() {
	if k.bridge != nil {
		k.bridge.close()
	}
}
