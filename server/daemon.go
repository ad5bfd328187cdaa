package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arborhq/arbor/agents"
	"golang.org/x/sync/semaphore"
	"golang.org/x/sys/unix"
)

// DaemonOptions configure RunDaemon.
type DaemonOptions struct {
	Socket      string        // Unix socket path; its directory is created 0700
	IdleTimeout time.Duration // exit after this long with no clients and no live sessions; 0 = never
	Version     string
	Logger      *slog.Logger
	Agents      *agents.Service

	// Per-connection bounds (0 = the defaults): requests in flight (64) and the bytes of
	// their params (64 MiB); past them the daemon stops reading that connection until
	// replies drain. WriteTimeout (30 s) disconnects a client that does not read what it is
	// sent for that long.
	MaxInFlight      int
	MaxInFlightBytes int
	WriteTimeout     time.Duration
	// EventQueue bounds the notifications queued for a connection (0 = 4096); past it a
	// session's events are dropped for that client, which is told arbor/fellBehind and
	// reattaches from the gap.
	EventQueue int

	// JournalDir holds the request journal (see journal.go): requests that change state are
	// written there before they run and replayed at the next start when the daemon died
	// first. "" = no journal (tests that do not need one).
	JournalDir string
	// CrashAt is a test hook: "journal:METHOD:before" kills the daemon with SIGKILL after a
	// METHOD request was journalled and before it runs, ":after" after it ran and before the
	// reply. "" in every real daemon.
	CrashAt string
}

// Validate checks required fields.
func (o DaemonOptions) Validate() error {
	if o.Socket == "" {
		return errors.New("daemon: no socket path")
	}
	if o.Agents == nil {
		return errors.New("daemon: no agents service")
	}
	if o.MaxInFlight < 0 || o.MaxInFlightBytes < 0 || o.WriteTimeout < 0 || o.EventQueue < 0 {
		return errors.New("daemon: negative per-connection bound")
	}
	if !validCrashAt(o.CrashAt) {
		return fmt.Errorf("daemon: crash point %q: want journal:METHOD:before|after with a journalled METHOD", o.CrashAt)
	}
	return nil
}

// Server is the running daemon.
type Server struct {
	opts    DaemonOptions
	log     *slog.Logger
	agents  *agents.Service
	started time.Time
	ready   chan struct{} // closed when recovery finished
	clients atomic.Int64
	lastUse atomic.Int64 // unix nanos of the last client disconnect
	stop    chan struct{}
	once    sync.Once
	refused refusals
	frames  *semaphore.Weighted // the frame gate every connection shares (framing.go)
	pace    *pacer              // paces reading after refused frames (framing.go)

	journal     *journal // nil: requests are not journalled
	interrupted interruptions
}

// ErrAlreadyRunning means another daemon holds the lock.
var ErrAlreadyRunning = errors.New("an arbor daemon is already running")

