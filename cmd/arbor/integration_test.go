package main

// Integration tests: the real binary (built with -race in TestMain), a real daemon on a real
// Unix socket, real ipykernel kernels, real git repositories checked with the git CLI, and the
// scripted model of testdata/script.json served by `arbor fake-model`. Every assertion is on
// what a user sees: stdout, stderr, exit status and the repository.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestRunSessionOnItsOwnBranch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	// A turn that runs code in the kernel and then answers.
	r := e.mustArbor("run", "compute two plus two minus two")
	id := sessionID(t, r)
	if !regexp.MustCompile(`(?m)^\s*│ 2$`).MatchString(r.stdout) {
		t.Errorf("the kernel result 2 is not shown:\n%s", r)
	}
	if !strings.Contains(r.stdout, "the answer is 2") {
		t.Errorf("the model's answer is not shown:\n%s", r)
	}
	if !strings.Contains(r.stdout, "● idle") {
		t.Errorf("the run does not end idle:\n%s", r)
	}

	s := e.session(id)
	wantBranch := regexp.MustCompile(`^arbor/[a-z0-9-]+-` + regexp.QuoteMeta(id[:8]) + `$`)
	if !wantBranch.MatchString(s.Branch) {
		t.Errorf("branch = %q, want arbor/<slug>-%s", s.Branch, id[:8])
	}
	if s.State != "idle" || s.Model != "scripted" || s.Worktree == "" || s.Parent == nil || *s.Parent != "" {
		t.Errorf("arbor ls --json entry = %+v, want state idle, model scripted, a worktree, parent \"\"", s)
	}
	var usage map[string]any
	if err := json.Unmarshal(s.Usage, &usage); err != nil || usage["modelCalls"] == nil || usage["modelCalls"].(float64) < 2 {
		t.Errorf("usage = %s, want modelCalls >= 2", s.Usage)
	}

	// The git CLI sees the branch and the worktree, and the worktree is clean.
	if wl := e.git(e.repo, "worktree", "list", "--porcelain"); !strings.Contains(wl, "worktree "+s.Worktree+"\n") ||
		!strings.Contains(wl, "branch refs/heads/"+s.Branch+"\n") {
		t.Errorf("git worktree list does not show %s on %s:\n%s", s.Worktree, s.Branch, wl)
	}
	if st := e.git(s.Worktree, "status", "--porcelain"); st != "" {
		t.Errorf("git -C worktree status --porcelain = %q, want clean", st)
	}
	if br := e.git(e.repo, "branch", "--list", "arbor/*"); !strings.Contains(br, s.Branch) {
		t.Errorf("git branch --list 'arbor/*' = %q, want %s", br, s.Branch)
	}

	// A turn that writes a file: a checkpoint commit on the session branch, a diff, and the
	// user's tree untouched.
	r = e.mustArbor("run", "write a file please")
	id2 := sessionID(t, r)
	s2 := e.session(id2)
	if data, err := os.ReadFile(filepath.Join(s2.Worktree, "hello.txt")); err != nil || string(data) != "hello from arbor\n" {
		t.Errorf("hello.txt in the worktree = %q, %v", data, err)
	}
	if st := e.git(s2.Worktree, "status", "--porcelain"); st != "" {
		t.Errorf("worktree not clean after the checkpoint: %q", st)
	}
	log := e.git(e.repo, "log", "--format=%an %s", s2.Branch)
	if n := strings.Count(log, "\n"); n < 2 || strings.Contains(strings.SplitN(log, "\n", 2)[0], "initial") {
		t.Errorf("git log %s shows no checkpoint commit on top of the base:\n%s", s2.Branch, log)
	}
	if files := e.git(e.repo, "show", "--name-only", "--format=", s2.Branch); strings.TrimSpace(files) != "hello.txt" {
		t.Errorf("the checkpoint commit changes %q, want hello.txt", files)
	}
	d := e.mustArbor("diff", id2)
	for _, want := range []string{"diff --git a/hello.txt b/hello.txt", "+++ b/hello.txt", "+hello from arbor"} {
		if !strings.Contains(d.stdout, want) {
			t.Errorf("arbor diff lacks %q:\n%s", want, d)
		}
	}
	if d := e.mustArbor("diff", id); strings.TrimSpace(d.stdout) != "" {
		t.Errorf("arbor diff of a session that changed nothing = %q, want empty", d.stdout)
	}
	if st := e.git(e.repo, "status", "--porcelain"); st != "" {
		t.Errorf("the user's tree changed: git status --porcelain = %q", st)
	}
	if _, err := os.Stat(filepath.Join(e.repo, "hello.txt")); err == nil {
		t.Errorf("hello.txt appeared in the user's tree")
	}
	if head := strings.TrimSpace(e.git(e.repo, "rev-parse", "--abbrev-ref", "HEAD")); head != "main" {
		t.Errorf("the user's HEAD moved to %q", head)
	}
}

