package kernel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/arborhq/arbor/sandbox"
)

// Kernel is one session's IPython kernel. Its methods are safe for concurrent use; cells run one
// at a time in the order Execute is called. The process behind it may be replaced — by the
// timeout ladder, by Revive after a death, or by a Manager that parked it to save memory — and
// each replacement restores the latest snapshot.
type Kernel struct {
	opts     Options
	log      *slog.Logger
	python   string
	launcher string
	spawn    spawnFunc
	forked   bool // spawn is a fork server's; plain launch is the fallback
	bridge   *bridge
	gwc      *gatewayClient // Options.Gateway's client; nil for local kernels
	comm     *commBridge    // the host bridge of a gateway kernel
	mgr      *Manager       // nil for kernels from Start

	execSem chan struct{} // one cell at a time; a channel so waiting honours ctx
	// snapping is true while Snapshot holds execSem: park waits for that instead of skipping.
	snapping atomic.Bool

	mu       sync.Mutex
	p        *proc // current process; nil while being replaced
	restored *Manifest
	lastSnap string // dir of the last snapshot taken
	closed   bool
	parked   bool          // process stopped on purpose (Manager eviction); revived on use
	done     chan struct{} // closed when the current process dies unexpectedly, or on Close
	lastUse  time.Time
	adopting *pendingCell // a pooled kernel's adaptation cell, checked by the first cell (execSem)

	dirty chan struct{} // wakes the snapshot loop after a cell (cap 1)
	// unsaved: a cell ran since the last automatic snapshot. Guarded by execSem: cells set it,
	// snapshots of Options.Snapshot clear it, and the next cell flushes it before it runs.
	unsaved bool
	savedAt time.Time // when the last automatic snapshot was taken (guarded by execSem)
	// cells is the highest execution count seen (guarded by execSem): a replacement process
	// continues from it, so the model's cell numbers never repeat.
	cells      int
	stopCtx    context.Context
	stopCancel context.CancelFunc // called by Close: stops the snapshot loop
	loopWG     sync.WaitGroup     // the snapshot loop
	wg         sync.WaitGroup     // process watchers
	freeze     freezeGate         // see Freeze
}

// Start launches a kernel and returns once it answers kernel_info with iopub connected. ctx
// bounds startup only; the kernel outlives it. Call Close to stop it.
func Start(ctx context.Context, opts Options) (*Kernel, error) {
	k, err := newKernel(opts, spawnExec)
	if err != nil {
		return nil, err
	}
	if err := k.boot(ctx); err != nil {
		return nil, err
	}
	return k, nil
}

func newKernel(opts Options, spawn spawnFunc) (*Kernel, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var py string
	var err error
	switch {
	case opts.Gateway != nil: // the gateway's kernel spec says which Python
	case opts.Python != "":
		py, err = explicitPython(opts.Python)
	default:
		py, err = FindPython()
	}
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(opts.Dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("start kernel: working directory %q is not a directory", opts.Dir)
	}
	if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("start kernel: %w", err)
	}
	if err := os.Chmod(opts.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("start kernel: %w", err)
	}
	if opts.Snapshot != "" {
		// Written from inside the kernel (a sandboxed cell can reach it): made without following
		// a symlink a cell may have left in its place.
		f, err := sandbox.OpenDir(filepath.Dir(opts.Snapshot), filepath.Base(opts.Snapshot), true)
		if err != nil {
			return nil, fmt.Errorf("start kernel: snapshot dir: %w", err)
		}
		f.Close()
	}
	if opts.Sandbox != "" {
		if err := sandboxDirs(opts.StateDir); err != nil {
			return nil, err
		}
	}
	// The state dir is read-only to a sandboxed kernel, but one an older layout let a cell
	// write may hold a link where the runtime goes: refused, never written through.
	rt, err := sandbox.OpenDir(opts.StateDir, "runtime", true)
	if err != nil {
		return nil, fmt.Errorf("start kernel: %w", err)
	}
	rt.Close()
	launcher, err := installRuntime(filepath.Join(opts.StateDir, "runtime"))
	if err != nil {
		return nil, err
	}
	if opts.Gateway == nil {
		if opts.runDir, err = makeRunDir(opts.RuntimeDir); err != nil {
			return nil, fmt.Errorf("start kernel: %w", err)
		}
	}
	k := &Kernel{
		opts: opts, log: log, python: py, launcher: launcher, spawn: spawn,
		execSem: make(chan struct{}, 1),
		done:    make(chan struct{}),
		dirty:   make(chan struct{}, 1),
		lastUse: time.Now(),
	}
	if opts.Gateway != nil {
		k.gwc = newGatewayClient(opts.Gateway)
	}
	k.stopCtx, k.stopCancel = context.WithCancel(context.Background())
	return k, nil
}

