package kernel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// ManagerConfig configures a Manager.
type ManagerConfig struct {
	Python   string // interpreter for every kernel; "" means FindPython()
	StateDir string // the manager's own state: orphan registry, fork server, pool
	MaxLive  int    // kernel processes alive at once; beyond it idle ones are parked; 0 = 16
	MaxBoots int    // kernels starting at once (the boot semaphore); 0 = 2
	PoolSize int    // pre-warmed kernels kept ready (not counted in MaxLive); 0 = none
	Fork     bool   // start kernels by forking a pre-imported template (falls back to plain)
	// IdleAfter parks kernels unused for this long (snapshot, stop; revived on next use).
	// 0 = only park when MaxLive is reached.
	IdleAfter time.Duration
	Logger    *slog.Logger // nil discards
}

// Manager starts kernels, keeps at most MaxLive processes alive by parking the least recently
// used idle kernels (snapshot, then stop; revived with the namespace restored on next use),
// re-provisions dead kernels on next use, records every process for [ReapOrphans], and bounds
// concurrent boots.
//
// Use a Manager in the daemon; [Start] alone gives a kernel that nobody parks or revives
// unless its Options ask for it.
type Manager struct {
	cfg  ManagerConfig
	log  *slog.Logger
	boot chan struct{}
	fork *forkServer // nil when not forking

	stopCtx  context.Context // cancelled by Close
	stop     context.CancelFunc
	poolWant chan struct{}
	poolWG   sync.WaitGroup

	mu      sync.Mutex
	kernels map[*Kernel]struct{}
	pool    []*Kernel // booted, not yet handed out
	closed  bool
}

// NewManager reaps kernels orphaned by a previous daemon under cfg.StateDir and returns a
// manager. With cfg.Fork it starts the fork server; if that fails it logs why and launches
// kernels plainly.
func NewManager(cfg ManagerConfig) (*Manager, error) {
	if cfg.StateDir == "" || !filepath.IsAbs(cfg.StateDir) {
		return nil, fmt.Errorf("kernel manager: StateDir %q must be an absolute path", cfg.StateDir)
	}
	if cfg.MaxLive <= 0 {
		cfg.MaxLive = 16
	}
	if cfg.MaxBoots <= 0 {
		cfg.MaxBoots = 2
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var py string
	var err error
	if cfg.Python != "" {
		py, err = explicitPython(cfg.Python)
	} else {
		py, err = FindPython()
	}
	if err != nil {
		return nil, fmt.Errorf("kernel manager: %w", err)
	}
	cfg.Python = py
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("kernel manager: %w", err)
	}
	killed, err := ReapOrphans(cfg.StateDir)
	if err != nil {
		cfg.Logger.Warn("kernel manager: reaping orphans", "err", err)
	}
	if len(killed) > 0 {
		cfg.Logger.Info("kernel manager: killed orphan kernels", "pids", killed)
	}
	m := &Manager{cfg: cfg, log: cfg.Logger, boot: make(chan struct{}, cfg.MaxBoots),
		kernels: make(map[*Kernel]struct{}), poolWant: make(chan struct{}, 1)}
	m.stopCtx, m.stop = context.WithCancel(context.Background())
	if cfg.Fork {
		fs, err := startForkServer(cfg.Python, filepath.Join(cfg.StateDir, "forkserver"), cfg.PoolSize, m.log)
		if err != nil {
			m.log.Warn("kernel manager: fork server unavailable; launching kernels plainly", "err", err)
		} else {
			m.fork = fs
		}
	}
	if cfg.PoolSize > 0 {
		m.poolWG.Add(1)
		go m.fillPool()
		m.wantPool()
	}
	if cfg.IdleAfter > 0 {
		m.poolWG.Add(1)
		go m.parkIdle()
	}
	return m, nil
}

func (m *Manager) spawner(opts Options) spawnFunc {
	if m.forks(opts) {
		return m.fork.spawn
	}
	return spawnExec
}

// forks reports whether opts' kernel can come from the fork server (and the pool): only with
// the Manager's own interpreter and no sandbox. A project's kernelPython (a venv, say) gets a
// plain launch of that interpreter, so its packages are there.
func (m *Manager) forks(opts Options) bool {
	return m.fork != nil && opts.Sandbox == "" && opts.Gateway == nil && samePython(opts.Python, m.cfg.Python)
}

// samePython compares interpreters by the path they are run by, without resolving symlinks:
// a venv's python is a link to the base interpreter, yet it is another environment.
func samePython(a, b string) bool {
	if a == b {
		return true
	}
	pa, errA := exec.LookPath(a)
	pb, errB := exec.LookPath(b)
	return errA == nil && errB == nil && filepath.Clean(pa) == filepath.Clean(pb)
}

