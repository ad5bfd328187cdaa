package kernel

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// snapshotSource is the snapshot a new process restores: the last one taken, else the
// automatic snapshot dir, else the one the kernel started from — whichever has a manifest.
func (k *Kernel) snapshotSource() string {
	k.mu.Lock()
	cands := []string{k.lastSnap, k.opts.Snapshot, k.opts.Restore}
	k.mu.Unlock()
	for _, d := range cands {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "manifest.json")); err == nil {
			return d
		}
	}
	return ""
}

// replace stops old (if still running) and starts a new process that restores the latest
// snapshot. The caller holds execSem. On failure the kernel is dead: Done closes.
func (k *Kernel) replace(ctx context.Context, old *proc) (*Manifest, error) {
	src := k.snapshotSource()
	// Kill before launching: running both would double the memory of a large namespace.
	// Clearing k.p first tells the watcher this death is on purpose.
	k.mu.Lock()
	k.p = nil
	k.restored = nil
	k.mu.Unlock()
	if p := k.restartRemote(ctx, old, src); p != nil {
		return k.adoptProc(ctx, old, p)
	}
	if old != nil {
		// A dead gateway kernel may still be listed there (restarted empty by the gateway).
		if !old.isExited() || old.gw != nil {
			old.kill()
			<-old.exited
		}
		old.release()
	}
	if k.mgr != nil && k.opts.Gateway == nil { // a gateway kernel takes no local memory
		if err := k.mgr.admit(ctx, k); err != nil {
			k.failReplace(old)
			return nil, fmt.Errorf("restart kernel: %w", err)
		}
		defer k.mgr.bootDone()
	}
	ctx, cancel := context.WithTimeout(ctx, k.bootLimit())
	defer cancel()
	p, err := k.launch(ctx, src)
	if err != nil {
		k.failReplace(old)
		return nil, fmt.Errorf("restart kernel: %w", err)
	}
	return k.adoptProc(ctx, old, p)
}

// adoptProc installs p, the replacement of old, as the current process.
func (k *Kernel) adoptProc(ctx context.Context, old, p *proc) (*Manifest, error) {
	k.mu.Lock()
	if k.closed {
		// Close ran while this process booted: it must not outlive the kernel.
		k.p = old
		k.mu.Unlock()
		p.shutdown(ctx)
		return nil, fmt.Errorf("restart kernel: %w", ErrDead)
	}
	if isClosed(k.done) {
		k.done = make(chan struct{}) // a death was reported; this is a new life
	}
	k.mu.Unlock()
	k.setProc(p)
	if k.cells > 0 {
		// The new process counts from 1; the model's numbering goes on.
		code := fmt.Sprintf("get_ipython().execution_count = %d", k.cells+1)
		if res, err := k.executeSilent(ctx, code); err != nil || res.Status != StatusOK {
			k.log.Warn("kernel: continue cell numbers after a restart", "err", err)
		}
	}
	return k.Restored(), nil
}

func (k *Kernel) failReplace(old *proc) {
	k.mu.Lock()
	k.p = old
	closeOnce(k.done)
	k.mu.Unlock()
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// ensureRunning revives a dead or parked kernel before a cell, returning the notice for the
// model. The caller holds execSem.
func (k *Kernel) ensureRunning(ctx context.Context) (*proc, string, error) {
	k.mu.Lock()
	p, parked, closed := k.p, k.parked, k.closed
	k.lastUse = time.Now()
	k.mu.Unlock()
	if closed {
		return nil, "", ErrDead
	}
	if p != nil && !p.isExited() {
		return p, "", nil
	}
	if !parked && !k.opts.Revive {
		return nil, "", ErrDead
	}
	why := "This session's kernel had been stopped to free memory; Arbor started a new one."
	if !parked {
		why = fmt.Sprintf("The previous kernel process died (%s); Arbor started a new one.", exitReason(p))
	}
	m, err := k.replace(context.WithoutCancel(ctx), p)
	if err != nil {
		return nil, "", err
	}
	return k.current(), why + " " + k.restoreNotice(m), nil
}

// Park snapshots the namespace into Options.Snapshot and stops the process to free memory, if
// no cell is running; the next Execute starts a new process, restores the namespace and says so
// in Result.Notice. It reports whether the kernel was parked (false: busy, already parked,
// closed, no Snapshot dir, or the snapshot failed — the kernel then keeps running).
func (k *Kernel) Park(ctx context.Context) bool { return k.park(ctx) }

// Parked reports whether the kernel's process is stopped by Park.
func (k *Kernel) Parked() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.parked
}