// boot starts the bridge, the first process and the snapshot loop.
func (k *Kernel) boot(ctx context.Context) error {
	if k.opts.Host != nil && k.opts.Gateway != nil {
		k.comm = newCommBridge(k.opts.Host, k.log)
	} else if k.opts.Host != nil {
		var err error
		if k.bridge, err = newBridge(k.opts.runDir, k.opts.Host, k.log); err != nil {
			k.removeRunDir()
			return err
		}
		if d := filepath.Dir(k.bridge.path); d != k.opts.runDir {
			k.opts.sandboxBinds = append(k.opts.sandboxBinds, d)
		}
	}
	p, err := k.launch(ctx, k.opts.Restore)
	if err != nil {
		k.closeBridge()
		k.stopCancel()
		k.removeRunDir()
		return err
	}
	k.setProc(p)
	if k.opts.Snapshot != "" {
		k.loopWG.Add(1)
		go k.snapshotLoop()
	}
	return nil
}

// launch starts one process for k, restoring the snapshot in restore when it is not "".
func (k *Kernel) launch(ctx context.Context, restore string) (*proc, error) {
	return k.launchWith(ctx, restore, "")
}

// launchWith is launch; for a gateway kernel, reuse names a kernel the gateway has restarted
// to connect to instead of starting one.
func (k *Kernel) launchWith(ctx context.Context, restore, reuse string) (*proc, error) {
	s := launchSpec{python: k.python, launcher: k.launcher, tag: newID()[:8], env: k.env()}
	if restore != "" {
		s.restore = restore
		s.report = filepath.Join(k.opts.runDir, "restore-"+s.tag+".json")
	}
	// A boot never waits forever, even when the caller's ctx has no deadline.
	ctx, cancel := context.WithTimeout(ctx, k.bootLimit())
	defer cancel()
	var p *proc
	var err error
	if k.opts.Gateway != nil {
		p, err = k.launchRemote(ctx, s, reuse)
	} else {
		p, err = k.launchLocal(ctx, s, k.spawn)
	}
	if err != nil && k.forked && ctx.Err() == nil {
		// Plain launch is the fallback when a forked kernel does not come up.
		k.log.Warn("kernel: forked kernel failed to start; launching plainly", "err", err)
		p, err = k.launchLocal(ctx, s, spawnExec)
	}
	if err != nil {
		return nil, err
	}
	var m *Manifest
	if restore != "" {
		if m, err = readRestoreReport(s.report); err != nil {
			k.log.Warn("kernel: restore report", "err", err)
		}
	}
	k.mu.Lock()
	k.restored = m
	k.mu.Unlock()
	if p.gw != nil {
		k.log.Info("kernel: started on the gateway", "url", k.opts.Gateway.URL, "kernel", p.gw.id, "dir", k.opts.Dir, "restored", restore != "")
		return p, nil
	}
	if k.mgr != nil {
		k.mgr.record(p)
	}
	k.log.Info("kernel: started", "pid", p.pid, "dir", k.opts.Dir, "transport", p.conn.Transport, "restored", restore != "")
	return p, nil
}

// bootTimeout bounds one kernel start; gatewayBootTimeout one on a gateway, where a kernel may
// be a pod waiting to be scheduled and its image pulled.
const (
	bootTimeout        = 2 * time.Minute
	gatewayBootTimeout = 5 * time.Minute
)

func (k *Kernel) bootLimit() time.Duration {
	if k.opts.Gateway != nil {
		return gatewayBootTimeout
	}
	return bootTimeout
}

// setProc installs p as the current process and watches it.
func (k *Kernel) setProc(p *proc) {
	k.mu.Lock()
	k.p = p
	k.parked = false
	k.mu.Unlock()
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		<-p.exited
		if k.mgr != nil {
			k.mgr.forget(p)
		}
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.p != p || k.parked || k.closed {
			return // replaced or stopped on purpose
		}
		k.log.Warn("kernel: process died", "pid", p.pid, "status", exitReason(p))
		closeOnce(k.done)
	}()
}

func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}

// env is the kernel's whole environment. It is built from an allowlist, not by removing what
// looks like a credential: a key's variable can be named anything (OPENAI_KEY,
// AWS_SECRET_ACCESS_KEY behind a model's apiKeyEnv), and model-written code prints whatever it
// finds. The bridge's two variables are the only ARBOR_* ones a kernel gets from here.
func (k *Kernel) env() []string {
	env := append(sandbox.Env(k.opts.EnvPass, k.opts.EnvDeny),
		"PYDEVD_DISABLE_FILE_VALIDATION=1", // silences debugpy's frozen-module warnings
		"PYTHONUNBUFFERED=1",
		"MPLBACKEND=agg",
	)
	if k.opts.Sandbox != "" {
		// IPython's profile lives in the cache, not the empty scratch $HOME: made once, not at
		// every start.
		cache := filepath.Join(k.opts.StateDir, "cache")
		env = append(env, "XDG_CACHE_HOME="+cache, "IPYTHONDIR="+filepath.Join(cache, "ipython"))
	}
	env = append(env, sandbox.Filter(k.opts.Env, k.opts.EnvDeny)...)
	if k.bridge != nil {
		env = append(env, "ARBOR_BRIDGE="+k.bridge.path, "ARBOR_BRIDGE_TOKEN="+k.bridge.token)
	}
	return env
}

func (k *Kernel) isClosed() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.closed
}

// current returns the live process (nil while one is being replaced).
func (k *Kernel) current() *proc {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.p
}