func TestDetachThenFollowFromAnotherProcess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.mustArbor("run", "--detach", "slow count to three")
	id := sessionID(t, r)
	if !strings.Contains(r.stdout, "arbor log "+id[:8]+" --follow") {
		t.Errorf("--detach does not say how to follow:\n%s", r)
	}
	// The client that started the session is gone; a new one follows it to the end.
	f := e.mustArbor("log", id, "--follow", "--json")
	evs := parseEvents(t, f)
	if len(evs) == 0 {
		t.Fatalf("no events:\n%s", f)
	}
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d, want seqs 1, 2, 3, … :\n%s", i, ev.Seq, f.stdout)
		}
	}
	if st := states(evs); len(st) == 0 || st[len(st)-1] != "idle" {
		t.Errorf("states = %v, want the last to be idle", st)
	}
	if !strings.Contains(f.stdout, "tick 2") || !strings.Contains(f.stdout, "counted to three") {
		t.Errorf("the followed log misses the kernel output or the answer:\n%s", f.stdout)
	}
	// The plain log, after the fact, is the same sequence.
	again := parseEvents(t, e.mustArbor("log", id[:8], "--json"))
	if len(again) != len(evs) {
		t.Errorf("arbor log has %d events, arbor log --follow had %d", len(again), len(evs))
	}
}

// logOf reads a session's events with `arbor log --json`.
func (e *env) logOf(id string) []jsonEvent {
	e.t.Helper()
	return parseEvents(e.t, e.mustArbor("log", id, "--json"))
}

func hasEvent(evs []jsonEvent, typ, substr string) bool {
	for _, ev := range evs {
		if ev.Type == typ && strings.Contains(string(ev.Data), substr) {
			return true
		}
	}
	return false
}

func TestStopARunningCell(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := sessionID(t, e.mustArbor("run", "--detach", "sleep long"))
	eventually(t, "the cell starts", func() bool { return hasEvent(e.logOf(id), "tool_started", "time.sleep(600)") })

	r := e.mustArbor("stop", id[:8])
	if !strings.Contains(r.stdout, "stopped "+id) {
		t.Errorf("arbor stop does not confirm:\n%s", r)
	}
	f := e.mustArbor("log", id, "--follow", "--json")
	if st := states(parseEvents(t, f)); len(st) == 0 || st[len(st)-1] != "stopped" {
		t.Errorf("states = %v, want the last to be stopped", st)
	}
	if s := e.session(id); s.State != "stopped" {
		t.Errorf("arbor ls: state %q, want stopped", s.State)
	}
	// A stopped session is refused more work, with a reason.
	if r := e.arbor("send", id, "more"); r.code == 0 || !strings.Contains(r.stderr, "stopped") {
		t.Errorf("want arbor send to a stopped session refused, saying it is stopped:\n%s", r)
	}
}

func TestFollowUpKeepsTheKernel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := sessionID(t, e.mustArbor("run", "remember a secret"))
	if r := e.mustArbor("send", id, "what did I say?"); !regexp.MustCompile(`^(delivered|queued)\n$`).MatchString(r.stdout) {
		t.Errorf("arbor send says %q, want delivered or queued", r.stdout)
	}
	eventually(t, "the follow-up is answered", func() bool {
		return hasEvent(e.logOf(id), "assistant_message", "you said swordfish")
	})
	evs := e.logOf(id)
	if !hasEvent(evs, "tool_finished", `swordfish`) {
		t.Errorf("the kernel lost the variable of the first turn")
	}
	eventually(t, "the session settles", func() bool { return e.session(id).State == "idle" })
}

