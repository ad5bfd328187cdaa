package kernel

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// pythonCandidates are tried after $ARBOR_KERNEL_PYTHON. Absolute system paths come first: the
// python3 first on PATH is often a virtualenv or toolchain build without ipykernel.
var pythonCandidates = []string{"/usr/bin/python3", "/usr/local/bin/python3", "python3", "python"}

var (
	findMu    sync.Mutex
	findCache = map[string]string{} // candidate → resolved path that imports ipykernel
)

// FindPython returns an interpreter that can import ipykernel: $ARBOR_KERNEL_PYTHON, then
// /usr/bin/python3, then other candidates. The error names the apt package python3-ipykernel.
func FindPython() (string, error) {
	var tried []string
	cands := pythonCandidates
	if env := os.Getenv("ARBOR_KERNEL_PYTHON"); env != "" {
		cands = append([]string{env}, cands...)
	}
	for _, c := range cands {
		p, err := checkPython(c)
		if err == nil {
			return p, nil
		}
		tried = append(tried, fmt.Sprintf("%s (%v)", c, err))
	}
	return "", fmt.Errorf("find a Python that can import ipykernel: none found; tried %s. "+
		"On Debian/Ubuntu run `sudo apt-get install python3-ipykernel python3-dill`, "+
		"or set ARBOR_KERNEL_PYTHON to an interpreter that has ipykernel", strings.Join(tried, ", "))
}

// explicitPython checks an interpreter the user named (ARBOR_KERNEL_PYTHON, kernelPython in
// arbor.json): it is used as given, so a wrong one must fail here with a reason, not later as a
// kernel that exits during start.
func explicitPython(p string) (string, error) {
	abs, err := checkPython(p)
	if err != nil {
		return "", fmt.Errorf("kernel Python %s: %v: on Debian/Ubuntu run `sudo apt-get install python3-ipykernel python3-dill` "+
			"for /usr/bin/python3, or point ARBOR_KERNEL_PYTHON (kernelPython in arbor.json) at an interpreter with ipykernel", p, err)
	}
	return abs, nil
}

func checkPython(cand string) (string, error) {
	p, err := exec.LookPath(cand)
	if err != nil {
		return "", errors.New("not found")
	}
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	findMu.Lock()
	defer findMu.Unlock()
	if ok, hit := findCache[p]; hit && ok != "" {
		return ok, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// find_spec checks importability without paying for the import itself (~0.7 s).
	out, err := exec.CommandContext(ctx, p, "-c",
		"import importlib.util as u, sys; sys.exit(0 if u.find_spec('ipykernel') else 3)").CombinedOutput()
	if err != nil {
		if len(out) > 0 {
			return "", fmt.Errorf("no ipykernel: %s", strings.TrimSpace(string(out)))
		}
		return "", errors.New("no ipykernel")
	}
	findCache[p] = p
	return p, nil
}
