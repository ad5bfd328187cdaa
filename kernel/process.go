package kernel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/arborhq/arbor/sandbox"
)

// proc is one kernel process and the channels to it. A Kernel replaces its proc when the
// timeout ladder restarts it.
type proc struct {
	pid    int
	conn   connInfo
	ch     wire
	stderr *tailBuffer

	exited  chan struct{} // closed when the process has been waited for
	waitErr error         // valid after exited

	logPath      string // forked kernels write their output here
	sockCancel   context.CancelFunc
	releaseOnce  sync.Once
	shutdownOnce sync.Once
	filesOnce    sync.Once
	endOnce      sync.Once
	gw           *remote // set for a kernel on a gateway: no process, signals, or files here
	connPath     string
	// Sandboxed kernels: the host pid of bwrap's pid-1 init (from --info-fd), and of the kernel
	// under it, which signals go to instead of bwrap's process group. The kernel's own
	// os.getpid() is a pid of its namespace and names another process out here.
	sandboxInit int
	sigPID      int
	// budget is the process tree's cgroups or rlimits (nil: none); atExit its counters read
	// when the process had ended, before the cgroups were removed.
	budget *sandbox.Group
	atExit sandbox.Counters
}

// collectLog keeps the tail of the exited kernel's output (for error messages) and removes
// the log file.
func (p *proc) collectLog() {
	if p.logPath == "" {
		return
	}
	if f, err := os.Open(p.logPath); err == nil {
		if fi, err := f.Stat(); err == nil && fi.Size() > 16<<10 {
			f.Seek(fi.Size()-16<<10, 0)
		}
		io.Copy(p.stderr, f)
		f.Close()
	}
	os.Remove(p.logPath)
}

// removeFiles deletes the connection file and sockets of an exited process. It runs from the
// exit watcher and again, synchronously, from release, so Close leaves nothing behind.
func (p *proc) removeFiles() {
	p.filesOnce.Do(func() {
		os.Remove(p.connPath)
		p.conn.removeIPC()
		if err := p.budget.Remove(); err != nil {
			slog.Warn("kernel: " + err.Error())
		}
	})
}

// launchSpec is what a launch needs beyond Options.
type launchSpec struct {
	python, launcher string
	tag              string   // distinguishes this launch's files inside StateDir
	env              []string // full environment
	restore, report  string
}

// spawnFunc starts a kernel process for connPath; the plain one execs the launcher, the fork
// server forks a pre-imported template.
type spawnFunc func(ctx context.Context, o Options, s launchSpec, connPath string) (*proc, error)