// idleFor reports how long the kernel has been unused, or 0 if it has no live process.
func (k *Kernel) idleFor(now time.Time) time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.p == nil || k.parked || k.closed || k.p.isExited() {
		return 0
	}
	return now.Sub(k.lastUse)
}

// parkSnapshotTimeout bounds the snapshot taken before parking.
var parkSnapshotTimeout = 30 * time.Second

// park snapshots an idle kernel and stops its process, to make room under MaxLive; a later
// Execute revives it. It reports false when a cell runs or the snapshot fails.
func (k *Kernel) park(ctx context.Context) bool {
	select {
	case k.execSem <- struct{}{}:
	default:
		if !k.snapping.Load() {
			return false // a cell is running
		}
		// The automatic snapshot holds the kernel for a moment: wait for it, not skip.
		t := time.NewTimer(parkSnapshotTimeout)
		defer t.Stop()
		select {
		case k.execSem <- struct{}{}:
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	defer func() { <-k.execSem }()
	k.mu.Lock()
	p := k.p
	ok := p != nil && !k.closed && !k.parked && k.opts.Snapshot != ""
	k.mu.Unlock()
	if !ok || p.isExited() {
		return false
	}
	// Bounded: a cell abandoned by its caller may still run in the kernel (one that ignores
	// the interrupt), and the snapshot would queue behind it forever, holding a boot slot and
	// the Execute that wanted one.
	sctx, cancel := context.WithTimeout(ctx, parkSnapshotTimeout)
	defer cancel()
	if _, err := k.snapshotLocked(sctx, k.opts.Snapshot); err != nil {
		k.log.Warn("kernel: not parking: snapshot failed", "err", err)
		return false
	}
	k.mu.Lock()
	k.parked = true
	k.mu.Unlock()
	p.shutdown(ctx)
	k.log.Info("kernel: parked", "pid", p.pid)
	return true
}

// snapshotLoop takes the automatic snapshot once the kernel has been quiet for SnapshotDelay
// after a cell. It holds no lock while waiting, so cells are never delayed by the timer; a cell
// that starts before the timer fires flushes the snapshot itself (see Execute), so a long cell
// never leaves the previous cells' variables unsaved while it runs.
func (k *Kernel) snapshotLoop() {
	defer k.loopWG.Done()
	delay := k.opts.snapshotDelay()
	for {
		select {
		case <-k.stopCtx.Done():
			return
		case <-k.dirty:
		}
		t := time.NewTimer(delay)
		select {
		case <-k.stopCtx.Done():
			t.Stop()
			return // Close takes the final snapshot
		case <-t.C:
		}
		select {
		case k.execSem <- struct{}{}:
		case <-k.stopCtx.Done():
			return
		}
		if !k.unsaved {
			<-k.execSem // a cell flushed it meanwhile
			continue
		}
		k.snapping.Store(true)
		ctx, cancel := context.WithTimeout(k.stopCtx, time.Minute)
		_, err := k.snapshotLocked(ctx, k.opts.Snapshot)
		cancel()
		k.snapping.Store(false)
		<-k.execSem
		if err != nil {
			if k.stopCtx.Err() != nil {
				return
			}
			if !errors.Is(err, ErrDead) {
				k.log.Warn("kernel: automatic snapshot", "err", err)
			}
		}
	}
}

// flushSnapshot takes the automatic snapshot a previous cell left pending, before the next
// cell runs, when the last one is older than SnapshotFlushAge: if that cell runs for an hour
// and the daemon dies meanwhile, the variables of the cells before it are on disk, all but
// those of the cells of the last SnapshotFlushAge. A snapshot takes a kernel round trip and
// the pickling (milliseconds to seconds), so cells in quick succession do not each pay for
// one. The caller holds execSem.
func (k *Kernel) flushSnapshot(ctx context.Context) {
	if !k.unsaved || k.opts.Snapshot == "" {
		return
	}
	if !k.savedAt.IsZero() && time.Since(k.savedAt) < k.opts.snapshotFlushAge() {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := k.snapshotLocked(sctx, k.opts.Snapshot); err != nil && !errors.Is(err, ErrDead) {
		k.log.Warn("kernel: snapshot before the next cell", "err", err)
	}
}

// markDirty records that a cell ran; the caller holds execSem.
func (k *Kernel) markDirty() {
	if k.opts.Snapshot == "" {
		return
	}
	k.unsaved = true
	select {
	case k.dirty <- struct{}{}:
	default:
	}
}
