package kernel

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arborhq/arbor/sandbox"
)

// testPython returns a Python with ipykernel; without one it skips the test, or fails it where
// kernels are required.
func testPython(t testing.TB) string {
	t.Helper()
	py, err := FindPython()
	if err != nil {
		missing(t, "no kernel Python: %v (install it: apt install python3-ipykernel python3-dill)", err)
	}
	return py
}

// testBwrap returns the bubblewrap binary; where it cannot sandbox (not installed, user
// namespaces disabled, a container refusing the mounts) the test skips with the probe's
// reason, or fails where kernels are required (scripts/deps.sh installs it).
func testBwrap(t testing.TB) string {
	t.Helper()
	st := sandbox.Probe(context.Background())
	if !st.Available {
		missing(t, "the sandbox cannot work here: %s", st.Reason)
	}
	return st.Path
}

// kernelRequired reports whether a missing kernel or sandbox must fail the suite rather than
// skip it: under CI (CI set, as CI services do) or with ARBOR_REQUIRE_KERNEL=1. Otherwise a
// machine without ipykernel would pass the kernel suite with nothing tested.
func kernelRequired() bool {
	if ci := os.Getenv("CI"); ci != "" && ci != "0" && !strings.EqualFold(ci, "false") {
		return true
	}
	req, _ := strconv.ParseBool(os.Getenv("ARBOR_REQUIRE_KERNEL"))
	return req
}

// missing skips the test on a developer machine and fails it where kernels are required.
func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if kernelRequired() {
		t.Fatalf(format+"; required because CI or ARBOR_REQUIRE_KERNEL=1 is set", args...)
		return
	}
	t.Skipf(format+"; skipped (set ARBOR_REQUIRE_KERNEL=1 to make this a failure)", args...)
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

// startKernel starts a kernel in temp dirs and closes it at cleanup.
func startKernel(t testing.TB, o Options) *Kernel {
	t.Helper()
	if o.Python == "" {
		o.Python = testPython(t)
	}
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	if o.StateDir == "" {
		o.StateDir = t.TempDir()
	}
	if o.Logger == nil {
		o.Logger = testLogger(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	k, err := Start(ctx, o)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := k.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return k
}

func run(t testing.TB, k *Kernel, code string) *Result {
	t.Helper()
	res, err := k.Execute(context.Background(), code, ExecOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatalf("Execute(%q): %v", code, err)
	}
	return res
}

// mustOK runs code and fails the test unless the cell succeeded.
func mustOK(t testing.TB, k *Kernel, code string) *Result {
	t.Helper()
	res := run(t, k, code)
	if res.Status != StatusOK {
		t.Fatalf("Execute(%q) = %s: %s", code, res.Status, res.Text)
	}
	return res
}

// processAlive reports whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// state is the field after the ")" that ends the command name.
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ')' {
			return i+2 < len(b) && b[i+2] != 'Z'
		}
	}
	return false
}

func itoa(n int) string { return strconv.Itoa(n) }

// waitGoroutines waits until the goroutine count returns to at most base, failing after a
// generous bound (a leak never returns; a slow exit does).
func waitGoroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Fatalf("goroutines: %d > baseline %d\n%s", runtime.NumGoroutine(), base, buf[:n])
		}
		time.Sleep(20 * time.Millisecond)
	}
}
