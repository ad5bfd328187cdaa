package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// freezeWait bounds how long a freeze waits for every process to stop: a process in an
// uninterruptible sleep stops only when it leaves it.
const freezeWait = 5 * time.Second

// Freeze stops every process of a sandbox until thaw is called, so that nothing in it runs
// while the host reads what the sandbox can write (git reading the worktree by path, where a
// file swapped for a symlink between git's lstat and its open would hand git a host file).
// g is the sandbox's budget (nil: none) and init the host pid of its pid namespace's init
// (bwrap's child-pid). A cgroup that can freeze is frozen whole (cgroup v2 cgroup.freeze, the
// v1 freezer); otherwise every process whose pid namespace is init's gets SIGSTOP, again and
// again until a pass finds none running, and SIGCONT at thaw. Thaw is safe to call more than
// once; its error says what may still be stopped.
func Freeze(ctx context.Context, g *Group, init int) (thaw func() error, err error) {
	if g != nil && g.freeze != "" {
		thaw, cerr := g.freezeCgroup(ctx)
		if cerr == nil {
			return thaw, nil
		}
		err = cerr
	}
	thaw, serr := freezeNamespace(ctx, init)
	if serr != nil {
		return nil, errors.Join(err, serr)
	}
	return thaw, nil
}

// freezeCgroup freezes the group's freezer cgroup and waits until the kernel reports it
// frozen.
func (g *Group) freezeCgroup(ctx context.Context) (func() error, error) {
	ctl, on, off, state, frozen := "cgroup.freeze", "1", "0", "cgroup.events", "frozen 1"
	if g.freezeV1 {
		ctl, on, off, state, frozen = "freezer.state", "FROZEN", "THAWED", "freezer.state", "FROZEN"
	}
	thaw := func() error {
		if err := os.WriteFile(filepath.Join(g.freeze, ctl), []byte(off), 0); err != nil {
			return fmt.Errorf("thaw cgroup %s: %w", g.freeze, err)
		}
		return nil
	}
	if err := os.WriteFile(filepath.Join(g.freeze, ctl), []byte(on), 0); err != nil {
		return nil, fmt.Errorf("freeze cgroup %s: %w", g.freeze, err)
	}
	deadline := time.Now().Add(freezeWait)
	for {
		b, err := os.ReadFile(filepath.Join(g.freeze, state))
		if err == nil && hasLine(string(b), frozen) {
			return thaw, nil
		}
		if err == nil && ctx.Err() == nil && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
			continue
		}
		if err == nil {
			err = context.Cause(ctx)
		}
		if err == nil {
			err = fmt.Errorf("not frozen after %v (a process in an uninterruptible sleep?)", freezeWait)
		}
		return nil, errors.Join(fmt.Errorf("freeze cgroup %s: %w", g.freeze, err), thaw())
	}
}

func hasLine(s, line string) bool {
	for l := range strings.SplitSeq(s, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}

// freezeNamespace stops every process in init's pid namespace with SIGSTOP. A process may
// fork, or SIGCONT a process already stopped, until it is stopped itself, so passes repeat
// until one finds every member stopped; a stopped process cannot fork, and a child its fork
// made is listed in /proc before the parent returns to user space. Processes are held by
// pidfd, so a pid reused by a host process is never signalled. Processes a cell had stopped
// itself are left stopped at thaw.
func freezeNamespace(ctx context.Context, init int) (func() error, error) {
	if init <= 0 {
		return nil, errors.New("freeze sandbox: no sandbox init pid")
	}
	self, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return nil, fmt.Errorf("freeze sandbox: %w", err)
	}
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", init))
	if err != nil {
		return nil, fmt.Errorf("freeze sandbox: pid namespace of its init %d: %w", init, err)
	}
	if ns == self {
		// init has exited and its pid names a process of the daemon's own namespace.
		return nil, fmt.Errorf("freeze sandbox: process %d is not a sandbox's init (it shares the daemon's pid namespace %s)", init, ns)
	}
	held := map[int]int{} // pid → pidfd of the processes this freeze stopped
	thaw := func() error {
		var errs []error
		for pid, fd := range held {
			if err := unix.PidfdSendSignal(fd, unix.SIGCONT, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
				errs = append(errs, fmt.Errorf("thaw sandbox process %d: %w", pid, err))
			}
			unix.Close(fd)
			delete(held, pid)
		}
		return errors.Join(errs...)
	}
	deadline := time.Now().Add(freezeWait)
	for {
		running := 0
		for _, pid := range membersOf(ns) {
			fd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				continue // exited
			}
			// The pidfd pins this process; check it is the member just listed.
			if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); err != nil || l != ns {
				unix.Close(fd)
				continue
			}
			if stopped(pid) {
				// Stopped by this freeze, or by the cell itself: then it stays so at thaw.
				unix.Close(fd)
				continue
			}
			running++
			if err := unix.PidfdSendSignal(fd, unix.SIGSTOP, nil, 0); err != nil {
				unix.Close(fd)
				if errors.Is(err, unix.ESRCH) {
					continue
				}
				return nil, errors.Join(fmt.Errorf("freeze sandbox: stop process %d: %w", pid, err), thaw())
			}
			if old, ok := held[pid]; ok {
				unix.Close(old)
			}
			held[pid] = fd
		}
		if running == 0 {
			return thaw, nil
		}
		if err := ctx.Err(); err != nil || time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("processes still running after %v (in an uninterruptible sleep?)", freezeWait)
			}
			return nil, errors.Join(fmt.Errorf("freeze sandbox: %w", err), thaw())
		}
		time.Sleep(time.Millisecond)
	}
}

// membersOf lists the pids of /proc whose pid namespace is ns.
func membersOf(ns string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err == nil && l == ns {
			pids = append(pids, pid)
		}
	}
	return pids
}

// stopped reports whether every live thread of pid is stopped (or gone): a group stop
// reaches the threads one by one.
func stopped(pid int) bool {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return true
	}
	for _, e := range ents {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, e.Name()))
		if err != nil {
			continue // the thread exited
		}
		// The state follows the command name, which is in parentheses and may hold anything.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			continue
		}
		switch b[i+2] {
		case 'T', 't', 'Z', 'X':
		default:
			return false
		}
	}
	return true
}

// freezerParent makes the daemon's own cgroup in the v1 freezer hierarchy, for a budget that
// uses v1 cgroups (which have no cgroup.freeze of their own), or returns "".
func freezerParent(f facts, b *Budget, own string) string {
	if b.Pids != MechCgroup1 && b.Memory != MechCgroup1 {
		return ""
	}
	p, ok := f.v1["freezer"]
	m, found := findMount(f.mounts, false, "freezer")
	if !ok || !found {
		return ""
	}
	dir := joinCgroup(m, p)
	if f.writable(dir) != nil {
		return ""
	}
	return filepath.Join(dir, own)
}

// Freezer is the cgroup [Freeze] freezes for the group, or "" when it stops the sandbox's
// processes by signal instead.
func (g *Group) Freezer() string {
	if g == nil {
		return ""
	}
	return g.freeze
}