// Start starts a kernel for opts. The Manager fills in what opts leave empty: Python, Revive
// (always on), and Snapshot (<StateDir>/snapshot) so the kernel can be parked and revived.
// ctx bounds startup only.
func (m *Manager) Start(ctx context.Context, opts Options) (*Kernel, error) {
	if opts.Python == "" {
		opts.Python = m.cfg.Python
	}
	opts.Revive = true
	if opts.Snapshot == "" && opts.StateDir != "" {
		opts.Snapshot = filepath.Join(opts.StateDir, "snapshot")
	}
	if k, err := m.fromPool(ctx, opts); err != nil || k != nil {
		return k, err
	}
	k, err := newKernel(opts, m.spawner(opts))
	if err != nil {
		return nil, err
	}
	k.mgr, k.forked = m, m.forks(opts)
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, errors.New("kernel manager is closed")
	}
	m.kernels[k] = struct{}{}
	m.mu.Unlock()
	if opts.Gateway != nil {
		// A gateway kernel boots elsewhere and takes no local memory: no boot slot, no
		// parking to make room for it.
		if err := k.boot(ctx); err != nil {
			m.remove(k)
			return nil, err
		}
		return k, nil
	}
	if err := m.admit(ctx, k); err != nil {
		m.remove(k)
		return nil, err
	}
	err = k.boot(ctx)
	m.bootDone()
	if err != nil {
		m.remove(k)
		return nil, err
	}
	return k, nil
}

// admit takes a boot slot and makes room for one more live process by parking idle kernels.
// Call bootDone when the boot has finished.
func (m *Manager) admit(ctx context.Context, k *Kernel) error {
	select {
	case m.boot <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("wait for a kernel boot slot: %w", ctx.Err())
	}
	vs := m.victims(k)
	for i, v := range vs {
		if v.park(ctx) {
			break
		}
		if i == len(vs)-1 {
			m.log.Warn("kernel manager: over MaxLive, every live kernel is busy", "max", m.cfg.MaxLive)
		}
	}
	return nil
}

func (m *Manager) bootDone() { <-m.boot }

// victims lists live kernels other than k, least recently used first, when the live count is
// at the limit.
func (m *Manager) victims(k *Kernel) []*Kernel {
	m.mu.Lock()
	defer m.mu.Unlock()
	type cand struct {
		k   *Kernel
		use int64
	}
	var live []cand
	for o := range m.kernels {
		if o == k {
			continue
		}
		o.mu.Lock()
		if o.p != nil && !o.parked && !o.closed && !o.p.isExited() && o.opts.Gateway == nil {
			live = append(live, cand{o, o.lastUse.UnixNano()})
		}
		o.mu.Unlock()
	}
	if len(live) < m.cfg.MaxLive {
		return nil
	}
	sort.Slice(live, func(i, j int) bool { return live[i].use < live[j].use })
	out := make([]*Kernel, len(live))
	for i, c := range live {
		out[i] = c.k
	}
	return out
}

// parkIdle parks kernels idle for longer than IdleAfter, until the manager closes.
func (m *Manager) parkIdle() {
	defer m.poolWG.Done()
	every := max(m.cfg.IdleAfter/4, 10*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.stopCtx.Done():
			return
		case now := <-t.C:
			m.mu.Lock()
			var idle []*Kernel
			for k := range m.kernels {
				if k.idleFor(now) >= m.cfg.IdleAfter {
					idle = append(idle, k)
				}
			}
			m.mu.Unlock()
			for _, k := range idle {
				k.park(m.stopCtx)
			}
		}
	}
}

// Live returns the number of kernels with a running process (parked ones excluded).
func (m *Manager) Live() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for k := range m.kernels {
		k.mu.Lock()
		if k.p != nil && !k.parked && !k.p.isExited() {
			n++
		}
		k.mu.Unlock()
	}
	return n
}

func (m *Manager) record(p *proc) {
	if err := recordProc(m.cfg.StateDir, p.pid); err != nil {
		m.log.Warn("kernel manager: orphan registry", "err", err)
	}
}

func (m *Manager) forget(p *proc) { forgetProc(m.cfg.StateDir, p.pid) }

func (m *Manager) remove(k *Kernel) {
	m.mu.Lock()
	delete(m.kernels, k)
	m.mu.Unlock()
}

// Close closes every kernel (each takes its final snapshot) and the fork server.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.stop()
	m.poolWG.Wait()
	m.mu.Lock()
	ks := make([]*Kernel, 0, len(m.kernels)+len(m.pool))
	for k := range m.kernels {
		ks = append(ks, k)
	}
	ks = append(ks, m.pool...)
	m.pool = nil
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, k := range ks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k.Close(context.Background())
		}()
	}
	wg.Wait()
	if m.fork != nil {
		m.fork.close()
	}
	// Pooled kernels' state dirs hold only their runtime copy once they are gone.
	os.RemoveAll(filepath.Join(m.cfg.StateDir, "pool"))
	return nil
}