// TestSessionsSurviveTheDaemon: stopping the daemon, or killing it, loses nothing; the next
// command starts a new daemon that recovers every session and its log, and leaves no kernel
// of the old daemon behind.
func TestSessionsSurviveTheDaemon(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"stop", "kill"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			id := sessionID(t, e.mustArbor("run", "remember a secret"))
			before := e.logOf(id)
			old := e.daemonPID()
			if old == 0 {
				t.Fatal("no daemon pid in the lock file")
			}
			if how == "stop" {
				e.arbor("daemon", "stop") // may report a lost reply; the daemon stops all the same
			} else {
				// A kernel snapshots its namespace once its cells have been quiet a second; a
				// kill before that loses what they assigned (and says so to the model).
				manifest := filepath.Join(e.repo, ".git", "arbor", "sessions", id, "kernel", "snapshot", "manifest.json")
				eventually(t, "the kernel's snapshot to hold secret", func() bool {
					b, _ := os.ReadFile(manifest)
					return strings.Contains(string(b), `"secret"`)
				})
				syscall.Kill(old, syscall.SIGKILL)
			}
			eventually(t, "the old daemon is gone", func() bool { return syscall.Kill(old, 0) != nil })

			s := e.session(id) // starts a new daemon
			if e.daemonPID() == old {
				t.Fatalf("the old daemon still answers")
			}
			if s.State == "" || s.State == "failed" || s.Branch == "" {
				t.Errorf("after the restart: %+v, want the session with its branch, not failed", s)
			}
			after := e.logOf(id)
			if len(after) < len(before) {
				t.Fatalf("the log lost events: %d before, %d after", len(before), len(after))
			}
			for i := range before {
				if after[i].Seq != before[i].Seq || after[i].Type != before[i].Type || string(after[i].Data) != string(before[i].Data) {
					t.Errorf("event %d changed across the restart: %+v → %+v", i, before[i], after[i])
				}
			}
			// The old daemon's kernels do not outlive it.
			kernels := kernelPIDs(before)
			if len(kernels) == 0 {
				t.Fatalf("no kernel started event before the restart")
			}
			eventually(t, fmt.Sprintf("kernels %v of the old daemon are gone", kernels), func() bool {
				for _, pid := range kernels {
					if alive(pid) {
						return false
					}
				}
				return true
			})
			// And the session still works, with what its kernel knew.
			e.mustArbor("send", id, "what did I say?")
			evs := e.waitLog(id, "the follow-up after the restart is answered", func(evs []jsonEvent) bool {
				return hasEvent(evs, "assistant_message", "you said swordfish") || hasEvent(evs, "turn_failed", "")
			})
			if !hasEvent(evs, "assistant_message", "you said swordfish") {
				t.Errorf("after the restart the kernel lost its namespace; last events:\n%v", lastEvents(evs, 6))
			}
		})
	}
}