// Done is closed when the kernel process dies unexpectedly, or after Close. A restart by the
// timeout ladder or a Manager's parking does not close it. With Options.Revive, the next
// Execute after a death starts a new process and Done then returns a new channel.
func (k *Kernel) Done() <-chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.done
}

// PID is the process id of the current kernel process (the leader of its process group), or 0
// while none runs.
func (k *Kernel) PID() int {
	if p := k.current(); p != nil {
		return p.pid
	}
	return 0
}

// Restored describes the snapshot restored at the last (re)start, or nil if none was.
func (k *Kernel) Restored() *Manifest {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.restored
}

// ErrDead is returned when a kernel is used after it died (without Revive) or was closed.
var ErrDead = errors.New("kernel is not running")

// Interrupt asks the kernel to interrupt the running cell: interrupt_request on the control
// channel, falling back to SIGINT to the process group when control does not answer.
func (k *Kernel) Interrupt(ctx context.Context) error {
	p := k.current()
	if p == nil || p.isExited() {
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
	h, box, err := p.ch.request(controlChan, "interrupt_request", struct{}{})
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

// Close shuts the kernel down: a final automatic snapshot (if enabled and a cell ran since the
// last one), shutdown_request on control, a short wait, then SIGKILL to the whole process
// group. It returns when the process is reaped and every goroutine has exited.
func (k *Kernel) Close(ctx context.Context) error {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		k.wg.Wait()
		return nil
	}
	k.mu.Unlock()
	// Stop the snapshot loop first: it re-marks a pending snapshot as dirty, which is then
	// taken here, once, before the process goes away.
	k.stopCancel()
	k.loopWG.Wait()
	if k.opts.Snapshot != "" {
		// Only if no cell is running: Close must not wait for a cell (it kills it), and the
		// previous automatic snapshot stays valid.
		select {
		case k.execSem <- struct{}{}:
			if k.unsaved {
				sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
				if _, err := k.snapshotLocked(sctx, k.opts.Snapshot); err != nil && !errors.Is(err, ErrDead) {
					k.log.Warn("kernel: snapshot at close", "err", err)
				}
				cancel()
			}
			<-k.execSem
		default:
			k.log.Info("kernel: no snapshot at close: a cell is running")
		}
	}
	k.mu.Lock()
	k.closed = true
	p := k.p
	k.mu.Unlock()
	if p != nil {
		p.shutdown(ctx)
	}
	k.closeBridge()
	k.mu.Lock()
	closeOnce(k.done)
	k.mu.Unlock()
	k.wg.Wait()
	k.removeRunDir()
	if k.mgr != nil {
		k.mgr.remove(k)
	}
	k.log.Info("kernel: closed")
	return nil
}

// shutdown asks the process to exit, kills its group and releases its channels.
func (p *proc) shutdown(ctx context.Context) {
	p.shutdownOnce.Do(func() { p.doShutdown(ctx) })
}

func (p *proc) doShutdown(ctx context.Context) {
	if p.gw != nil {
		p.kill() // DELETE /api/kernels/{id}: the gateway shuts it down
		p.release()
		return
	}
	if !p.isExited() {
		if h, box, err := p.ch.request(controlChan, "shutdown_request", map[string]bool{"restart": false}); err == nil {
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
	// Kill the group even after a clean exit: cells may have left subprocesses behind. This
	// runs once per process, right after its exit, so the pid cannot have been reused yet
	// (a pid is not reused while its process group has members; an empty group gets ESRCH).
	p.kill()
	<-p.exited
	p.release()
}

// release closes the channels of an exited process.
func (p *proc) release() {
	p.releaseOnce.Do(func() {
		p.ch.close()
		p.sockCancel()
	})
	p.removeFiles()
}

// removeRunDir deletes the run dir once nothing uses it.
func (k *Kernel) removeRunDir() {
	if k.opts.runDir != "" {
		os.RemoveAll(k.opts.runDir)
	}
}

func (k *Kernel) closeBridge() {
	if k.bridge != nil {
		k.bridge.close()
	}
	if k.comm != nil {
		k.comm.close()
	}
}

// Ping sends kernel_info_request on the control channel and waits for the reply. Control is
// served by its own thread in ipykernel, so a kernel answers while a cell runs: Ping tells a
// responsive process from a wedged one (the heartbeat, a C thread, cannot).
func (k *Kernel) Ping(ctx context.Context) error {
	p := k.current()
	if p == nil || p.isExited() {
		return fmt.Errorf("ping kernel: %w", ErrDead)
	}
	h, box, err := p.ch.request(controlChan, "kernel_info_request", struct{}{})
	if err != nil {
		return fmt.Errorf("ping kernel: %w", err)
	}
	defer p.ch.unregister(h.MsgID)
	for {
		select {
		case <-box.notify:
			for _, m := range box.take() {
				if m.Header.MsgType == "kernel_info_reply" {
					return nil
				}
			}
		case <-p.exited:
			return fmt.Errorf("ping kernel: %w", ErrDead)
		case <-ctx.Done():
			return fmt.Errorf("ping kernel: %w", ctx.Err())
		}
	}
}