// spawnExec starts the launcher as a child process in its own process group.
func spawnExec(_ context.Context, o Options, s launchSpec, connPath string) (*proc, error) {
	argv := []string{s.python, s.launcher, connPath}
	budget, err := newBudget(o, s.tag)
	if err != nil {
		return nil, err
	}
	var info, infoW *os.File
	var files []*os.File
	if o.Sandbox != "" {
		var err error
		if info, infoW, err = os.Pipe(); err != nil {
			budget.Remove()
			return nil, fmt.Errorf("start kernel: %w", err)
		}
		defer info.Close()
		defer infoW.Close()
		if argv, files, err = sandboxArgv(o, s.python, argv, infoW); err != nil {
			budget.Remove()
			return nil, err
		}
		defer closeAll(files)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = o.Dir
	cmd.Env = s.env
	if s.restore != "" {
		cmd.Env = append(cmd.Env, "ARBOR_RESTORE="+s.restore, "ARBOR_RESTORE_REPORT="+s.report)
	}
	cmd.ExtraFiles = files // fd 3: bwrap --info-fd 3, then the sandbox's binds by descriptor
	// Own process group: interrupt_request uses killpg when the kernel leads its group, and
	// Close kills the whole group so grandchildren (subprocesses of cells) die too.
	// Pdeathsig: a kernel (or the fork server, whose children ask the same of it) dies with
	// the daemon instead of living on as an orphan holding its namespace.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// The process joins its cgroups before it execs the kernel or bwrap, so it cannot fork
	// outside them; sandboxed, the rlimit fallbacks are set inside the user namespace.
	budget.Apply(cmd)
	// Output goes to a file, not a pipe: with a pipe, Wait also waits for the copying
	// goroutines, which delays noticing a death (measured ~50 ms under load vs ~5 ms).
	logPath := filepath.Join(o.StateDir, "kernel-"+s.tag+".log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		budget.Remove()
		return nil, fmt.Errorf("start kernel: %w", err)
	}
	defer logf.Close()
	p := &proc{stderr: &tailBuffer{max: 16 << 10}, exited: make(chan struct{}), logPath: logPath, budget: budget}
	cmd.Stdout = logf
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		os.Remove(logPath)
		budget.Remove()
		return nil, fmt.Errorf("start kernel %s: %w", s.python, err)
	}
	p.pid = cmd.Process.Pid
	go func() {
		// Waiting on the child notices death within milliseconds (no heartbeat polling).
		p.waitErr = cmd.Wait()
		p.atExit = budget.Counters()
		p.collectLog()
		close(p.exited)
	}()
	if info != nil {
		infoW.Close() // ours; bwrap holds its own copy until it has written
		var err error
		if p.sandboxInit, err = readInfo(info, 30*time.Second); err != nil {
			p.kill()
			<-p.exited
			return nil, fmt.Errorf("start sandboxed kernel: %w; bwrap output: %s", err, strings.TrimSpace(p.stderr.String()))
		}
	}
	return p, nil
}

// newBudget makes the process budget of one launch (nil when Options.Limits turns both limits
// off).
func newBudget(o Options, tag string) (*sandbox.Group, error) {
	if o.Limits.Processes < 0 && o.Limits.Memory < 0 {
		return nil, nil
	}
	g, err := sandbox.DetectBudget().NewGroup("k-"+tag, o.Limits)
	if err != nil {
		return nil, fmt.Errorf("start kernel: %w", err)
	}
	return g, nil
}

// budgetNotice says what the process budget did to a cell, given its counters before it. For
// a cell the kernel died in, exitReason already names a memory kill.
func (p *proc) budgetNotice(before sandbox.Counters, res *Result, died bool) string {
	if p.budget == nil {
		return ""
	}
	after := p.budget.Counters()
	if p.isExited() {
		after = p.atExit
	}
	if died {
		after.OOMKills = before.OOMKills
	}
	var name, text string
	if res.Error != nil {
		name, text = res.Error.Name, res.Error.Value
	}
	return p.budget.Explain(before, after, name, text)
}

