package kernel

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/arborhq/arbor/sandbox"
)

// forkServer is a Python process that has imported ipykernel and the runtime once and forks a
// kernel per request (see runtime/arbor_forkserver.py). Forked kernels are not children of
// the daemon, so each is watched through a pidfd instead of wait.
type forkServer struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *tailBuffer
	log    *slog.Logger
	dir    string

	mu        sync.Mutex // one request in flight: replies are in order
	nextID    int
	closeOnce sync.Once
	broken    bool // a request failed: the reply stream may be out of step, so stop using it
	exited    chan struct{}
}

func startForkServer(python, dir string, _ int, log *slog.Logger) (*forkServer, error) {
	rt, err := installRuntime(filepath.Join(dir, "runtime"))
	if err != nil {
		return nil, err
	}
	script := filepath.Join(filepath.Dir(rt), "arbor_forkserver.py")
	cmd := exec.Command(python, script)
	cmd.Dir = dir
	// Forked kernels inherit the server's initial environment block (/proc/self/environ), not
	// just os.environ (replaced per fork from the kernel's own env): the block is the
	// allowlist alone, nothing a session declared.
	cmd.Env = append(sandbox.Env(nil, nil), "PYDEVD_DISABLE_FILE_VALIDATION=1")
	// Pdeathsig: a kernel (or the fork server, whose children ask the same of it) dies with
	// the daemon instead of living on as an orphan holding its namespace.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	fs := &forkServer{cmd: cmd, stderr: &tailBuffer{max: 16 << 10}, log: log, dir: dir, exited: make(chan struct{})}
	cmd.Stderr = fs.stderr
	if fs.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("start fork server: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start fork server: %w", err)
	}
	fs.stdout = bufio.NewReader(out)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start fork server: %w", err)
	}
	if err := recordProc(filepath.Dir(dir), cmd.Process.Pid); err != nil {
		log.Warn("kernel: fork server not in the orphan registry", "err", err)
	}
	go func() {
		cmd.Wait()
		forgetProc(filepath.Dir(dir), cmd.Process.Pid)
		close(fs.exited)
	}()
	line, err := fs.readLine(time.Minute)
	if err != nil || !strings.Contains(line, `"ready"`) {
		fs.close()
		return nil, fmt.Errorf("start fork server: %v %s; output: %s", err, line, fs.stderr.String())
	}
	return fs, nil
}

// readLine reads one reply line; the reader is only used under mu (or before start returns).
func (fs *forkServer) readLine(timeout time.Duration) (string, error) {
	type res struct {
		s   string
		err error
	}
	c := make(chan res, 1)
	go func() {
		s, err := fs.stdout.ReadString('\n')
		c <- res{s, err}
	}()
	select {
	case r := <-c:
		return r.s, r.err
	case <-time.After(timeout):
		// The reader goroutine ends when close kills the server.
		return "", errors.New("fork server did not answer")
	}
}

// spawn forks a kernel for connPath. It is a spawnFunc.
func (fs *forkServer) spawn(ctx context.Context, o Options, s launchSpec, connPath string) (*proc, error) {
	env := map[string]string{}
	for _, kv := range s.env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	if s.restore != "" {
		env["ARBOR_RESTORE"], env["ARBOR_RESTORE_REPORT"] = s.restore, s.report
	}
	logPath := filepath.Join(o.StateDir, "kernel-"+s.tag+".log")
	fs.mu.Lock()
	select {
	case <-fs.exited:
		fs.broken = true
	default:
	}
	if fs.broken {
		fs.mu.Unlock()
		// Plain launch is the fallback when forking is not possible.
		return spawnExec(ctx, o, s, connPath)
	}
	fs.nextID++
	id := fs.nextID
	b, _ := json.Marshal(map[string]any{"id": id, "conn": connPath, "cwd": o.Dir, "env": env, "log": logPath})
	_, err := fs.stdin.Write(append(b, '\n'))
	var line string
	if err == nil {
		line, err = fs.readLine(30 * time.Second)
	}
	if err != nil {
		fs.broken = true
		fs.log.Warn("kernel: fork server failed; launching kernels plainly from now on", "err", err, "output", fs.stderr.String())
		go fs.close()
	}
	fs.mu.Unlock()
	if err != nil {
		return spawnExec(ctx, o, s, connPath)
	}
	var rep struct {
		ID    int    `json:"id"`
		PID   int    `json:"pid"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(line), &rep); err != nil || rep.ID != id {
		return nil, fmt.Errorf("fork kernel: bad reply %q", line)
	}
	if rep.Error != "" {
		return nil, fmt.Errorf("fork kernel: %s", rep.Error)
	}
	pfd, err := unix.PidfdOpen(rep.PID, 0)
	if err != nil {
		syscall.Kill(-rep.PID, syscall.SIGKILL)
		return nil, fmt.Errorf("fork kernel: pidfd: %w", err)
	}
	p := &proc{pid: rep.PID, stderr: &tailBuffer{max: 16 << 10}, exited: make(chan struct{}), logPath: logPath}
	go func() {
		// A pidfd becomes readable when the process exits: death noticed in milliseconds.
		fds := []unix.PollFd{{Fd: int32(pfd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); err == nil || !errors.Is(err, unix.EINTR) {
				break
			}
		}
		unix.Close(pfd)
		p.waitErr = errors.New("forked kernel exited (status not reported to the daemon)")
		p.collectLog()
		close(p.exited)
	}()
	return p, nil
}

func (fs *forkServer) close() {
	fs.closeOnce.Do(func() {
		syscall.Kill(-fs.cmd.Process.Pid, syscall.SIGKILL)
		fs.stdin.Close()
	})
	<-fs.exited
}
