package agents

import (
	"fmt"
	"os"
	"testing"
)

// TestMain gives the package's tests a user config and data directory of their own
// (XDG_CONFIG_HOME, XDG_DATA_HOME: the trust record, the global harness), set once for the
// process so tests can run in parallel. A test that needs them empty sets its own with
// t.Setenv and runs alone.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "arbor-agents-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_CONFIG_HOME", dir+"/config")
	os.Setenv("XDG_DATA_HOME", dir+"/data")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