// launch starts a kernel process and waits until it answers kernel_info with iopub connected.
// ctx bounds only this wait.
func launch(ctx context.Context, o Options, s launchSpec, spawn spawnFunc, log *slog.Logger) (*proc, error) {
	cf, err := newConnInfo(o.runDir, s.tag)
	if err != nil {
		return nil, err
	}
	if cf.shortDir != "" {
		o.sandboxBinds = append(o.sandboxBinds, cf.shortDir)
	}
	if o.Sandbox != "" && !o.AllowNetwork && cf.Transport != "ipc" {
		// Without a network namespace of its own the kernel can only be reached by Unix sockets.
		return nil, fmt.Errorf("start sandboxed kernel: run dir %q is too long for Unix socket paths (max %d bytes); use a shorter RuntimeDir", o.runDir, maxIPCPath-16)
	}
	connPath := filepath.Join(o.runDir, "kernel-"+s.tag+".json")
	if err := cf.write(connPath); err != nil {
		return nil, err
	}
	p, err := spawn(ctx, o, s, connPath)
	if err != nil {
		os.Remove(connPath)
		return nil, err
	}
	p.conn, p.connPath = cf, connPath
	go func() {
		<-p.exited
		p.removeFiles()
	}()
	sockCtx, sockCancel := context.WithCancel(context.Background())
	p.sockCancel = sockCancel
	fail := func(err error) (*proc, error) {
		p.kill()
		<-p.exited
		if p.ch != nil {
			p.ch.close()
		}
		sockCancel()
		if tail := strings.TrimSpace(p.stderr.String()); tail != "" {
			err = fmt.Errorf("%w; kernel output:\n%s", err, tail)
		}
		return nil, err
	}
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-p.exited:
			cancel()
		case <-dctx.Done():
		}
	}()
	ch, err := dialChannels(dctx, sockCtx, cf, log)
	if err != nil {
		return fail(startErr(ctx, p, err))
	}
	p.ch = ch
	if err := p.ready(dctx); err != nil {
		return fail(startErr(ctx, p, err))
	}
	if p.sandboxInit > 0 {
		// The kernel answers, so the init has forked it by now.
		if p.sigPID, err = sandbox.CommandPID(p.sandboxInit); err != nil {
			return fail(fmt.Errorf("start sandboxed kernel: %w", err))
		}
	}
	return p, nil
}

func startErr(ctx context.Context, p *proc, err error) error {
	select {
	case <-p.exited:
		return fmt.Errorf("kernel exited during start (%v)", p.waitErr)
	default:
	}
	if ctx.Err() != nil {
		return fmt.Errorf("kernel start: %w", context.Cause(ctx))
	}
	return fmt.Errorf("kernel start: %w", err)
}

// ready sends kernel_info_request until a reply arrives and an iopub status message for it has
// been seen: a SUB socket only receives once its subscription reached the kernel, and an execute
// sent before that would lose its first outputs.
func (p *proc) ready(ctx context.Context) error {
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		h, box, err := p.ch.request(shellChan, "kernel_info_request", struct{}{})
		if err != nil {
			return err
		}
		replied, iopub := false, false
		t := time.NewTimer(wait)
	loop:
		for {
			select {
			case <-box.notify:
				for _, m := range box.take() {
					if m.Header.MsgType == "kernel_info_reply" {
						replied = true
						t.Reset(wait) // the iopub status may trail the reply slightly
					} else {
						iopub = true
					}
				}
				if replied && iopub {
					p.ch.unregister(h.MsgID)
					return nil
				}
			case <-t.C:
				break loop
			case <-ctx.Done():
				t.Stop()
				p.ch.unregister(h.MsgID)
				return ctx.Err()
			}
		}
		p.ch.unregister(h.MsgID)
	}
}

// signal sends sig to the kernel's process group.
func (p *proc) signal(sig syscall.Signal) error {
	select {
	case <-p.exited:
		return errors.New("kernel process has exited")
	default:
	}
	if p.gw != nil {
		if sig != syscall.SIGINT {
			return fmt.Errorf("signal %v: a gateway kernel can only be interrupted", sig)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return p.gw.c.interrupt(ctx, p.gw.id)
	}
	target := -p.pid
	if p.sigPID > 0 {
		target = p.sigPID
	}
	if err := syscall.Kill(target, sig); err != nil {
		return fmt.Errorf("signal kernel %d: %w", target, err)
	}
	return nil
}

// kill sends SIGKILL to the process group and to the process itself: a forked kernel killed
// right after the fork may not have called setsid yet, and then has no group of its own (an
// early kill that only signalled the group left it running, and Close waiting forever).
func (p *proc) kill() {
	if p.gw != nil {
		p.gw.stop(p)
		return
	}
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	if !p.isExited() {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
}

// isExited reports whether the process has been reaped.
func (p *proc) isExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// tailBuffer keeps the last max bytes written: the kernel's own output, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   bytes.Buffer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b.Write(p)
	if over := t.b.Len() - t.max; over > 0 {
		t.b.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}
