package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The control socket is for the user's own clients. Processes the daemon started — kernels,
// setup and gate commands, and whatever they start in turn — run model-written code with the
// user's uid, so a uid check alone would let a cell list every session, create unsandboxed
// ones and accept its own work. Kernels reach the daemon only through their own bridge, which
// is scoped to their session; on the control socket the daemon refuses any peer whose process
// descends from the daemon itself. The daemon never starts a legitimate client.
//
// Descent is read from the ppid chain in /proc. A descendant that double-forks and setsid()s
// would be reparented to init and escape the walk, so the daemon makes itself a child
// subreaper: orphans of its descendants are reparented to the daemon instead, and the walk
// still ends at it.

// hardenProcess makes the daemon non-dumpable (so the user's other processes, kernels
// included, cannot read /proc/<daemon>/environ or mem) and a child subreaper. It returns
// what it could not do; the daemon logs it and goes on.
func hardenProcess() error {
	var errs []error
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		errs = append(errs, fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err))
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		errs = append(errs, fmt.Errorf("prctl(PR_SET_CHILD_SUBREAPER, 1): %w", err))
	}
	return errors.Join(errs...)
}

// maxAncestry bounds the ppid walk; a chain cannot be longer than the pid space, but a
// corrupt or racing /proc must not loop.
const maxAncestry = 4096

// errDescendant marks a peer the daemon started.
var errDescendant = errors.New("the peer is a process started by the arbor daemon (a kernel, a setup command, or one of their descendants); kernels reach the daemon only through their own bridge")

// peerCred reads the peer's credentials.
func peerCred(nc net.Conn) (*unix.Ucred, error) {
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		return nil, nil
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	if cerr != nil {
		return nil, fmt.Errorf("peer credentials: %w", cerr)
	}
	return cred, nil
}

// checkPeer accepts only connections from our own uid whose process does not descend from
// the daemon.
func checkPeer(nc net.Conn) error {
	cred, err := peerCred(nc)
	if err != nil || cred == nil {
		return err
	}
	if int(cred.Uid) != os.Getuid() {
		return fmt.Errorf("peer uid %d is not the daemon's uid %d", cred.Uid, os.Getuid())
	}
	return checkAncestry(int(cred.Pid), os.Getpid())
}

// checkAncestry refuses pid when self is among its ancestors. A peer whose process cannot be
// read (it exited right after connecting, possibly handing the socket to a child) is
// refused too: it cannot be told apart from a descendant.
//
// The daemon's own process is let through: only its own code could have connected (the
// in-process tests' clients do).
func checkAncestry(pid, self int) error {
	if pid <= 0 {
		return fmt.Errorf("peer pid %d is unknown", pid)
	}
	if pid == self {
		return nil
	}
	for range maxAncestry {
		if pid == self {
			return errDescendant
		}
		if pid <= 1 {
			return nil
		}
		ppid, err := parentOf(pid)
		if err != nil {
			return fmt.Errorf("read the peer's process ancestry: %w", err)
		}
		pid = ppid
	}
	return fmt.Errorf("peer process ancestry is longer than %d processes", maxAncestry)
}

// procStat is what parentOf and the reaper read from /proc/<pid>/stat.
type procStat struct {
	state byte
	ppid  int
}

func readStat(pid int) (procStat, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the
	// last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := bytes.Fields(data[i+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: want state and ppid after the command name", pid)
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: ppid %q: %w", pid, f[1], err)
	}
	return procStat{state: f[0][0], ppid: ppid}, nil
}

func parentOf(pid int) (int, error) {
	st, err := readStat(pid)
	return st.ppid, err
}

// refusals bounds the log of refused connections: a descendant retrying in a loop must not
// fill the daemon's log.
type refusals struct {
	mu     sync.Mutex
	window time.Time
	n      int
}

const refusalsPerMinute = 10

func (r *refusals) log(log *slog.Logger, err error) {
	r.mu.Lock()
	now := time.Now()
	if now.Sub(r.window) > time.Minute {
		if r.n > refusalsPerMinute {
			log.Warn("refused connections not logged", "count", r.n-refusalsPerMinute)
		}
		r.window, r.n = now, 0
	}
	r.n++
	n := r.n
	r.mu.Unlock()
	if n <= refusalsPerMinute {
		log.Warn("refused connection", "err", err)
	}
}

// reapOrphans waits for the orphans the daemon adopted as a subreaper, until ctx ends.
//
// Processes the daemon starts itself are waited for by their os/exec owner, at once and for
// as long as they run; reaping them here would steal their exit status. Adopted orphans have
// no owner and would stay zombies for the daemon's lifetime. The two cannot be told apart in
// /proc, so a zombie child is reaped only once it has stayed a zombie for a whole scan
// interval: an owner's wait collects its child within milliseconds of the exit.
func reapOrphans(ctx context.Context, log *slog.Logger, interval time.Duration) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGCHLD)
	defer signal.Stop(sig)
	t := time.NewTicker(interval)
	defer t.Stop()
	self := os.Getpid()
	since := map[int]time.Time{} // zombie children → when first seen as zombies
	pending := true              // a child may have exited since the last scan
	for {
		select {
		case <-ctx.Done():
			return
		case <-sig:
			pending = true
			continue
		case <-t.C:
		}
		if !pending && len(since) == 0 {
			continue
		}
		pending = false
		now := time.Now()
		zombies := zombieChildren(self)
		for pid := range since {
			if !zombies[pid] {
				delete(since, pid) // its owner waited for it, or it was reaped
			}
		}
		for pid := range zombies {
			first, ok := since[pid]
			if !ok {
				since[pid] = now
				continue
			}
			if now.Sub(first) < interval {
				continue
			}
			var ws unix.WaitStatus
			if got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); err == nil && got == pid {
				log.Debug("reaped an orphan adopted as subreaper", "pid", pid)
				delete(since, pid)
			}
		}
	}
}

// zombieChildren lists the daemon's children that are zombies.
func zombieChildren(self int) map[int]bool {
	out := map[int]bool{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(pid); err == nil && st.ppid == self && st.state == 'Z' {
			out[pid] = true
		}
	}
	return out
}
