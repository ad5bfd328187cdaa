package eventlog

import (
	"os"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	CrashChild()
	os.Exit(m.Run())
}

// TestCrash kills a writer process with SIGKILL 30 times while 16 goroutines append to 8 logs and
// checks after each kill that every acknowledged record survived, in order, once.
// ARBOR_SOAK=1 runs 1,000 cycles.
func TestCrash(t *testing.T) {
	t.Parallel()
	cycles := 30
	if os.Getenv("ARBOR_SOAK") == "1" {
		cycles = 1000
	}
	var out strings.Builder
	if err := Soak(t.Context(), t.TempDir(), cycles, &out); err != nil {
		t.Log(out.String())
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	t.Log(lines[len(lines)-1])
}
