//go:build !linux

package sandbox

import "context"

// Freeze does nothing off Linux, where there is no sandbox to freeze.
func Freeze(ctx context.Context, g *Group, init int) (thaw func() error, err error) {
	return func() error { return nil }, nil
}

// Freezer is "": no cgroup.
func (g *Group) Freezer() string { return "" }
