package kernel

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/arborhq/arbor/sandbox"
)

// freezeGate keeps a kernel's processes frozen as one: a freeze holds it, and a launch holds
// it while it starts a process and records it, so no process of the kernel starts (a restart
// by the timeout ladder, a revive) while the others are frozen, and none is left out.
type freezeGate struct {
	once  sync.Once
	sem   chan struct{} // capacity 1
	procs []*proc       // launched, not yet seen exited; guarded by sem
}

func (g *freezeGate) lock(ctx context.Context) error {
	g.once.Do(func() { g.sem = make(chan struct{}, 1) })
	select {
	case g.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (g *freezeGate) unlock() { <-g.sem }

// launchLocal is launch for a local process, recorded for Freeze.
func (k *Kernel) launchLocal(ctx context.Context, s launchSpec, spawn spawnFunc) (*proc, error) {
	if err := k.freeze.lock(ctx); err != nil {
		return nil, fmt.Errorf("kernel start: %w", err)
	}
	defer k.freeze.unlock()
	p, err := launch(ctx, k.opts, s, spawn, k.log)
	if err == nil {
		k.freeze.procs = append(slices.DeleteFunc(k.freeze.procs, (*proc).isExited), p)
	}
	return p, err
}

// Freeze stops every process of a sandboxed kernel — the kernel, what its cells started, all
// of its sandbox — until thaw is called, and keeps a new one from starting meanwhile: the
// host runs git on the worktree by path only while nothing in the sandbox can swap a file of
// it for a symlink to a host file. An unsandboxed kernel is not frozen (nothing contains it:
// it could read the host file itself). The thaw logs what it could not continue; call it
// once git is done, also on error paths (it is safe to call again).
func (k *Kernel) Freeze(ctx context.Context) (thaw func(), err error) {
	if err := k.freeze.lock(ctx); err != nil {
		return nil, fmt.Errorf("freeze kernel: %w", err)
	}
	var thaws []func() error
	release := func() {
		for _, t := range thaws {
			if err := t(); err != nil {
				k.log.Error("kernel: thaw after a freeze", "err", err)
			}
		}
		k.freeze.unlock()
	}
	for _, p := range k.freeze.procs {
		if p.sandboxInit <= 0 || p.isExited() {
			continue
		}
		t, err := sandbox.Freeze(ctx, p.budget, p.sandboxInit)
		if err != nil && !p.isExited() {
			release()
			return nil, fmt.Errorf("freeze kernel %d: %w", p.pid, err)
		}
		if t != nil {
			thaws = append(thaws, t)
		}
	}
	var once sync.Once
	return func() { once.Do(release) }, nil
}
