package kernel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/arborhq/arbor/atomicfile"
)

// The orphan registry: one small file per live kernel process under <stateDir>/procs, naming
// its pid, its start time (clock ticks since boot, /proc/<pid>/stat field 22) and the boot id.
// A daemon that crashed leaves these behind; the next one calls ReapOrphans, which kills a
// recorded process group only if a process with that pid still has that start time on this
// boot — a reused pid is never killed.
type procRecord struct {
	PID    int    `json:"pid"`
	Start  uint64 `json:"start"`
	BootID string `json:"boot_id"`
}

func procDir(stateDir string) string { return filepath.Join(stateDir, "procs") }

// procStart returns the start time of pid in clock ticks since boot.
func procStart(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses and may contain spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state); starttime is field 22.
	if len(f) < 20 {
		return 0, errors.New("short /proc stat")
	}
	return strconv.ParseUint(string(f[19]), 10, 64)
}

// procParent returns pid's parent pid, or 0.
func procParent(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(string(f[1]))
	return ppid
}

func bootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return string(bytes.TrimSpace(b))
}

// recordProc writes the registry entry for pid.
func recordProc(stateDir string, pid int) error {
	start, err := procStart(pid)
	if err != nil {
		return fmt.Errorf("record kernel %d: %w", pid, err)
	}
	dir := procDir(stateDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("record kernel %d: %w", pid, err)
	}
	b, _ := json.Marshal(procRecord{PID: pid, Start: start, BootID: bootID()})
	// Atomic, so a reaper never reads half a record; no fsync, because a record matters only
	// on the boot that wrote it (a power cut kills every kernel it names).
	if err := atomicfile.WriteFileNoSync(filepath.Join(dir, strconv.Itoa(pid)+".json"), b, 0o600); err != nil {
		return fmt.Errorf("record kernel %d: %w", pid, err)
	}
	return nil
}

func forgetProc(stateDir string, pid int) {
	os.Remove(filepath.Join(procDir(stateDir), strconv.Itoa(pid)+".json"))
}

// ReapOrphans kills kernel process groups recorded under stateDir by a daemon that is gone,
// and returns the pids it killed. Entries whose process no longer exists, or whose pid now
// belongs to another process, are only removed.
func ReapOrphans(stateDir string) ([]int, error) {
	ents, err := os.ReadDir(procDir(stateDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reap orphan kernels: %w", err)
	}
	boot := bootID()
	var killed []int
	for _, e := range ents {
		path := filepath.Join(procDir(stateDir), e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		var r procRecord
		if json.Unmarshal(b, &r) == nil && r.PID > 1 && r.BootID == boot {
			if start, err := procStart(r.PID); err == nil && start == r.Start {
				_ = syscall.Kill(-r.PID, syscall.SIGKILL)
				_ = syscall.Kill(r.PID, syscall.SIGKILL)
				killed = append(killed, r.PID)
			}
		}
		os.Remove(path)
	}
	return killed, nil
}

// ReapUnder kills the processes (and the process groups they lead) whose command line runs
// a kernel runtime under one of dirs, and returns their pids. It closes the window ReapOrphans leaves: a
// daemon killed between starting a kernel and recording it leaves a kernel no record names,
// but its command line names its session's kernel directory. Callers pass only directories
// they own (a session whose log they hold), so no other daemon's kernel is touched.
func ReapUnder(dirs []string) ([]int, error) {
	if len(dirs) == 0 {
		return nil, nil
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("reap kernels: %w", err)
	}
	self := os.Getpid()
	var killed []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 || pid == self {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !namesUnder(b, dirs) || procParent(pid) == self {
			continue // our own children are ours to manage
		}
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		killed = append(killed, pid)
	}
	return killed, nil
}

// namesUnder reports whether a NUL-separated command line runs a kernel runtime
// (arbor_kernel.py) under one of dirs: bwrap's and the kernel's own do; a user's editor or
// pager open on a file there does not.
func namesUnder(cmdline []byte, dirs []string) bool {
	for _, arg := range bytes.Split(cmdline, []byte{0}) {
		if filepath.Base(string(arg)) != kernelScript {
			continue
		}
		for _, d := range dirs {
			d = filepath.Clean(d) + string(filepath.Separator)
			if bytes.HasPrefix(arg, []byte(d)) {
				return true
			}
		}
	}
	return false
}
