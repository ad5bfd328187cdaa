//go:build !linux

package sandbox

import "os/exec"

// DetectBudget reports that no limit is enforced: cgroups and per-namespace rlimits are Linux's.
func DetectBudget() *Budget {
	return &Budget{Reason: "process and memory budgets need Linux"}
}

// Group is the budget of one process tree; off Linux it limits nothing.
type Group struct{ Limits Limits }

// NewGroup returns a group that limits nothing.
func (b *Budget) NewGroup(name string, l Limits) (*Group, error) { return &Group{Limits: l}, nil }

// Outer returns argv.
func (g *Group) Outer(argv []string) []string { return argv }

// Inner returns argv.
func (g *Group) Inner(argv []string) []string { return argv }

// CgroupFD returns -1: no cgroup.
func (g *Group) CgroupFD() int { return -1 }

// Counters returns none.
func (g *Group) Counters() Counters { return Counters{} }

// Explain says nothing.
func (g *Group) Explain(before, after Counters, errName, errText string) string { return "" }

// Remove does nothing.
func (g *Group) Remove() error { return nil }

// PhysicalMemory is unknown off Linux: 0.
func PhysicalMemory() int64 { return 0 }

// Close does nothing.
func (b *Budget) Close() {}

// Apply leaves cmd as it is.
func (g *Group) Apply(cmd *exec.Cmd) {}