// waitLog polls the session's log until cond holds; on giving up it shows the last events.
// It gives up only when the log stops growing for hangGuard/2: a hang guard, not a time limit
// on the session, which on a loaded 2-core machine under -race can take minutes for a long
// burst while making steady progress.
func (e *env) waitLog(id, what string, cond func([]jsonEvent) bool) []jsonEvent {
	e.t.Helper()
	seen, deadline := -1, time.Time{}
	for {
		evs := e.logOf(id)
		if cond(evs) {
			return evs
		}
		if len(evs) > seen {
			seen, deadline = len(evs), time.Now().Add(hangGuard/2)
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("gave up waiting: %s; no new event for %v; last events:\n%s", what, hangGuard/2, lastEvents(evs, 8))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kernelPIDs lists the pids of the log's kernel started events.
func kernelPIDs(evs []jsonEvent) []int {
	var pids []int
	for _, ev := range evs {
		var d struct {
			Event string
			PID   int
		}
		if ev.Type == "kernel" && json.Unmarshal(ev.Data, &d) == nil && d.Event == "started" && d.PID > 0 {
			pids = append(pids, d.PID)
		}
	}
	return pids
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !isZombie(st)
}

func lastEvents(evs []jsonEvent, n int) string {
	var b strings.Builder
	for _, ev := range evs[max(0, len(evs)-n):] {
		fmt.Fprintf(&b, "%d %s %s\n", ev.Seq, ev.Type, tail(string(ev.Data), 300))
	}
	return b.String()
}

// TestInterruptedClientLeavesTheSessionRunning: Ctrl-C on `arbor run` ends the client, not
// the session.
func TestInterruptedClientLeavesTheSessionRunning(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cmd := exec.Command(arborBin, "run", "slow count to three")
	cmd.Dir, cmd.Env = e.repo, e.environ()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	first, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("arbor run printed no first line: %v", err)
	}
	id := sessionID(t, result{stdout: first})
	cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { io.Copy(io.Discard, out); done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(hangGuard):
		cmd.Process.Kill()
		t.Fatal("arbor run did not exit on SIGINT")
	}
	f := e.mustArbor("log", id, "--follow", "--json")
	if st := states(parseEvents(t, f)); len(st) == 0 || st[len(st)-1] != "idle" {
		t.Errorf("states = %v, want the session to finish idle without its client", st)
	}
}

// TestFollowersJoiningABusySession: followers that attach while a session appends events
// quickly each see the whole log, seq 1 to the end, in order, nothing missing.
func TestFollowersJoiningABusySession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := sessionID(t, e.mustArbor("run", "--detach", "burst of cells"))
	var wg sync.WaitGroup
	results := make([]result, 6)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 150 * time.Millisecond) // join at different points
			results[i] = e.arbor("log", id, "--follow", "--json")
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r.code != 0 {
			t.Errorf("follower %d:\n%s", i, r)
			continue
		}
		evs := parseEvents(t, r)
		for j, ev := range evs {
			if ev.Seq != uint64(j+1) {
				t.Errorf("follower %d: event %d has seq %d, want %d (seqs %v…)", i, j, ev.Seq, j+1, seqs(evs, 12))
				break
			}
		}
		if !hasEvent(evs, "assistant_message", "burst done") {
			t.Errorf("follower %d stopped before the end: %s", i, lastEvents(evs, 3))
		}
	}
}

func seqs(evs []jsonEvent, n int) []uint64 {
	var out []uint64
	for _, ev := range evs[:min(n, len(evs))] {
		out = append(out, ev.Seq)
	}
	return out
}

// TestFollowALongSession: `arbor log --follow` of a settled session with more than a
// thousand events, after an earlier turn that also ended idle, prints them all and exits,
// even when its reader is slow (a pager, a terminal scrolled back).
func TestFollowALongSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// The follower's queue is 64 here (1024 in use), so 40 cells overflow it.
	const queue = 64
	e.vars["ARBOR_TEST_FOLLOW_QUEUE"] = strconv.Itoa(queue)
	writeFile(t, filepath.Join(e.repo, "arbor.json"), `{"maxTurnSteps": 1000}`)
	e.git(e.repo, "add", "arbor.json")
	e.git(e.repo, "commit", "-qm", "allow long turns")
	// A long task makes the first events big enough to fill the stdout pipe of a follower
	// whose reader waits, so the follower is still at the first idle when the rest arrives.
	task := "long burst of cells " + strings.Repeat("padding ", 10000)
	id := sessionID(t, e.mustArbor("run", task))
	e.mustArbor("send", id, "go")
	evs := e.waitLog(id, "the long burst ends", func(evs []jsonEvent) bool {
		st := states(evs)
		return hasEvent(evs, "turn_failed", "") || (hasEvent(evs, "assistant_message", "long burst done") && st[len(st)-1] == "idle")
	})
	if len(evs) < queue+16 { // more than the follower queue after the first idle
		t.Fatalf("only %d events; the burst did not run: %s", len(evs), lastEvents(evs, 4))
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // hang guard
	defer cancel()
	cmd := exec.CommandContext(ctx, arborBin, "log", id, "--follow", "--json")
	cmd.Dir, cmd.Env = e.repo, e.environ()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // a slow reader: not a timing assertion
	out, _ := io.ReadAll(stdout)
	err = cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("arbor log --follow hung on a settled session of %d events (printed %d lines)", len(evs), strings.Count(string(out), "\n"))
	}
	if err != nil {
		t.Fatalf("arbor log --follow: %v", err)
	}
	got := parseEvents(t, result{stdout: string(out)})
	if len(got) != len(evs) {
		t.Errorf("arbor log --follow printed %d events, the log has %d", len(got), len(evs))
	}
}
