package kernel

import (
	"embed"
	"fmt"
	"os"
	"path/filepath"

	"github.com/arborhq/arbor/atomicfile"
)

// runtimeFS is the Python side of Arbor: the launcher, the bridge client and Python surface, and
// the snapshot code. It is written into each kernel's state directory at start, so a kernel
// always runs the runtime of the daemon that launched it.
//
//go:embed runtime/*.py
var runtimeFS embed.FS

// installRuntime writes the embedded runtime into dir and returns the launcher's path.
func installRuntime(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("install kernel runtime: %w", err)
	}
	ents, err := runtimeFS.ReadDir("runtime")
	if err != nil {
		return "", fmt.Errorf("install kernel runtime: %w", err)
	}
	for _, e := range ents {
		b, err := runtimeFS.ReadFile("runtime/" + e.Name())
		if err != nil {
			return "", fmt.Errorf("install kernel runtime: %w", err)
		}
		p := filepath.Join(dir, e.Name())
		if old, err := os.ReadFile(p); err == nil && string(old) == string(b) {
			continue
		}
		// No fsync: every start compares the files with the embedded ones, so one lost to a
		// power cut is written again before a kernel runs it; a kernel start need not wait on
		// the disk.
		if err := atomicfile.WriteFileNoSync(p, b, 0o600); err != nil {
			return "", fmt.Errorf("install kernel runtime: %w", err)
		}
	}
	return filepath.Join(dir, kernelScript), nil
}

// kernelScript is the file a local kernel runs (its command line names it).
const kernelScript = "arbor_kernel.py"
