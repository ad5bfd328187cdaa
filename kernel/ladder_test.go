package kernel

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The timeout ladder, rung by rung, against cells that resist more and more. The kernel keeps
// its namespace unless the last rung restarts it, which restores the latest snapshot.
func TestTimeoutLadder(t *testing.T) {
	tests := []struct {
		name, code string
		notice     string // substring of Result.Notice
		restarted  bool
	}{
		{"time.sleep", "import time\ntime.sleep(60)", "The kernel and its variables are intact", false},
		{"C-level sleep", "import ctypes\nctypes.CDLL(None).sleep(60)", "The kernel and its variables are intact", false},
		{"stuck await", "import asyncio\nawait asyncio.Event().wait()", "The kernel and its variables are intact", false},
		{"busy loop", "while True:\n    pass", "The kernel and its variables are intact", false},
		{"ignores SIGINT", "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)",
			"killed and restarted the kernel. Restored from the latest snapshot: 1/1 variables", true},
	}
	k := startKernel(t, Options{InterruptGrace: 2 * time.Second})
	mustOK(t, k, "x = 41")
	if _, err := k.Snapshot(t.Context(), t.TempDir()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pid := k.PID()
			res, err := k.Execute(t.Context(), tc.code, ExecOptions{Timeout: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != StatusTimeout || !strings.Contains(res.Notice, tc.notice) {
				t.Errorf("status %s notice %q, want timeout with %q", res.Status, res.Notice, tc.notice)
			}
			if got := k.PID() != pid; got != tc.restarted {
				t.Errorf("restarted = %v, want %v", got, tc.restarted)
			}
			if r := mustOK(t, k, "x+1"); r.Text != "42\n" {
				t.Errorf("after the ladder x+1 = %q", r.Text)
			}
			select {
			case <-k.Done():
				t.Error("Done closed by a ladder restart")
			default:
			}
		})
	}
}

func TestKillDuringCell(t *testing.T) {
	k := startKernel(t, Options{})
	done := make(chan *Result, 1)
	go func() {
		res, err := k.Execute(context.Background(), "print('started', flush=True)\nimport time\ntime.sleep(60)",
			ExecOptions{OnOutput: func(o Output) {
				if strings.Contains(o.Text, "started") {
					syscall.Kill(k.PID(), syscall.SIGKILL)
				}
			}})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	res := <-done
	if res == nil {
		return
	}
	if res.Status != StatusDied || !strings.Contains(res.Notice, "died") || !strings.Contains(res.Text, "started") {
		t.Errorf("result %s %q notice %q", res.Status, res.Text, res.Notice)
	}
	<-k.Done() // closed by the death itself, before any Close
	if _, err := k.Execute(t.Context(), "1", ExecOptions{}); err == nil {
		t.Error("Execute on a dead kernel succeeded")
	}
}

func TestInterrupt(t *testing.T) {
	k := startKernel(t, Options{})
	started := make(chan struct{}, 1)
	done := make(chan *Result, 1)
	go func() {
		res, _ := k.Execute(context.Background(), "print('go', flush=True)\nimport time\ntime.sleep(60)",
			ExecOptions{OnOutput: func(o Output) {
				select {
				case started <- struct{}{}:
				default:
				}
			}})
		done <- res
	}()
	<-started
	// A SIGINT that lands while the print is still flushing is swallowed by ipykernel's
	// iostream; interrupt until the cell stops, as a user would.
	for {
		if err := k.Interrupt(t.Context()); err != nil {
			t.Fatal(err)
		}
		select {
		case res := <-done:
			if res.Status != StatusError || res.Error == nil || res.Error.Name != "KeyboardInterrupt" {
				t.Fatalf("result %s %+v", res.Status, res.Error)
			}
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// A cell awaiting a host request that never answers is stopped by the ladder like any stuck
// await; the host handler sees its context cancelled when the kernel closes.
func TestTimeoutWhileAwaitingHost(t *testing.T) {
	host := &recordingHost{started: make(chan struct{}, 1), release: make(chan struct{})}
	k := startKernel(t, Options{Host: host, InterruptGrace: 2 * time.Second})
	res, err := k.Execute(t.Context(), "h = await rlm('never answered')", ExecOptions{Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusTimeout || !strings.Contains(res.Notice, "variables are intact") {
		t.Fatalf("status %s notice %q text %q", res.Status, res.Notice, res.Text)
	}
	if r := mustOK(t, k, "await arbor_ping('still here')"); !strings.Contains(r.Text, "still here") {
		t.Errorf("bridge after the timeout: %q", r.Text)
	}
}
