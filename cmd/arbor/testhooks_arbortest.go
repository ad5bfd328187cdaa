//go:build arbortest

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/arborhq/arbor/agents"
	"github.com/arborhq/arbor/server"
)

// Test hooks, only in the binary the tests build (-tags arbortest): crash points that make the
// daemon die as kill -9 would at a chosen step, and a small follow queue.

// daemonTestHooks sets the crash points the environment names:
//   - ARBOR_TEST_CRASH_AFTER_HEARTBEAT_CLAIM=1: with a heartbeat run claimed, not yet delivered;
//   - ARBOR_TEST_CRASH_WORKTREE=STEP: at a step of making or reclaiming a session's worktree,
//     held until ARBOR_TEST_CRASH_WORKTREE_WAIT (a glob) matches, e.g. until the background
//     write has begun, so the worktree is cut short half written;
//   - ARBOR_TEST_CRASH=journal:METHOD:before|after: see server.DaemonOptions.CrashAt.
func daemonTestHooks(opts *agents.Options, d *server.DaemonOptions) {
	if os.Getenv("ARBOR_TEST_CRASH_AFTER_HEARTBEAT_CLAIM") == "1" {
		opts.HeartbeatClaimed = func(string, string, int) { syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	}
	if step := os.Getenv("ARBOR_TEST_CRASH_WORKTREE"); step != "" {
		wait := os.Getenv("ARBOR_TEST_CRASH_WORKTREE_WAIT")
		opts.WorktreeStep = func(_, at string) {
			if at != step {
				return
			}
			for deadline := time.Now().Add(10 * time.Second); wait != "" && time.Now().Before(deadline); {
				if m, _ := filepath.Glob(wait); len(m) > 0 {
					break
				}
				time.Sleep(time.Millisecond)
			}
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	}
	d.CrashAt = os.Getenv("ARBOR_TEST_CRASH")
}

// followQueue is ARBOR_TEST_FOLLOW_QUEUE when set: tests overflow a small queue with fewer events.
func followQueue() int {
	if n, err := strconv.Atoi(os.Getenv("ARBOR_TEST_FOLLOW_QUEUE")); err == nil && n > 0 {
		return n
	}
	return defaultFollowQueue
}