// RunDaemon listens first, recovers sessions in the background, and serves until ctx ends,
// arbor/daemon.stop arrives, or it has been idle for IdleTimeout.
func RunDaemon(ctx context.Context, opts DaemonOptions) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxInFlight == 0 {
		opts.MaxInFlight = defaultMaxInFlight
	}
	if opts.MaxInFlightBytes == 0 {
		opts.MaxInFlightBytes = defaultMaxInFlightBytes
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = defaultWriteTimeout
	}
	if opts.EventQueue == 0 {
		opts.EventQueue = queueLen
	}
	if err := hardenProcess(); err != nil {
		// Without /proc or prctl (not Linux-like) the daemon still serves; say what is missing.
		opts.Logger.Warn("daemon hardening incomplete", "err", err)
	}
	lock, err := acquireLock(opts.Socket)
	if err != nil {
		return err
	}
	defer lock.Close()
	var jr *journal
	if opts.JournalDir != "" {
		// Under the lock: only this daemon replays what the last one left.
		if jr, err = openJournal(opts.JournalDir); err != nil {
			return err
		}
		defer jr.close()
	}
	ln, err := listen(opts.Socket)
	if err != nil {
		return err
	}
	s := &Server{opts: opts, log: opts.Logger, agents: opts.Agents, started: time.Now(),
		ready: make(chan struct{}), stop: make(chan struct{}), journal: jr, frames: newFrameGate(), pace: &pacer{}}
	s.lastUse.Store(time.Now().UnixNano())
	s.log.Info("daemon listening", "socket", opts.Socket, "pid", os.Getpid())

	rctx := context.WithoutCancel(ctx) // before ctx is reassigned below: the goroutine must not read it
	go func() {
		defer close(s.ready)
		if err := s.agents.Recover(rctx); err != nil {
			s.log.Error("recover sessions", "err", err)
		}
		// After the sessions are back, before any client request runs (they wait for ready).
		s.replayJournal(rctx)
	}()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); reapOrphans(ctx, s.log, 2*time.Second) }()
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
		case <-s.stop:
		case <-s.idle(ctx):
			s.log.Info("idle timeout: no clients and no live sessions")
		}
		cancel()
		ln.Close()
	}()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			s.log.Error("accept", "err", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if err := checkPeer(nc); err != nil {
			s.refused.log(s.log, err)
			nc.Close()
			continue
		}
		s.clients.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				s.clients.Add(-1)
				s.lastUse.Store(time.Now().UnixNano())
			}()
			s.serveConn(ctx, nc)
		}()
	}
	wg.Wait()
	<-s.ready
	os.Remove(opts.Socket)
	closeCtx, cc := context.WithTimeout(context.Background(), 20*time.Second)
	defer cc()
	return s.agents.Close(closeCtx)
}

// Stop ends the daemon.
func (s *Server) Stop() { s.once.Do(func() { close(s.stop) }) }

// waitReady holds session requests until recovery finished (lifecycle methods pass at once).
func (s *Server) waitReady(ctx context.Context, method string) error {
	// workspace/executeCommand runs arbor/* requests, so it waits like them.
	if !strings.HasPrefix(method, "arbor/") && method != "workspace/executeCommand" || method == MethodDaemonStatus || method == MethodDaemonStop {
		return nil
	}
	select {
	case <-s.ready:
		return nil
	case <-s.stop:
		return errShuttingDown
	case <-ctx.Done():
		return ctx.Err()
	}
}

// idle fires once nobody has been connected and no session has been live for IdleTimeout.
func (s *Server) idle(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{})
	if s.opts.IdleTimeout <= 0 {
		return ch
	}
	go func() {
		t := time.NewTicker(min(s.opts.IdleTimeout/4, 10*time.Second))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if s.clients.Load() > 0 || s.agents.Live() > 0 {
					s.lastUse.Store(time.Now().UnixNano())
					continue
				}
				if time.Since(time.Unix(0, s.lastUse.Load())) >= s.opts.IdleTimeout {
					close(ch)
					return
				}
			}
		}
	}()
	return ch
}

// acquireLock takes the daemon lock next to the socket; a second daemon is refused with the
// pid of the first. The socket directory is created or checked first, so neither the lock
// nor the socket is ever made in a directory someone else controls.
func acquireLock(socket string) (*os.File, error) {
	if err := prepareSocketDir(filepath.Dir(socket), true); err != nil {
		return nil, err
	}
	path := socket + ".lock"
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open daemon lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		data, _ := os.ReadFile(path)
		f.Close()
		pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
		return nil, fmt.Errorf("%w (pid %d, socket %s); stop it with `arbor daemon stop`", ErrAlreadyRunning, pid, socket)
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return f, nil
}

// listen removes a stale socket (we hold the lock, so nobody serves it) and listens 0600.
func listen(socket string) (net.Listener, error) {
	os.Remove(socket)
	old := unix.Umask(0o177)
	ln, err := net.Listen("unix", socket)
	unix.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", socket, err)
	}
	if err := os.Chmod(socket, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}
