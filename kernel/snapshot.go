package kernel

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Default snapshot caps (Options.SnapshotMaxVar, SnapshotMaxTotal); a variable beyond them is
// skipped with the reason in the manifest.
const (
	MaxSnapshotVar   = 256 << 20
	MaxSnapshotTotal = 1 << 30
)

// Snapshot pickles the user namespace into dir (created 0700) and returns its manifest. Each
// variable is pickled on its own — pickle first, dill as the fallback — so unpicklable values
// are skipped with a reason rather than failing the snapshot. Files are replaced atomically.
// It runs as a silent cell, so it waits for the running cell to finish.
func (k *Kernel) Snapshot(ctx context.Context, dir string) (*Manifest, error) {
	select {
	case k.execSem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("snapshot: %w", ctx.Err())
	}
	k.snapping.Store(true)
	defer func() {
		k.snapping.Store(false)
		<-k.execSem
	}()
	return k.snapshotLocked(ctx, dir)
}

// snapshotLocked is Snapshot for a caller holding execSem.
func (k *Kernel) snapshotLocked(ctx context.Context, dir string) (*Manifest, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	code := fmt.Sprintf("__import__('arbor_snapshot').take(get_ipython(), %s, %d, %d)",
		strconv.Quote(abs), cap64(k.opts.SnapshotMaxVar, MaxSnapshotVar), cap64(k.opts.SnapshotMaxTotal, MaxSnapshotTotal))
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
	if auto, _ := filepath.Abs(k.opts.Snapshot); k.opts.Snapshot != "" && auto == abs {
		k.unsaved = false
		k.savedAt = time.Now()
	}
	return m, nil
}

// ExecuteHidden runs code the way the daemon's own bookkeeping must: after any running cell,
// without output to a caller, and without touching the execution count or history, so the
// cell numbers the model sees stay its own. An exception comes back as Status "error".
func (k *Kernel) ExecuteHidden(ctx context.Context, code string) (*Result, error) {
	select {
	case k.execSem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("execute: %w", ctx.Err())
	}
	defer func() { <-k.execSem }()
	res, err := k.executeSilent(ctx, code)
	if err != nil {
		return nil, fmt.Errorf("execute: %w", err)
	}
	k.markDirty() // it changed the namespace
	return res, nil
}

// executeSilent runs code without touching history or the execution count. The caller holds
// execSem.
func (k *Kernel) executeSilent(ctx context.Context, code string) (*Result, error) {
	p := k.current()
	if p == nil || p.isExited() || k.isClosed() {
		return nil, ErrDead
	}
	if err := k.finishAdopt(ctx); err != nil {
		return nil, err
	}
	h, box, err := p.ch.request(shellChan, "execute_request", silentRequest(code))
	if err != nil {
		return nil, err
	}
	defer p.ch.unregister(h.MsgID)
	st := &execState{res: &Result{}, max: -1}
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
	st.finish()
	return st.res, nil
}

// silentRequest is the content of an execute_request that leaves no trace in history, the
// execution count or iopub results.
func silentRequest(code string) map[string]any {
	return map[string]any{
		"code": code, "silent": true, "store_history": false,
		"user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": false,
	}
}

func cap64(v, def int64) int64 {
	if v <= 0 {
		return def
	}
	return v
}
