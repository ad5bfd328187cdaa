package gitstate

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// threadNice returns the niceness of each of this process's threads, from /proc.
func threadNice(t *testing.T) map[string]int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Skip("no /proc:", err)
	}
	out := map[string]int{}
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", task.Name(), "stat"))
		if err != nil {
			continue // the thread ended meanwhile
		}
		// Fields after the command's closing parenthesis; niceness is the 19th of stat.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		n, err := strconv.Atoi(f[16])
		if err != nil {
			t.Fatalf("task %s stat: %v", task.Name(), err)
		}
		out[task.Name()] = n
	}
	return out
}

// A background write runs at backgroundNice, its files' system calls too, and leaves no thread
// of the process at that priority once it is done (the main thread, which cannot end, is never
// lowered); the caller's thread keeps its own.
func TestBackgroundWriteYields(t *testing.T) {
	root := newTestRepo(t)
	r, err := Open(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, head, _ := r.Head(t.Context())
	during := make(chan int, 1)
	wtid := 0
	r.beforeFill = func(string) {
		wtid = unix.Gettid()
		during <- threadNice(t)[strconv.Itoa(unix.Gettid())]
	}
	p, err := r.StartWorktree(t.Context(), WorktreeSpec{Name: "bg", Branch: "arbor/bg", Base: head,
		Dir: filepath.Join(r.CommonDir(), "arbor", "worktrees", "bg")})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := <-during; wtid == unix.Getpid() {
		if n != 0 {
			t.Errorf("the write ran on the main thread and lowered it to %d", n)
		}
	} else if n != backgroundNice {
		t.Errorf("the background write's thread ran at niceness %d, want %d", n, backgroundNice)
	}
	if n := threadNice(t)[strconv.Itoa(unix.Gettid())]; n == backgroundNice {
		t.Errorf("the caller's thread was lowered to %d", n)
	}
	// The write's threads end with its goroutines; none stays behind for other work to land on.
	deadline := time.Now().Add(10 * time.Second)
	for {
		low := 0
		for _, n := range threadNice(t) {
			if n == backgroundNice {
				low++
			}
		}
		if low == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d threads still at niceness %d after the write: %v (write thread %d)", low, backgroundNice, threadNice(t), wtid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A synchronous worktree, which its caller waits on, is not background work.
	r.beforeFill = nil
	if err := r.AddWorktree(t.Context(), WorktreeSpec{Name: "fg", Branch: "arbor/fg", Base: head,
		Dir: filepath.Join(r.CommonDir(), "arbor", "worktrees", "fg")}); err != nil {
		t.Fatal(err)
	}
	for task, n := range threadNice(t) {
		if n == backgroundNice {
			t.Errorf("thread %s at niceness %d after a synchronous worktree", task, n)
		}
	}
}
