package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DialOptions say where the daemon is and how to start it.
type DialOptions struct {
	Socket string
	// Autostart starts `Exe daemon` when nobody listens (the gopls -remote=auto pattern).
	Autostart bool
	Exe       string   // the arbor binary; "" = this executable
	Args      []string // extra daemon flags
	LogFile   string   // daemon stdout/stderr; "" = discard
}

// Dial connects to the daemon, starting it under a lock when it is not running, so two
// clients starting at once never start two daemons. It talks only to a daemon of the user's
// own: the socket's directory must be the user's (see [prepareSocketDir]) and the process
// that accepts the connection must run as the user.
func Dial(ctx context.Context, o DialOptions) (net.Conn, error) {
	dir := filepath.Dir(o.Socket)
	if err := prepareSocketDir(dir, o.Autostart); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no arbor daemon at %s (%w); start one with `arbor daemon`", o.Socket, err)
		}
		return nil, err
	}
	c, err := dialOnce(o.Socket)
	if err == nil || !o.Autostart || isRefusal(err) {
		if err != nil && !isRefusal(err) {
			return nil, fmt.Errorf("no arbor daemon at %s (%w); start one with `arbor daemon`", o.Socket, err)
		}
		return c, err
	}
	lock, err := os.OpenFile(o.Socket+".start", os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open start lock: %w", err)
	}
	defer lock.Close()
	if err := flockCtx(ctx, lock); err != nil {
		return nil, err
	}
	defer unix.Flock(int(lock.Fd()), unix.LOCK_UN)
	if c, err := dialOnce(o.Socket); err == nil || isRefusal(err) {
		return c, err // another client started it while we waited
	}
	proc, err := startDaemon(o)
	if err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { _, err := proc.Wait(); exited <- err }()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := dialOnce(o.Socket); err == nil || isRefusal(err) {
			return c, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-exited:
			return nil, fmt.Errorf("the arbor daemon exited at start; see its log %s", o.LogFile)
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("the arbor daemon did not listen on %s within 15s; see its log %s", o.Socket, o.LogFile)
}

// dialOnce connects and checks who answered.
func dialOnce(socket string) (net.Conn, error) {
	nc, err := net.DialTimeout("unix", socket, time.Second)
	if err != nil {
		return nil, err
	}
	if err := checkServer(nc, socket); err != nil {
		nc.Close()
		return nil, err
	}
	return nc, nil
}

// isRefusal reports a daemon that was reached and refused: starting another would not help.
func isRefusal(err error) bool {
	var foreign *ForeignDaemonError
	return errors.As(err, &foreign)
}

func flockCtx(ctx context.Context, f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// startDaemon launches the daemon in its own session so it outlives the client.
func startDaemon(o DialOptions) (*os.Process, error) {
	exe := o.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	out := io.Discard
	if o.LogFile != "" {
		if err := os.MkdirAll(filepath.Dir(o.LogFile), 0o700); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(o.LogFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("open daemon log: %w", err)
		}
		defer f.Close()
		out = f
	}
	cmd := exec.Command(exe, append([]string{"daemon", "--socket", o.Socket}, o.Args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start arbor daemon: %w", err)
	}
	return cmd.Process, nil
}

// Forward copies between an editor's stdio and the daemon until the daemon side closes. When
// the editor closes stdin, the write half is closed so the daemon sees EOF and ends the
// connection, which ends the copy back.
func Forward(ctx context.Context, nc net.Conn, in io.Reader, out io.Writer) error {
	go func() {
		io.Copy(nc, in)
		if uc, ok := nc.(*net.UnixConn); ok {
			uc.CloseWrite()
		}
	}()
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	_, err := io.Copy(out, nc)
	nc.Close()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("forward from daemon: %w", err)
	}
	return nil
}
