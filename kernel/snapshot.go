package kernel

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Snapshot caps; a variable or total beyond them is skipped with the reason in the manifest.
const (
	MaxSnapshotVar   = 256 << 20
	MaxSnapshotTotal = 1 << 30
)

// Snapshot pickles the user namespace into dir (created 0700) and returns its manifest. Each
// variable is pickled on its own — pickle first, dill as the fallback — so unpicklable values
// are skipped with a reason rather than failing the snapshot. Files are replaced atomically.
// It runs as a silent cell, so it waits for the running cell to finish.
func (k *Kernel) Snapshot(ctx context.Context, dir string) (*Manifest, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	code := fmt.Sprintf("__import__('arbor_snapshot').take(get_ipython(), %s, %d, %d)",
		strconv.Quote(abs), MaxSnapshotVar, MaxSnapshotTotal)
	res, err := k.executeSilent(ctx, code)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	if res.Status != StatusOK {
		return nil, fmt.Errorf("snapshot: kernel said %s: %s", res.Status, res.Text)
	}
	m, err := readManifest(filepath.Join(abs, "manifest.json"))
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	k.mu.Lock()
	k.lastSnap = abs
	k.mu.Unlock()
	return m, nil
}

// executeSilent runs code without touching history or the execution count.
func (k *Kernel) executeSilent(ctx context.Context, code string) (*Result, error) {
	select {
	case k.execSem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-k.execSem }()
	p := k.current()
	if p.isExited() || k.isClosed() {
		return nil, ErrDead
	}
	h, box, err := p.ch.request(p.ch.shell, "execute_request", map[string]any{
		"code": code, "silent": true, "store_history": false,
		"user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": false,
	})
	if err != nil {
		return nil, err
	}
	defer p.ch.unregister(h.MsgID)
	st := &execState{res: &Result{}}
	for !st.finished() {
		select {
		case <-box.notify:
			st.handleAll(box.take())
		case <-p.exited:
			return nil, ErrDead
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return st.res, nil
}

// snapshotSource is the snapshot a restart restores: the last one taken, else the one the
// kernel started from.
func (k *Kernel) snapshotSource() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.lastSnap != "" {
		return k.lastSnap
	}
	return k.opts.Restore
}

// restart replaces old (which must be the current process) with a fresh one that restores the
// latest snapshot. The caller holds execSem.
func (k *Kernel) restart(ctx context.Context, old *proc) (*Manifest, error) {
	src := k.snapshotSource()
	if src != "" {
		if _, err := os.Stat(filepath.Join(src, "manifest.json")); err != nil {
			src = ""
		}
	}
	// Launch the replacement first would double memory; kill first. Mark the replacement
	// before the kill so the watcher does not report the kernel dead for good.
	k.mu.Lock()
	k.p = nil
	k.restored = nil
	k.mu.Unlock()
	old.kill()
	<-old.exited
	old.ch.close()
	old.sockCancel()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	p, err := k.launch(ctx, src)
	if err != nil {
		k.mu.Lock()
		k.p = old // dead: Execute reports ErrDead, Done closes
		k.mu.Unlock()
		k.markDone()
		return nil, fmt.Errorf("restart kernel: %w", err)
	}
	k.mu.Lock()
	k.p = p
	k.mu.Unlock()
	k.watch(p)
	return k.Restored(), nil
}
