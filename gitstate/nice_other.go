//go:build !linux

package gitstate

// yieldCPU does nothing where niceness is not per thread.
func yieldCPU() {}
