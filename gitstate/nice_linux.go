package gitstate

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// backgroundNice is the niceness of a background worktree write's threads. At 10 a thread
// gets about a tenth of a contended core's time against one at 0, so the daemon's own work
// (registering sessions, answering editors, sending model calls) and the kernels' cells go
// first, and the write still has the machine to itself when nothing else wants it.
const backgroundNice = 10

// yieldCPU makes the calling goroutine's work background work: it locks the goroutine to
// its thread and lowers that thread's priority (Linux sets niceness per thread), so the
// file-creating system calls of a write, which run in that thread, give way too, and a git
// the goroutine starts inherits the niceness. The goroutine must not unlock the thread: when
// it returns the runtime ends the thread with it, so no other goroutine runs at the lowered
// priority, and raising it back would need CAP_SYS_NICE.
//
// The process's main thread is the exception: the runtime cannot end it, so a goroutine that
// returned locked to it would leave it parked for good, and lowered, its niceness is what ps
// and top show for the whole daemon. A goroutine that finds itself there unlocks and runs at
// the normal priority.
func yieldCPU() {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		runtime.UnlockOSThread()
		return
	}
	unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), backgroundNice) // best effort: lowering is always allowed
}
