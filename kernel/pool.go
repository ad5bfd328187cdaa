package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The pre-warmed pool: PoolSize kernels booted ahead of demand with a neutral cwd and no
// bridge. Handing one out adapts it to the session with one silent cell (cwd, environment,
// bridge address, optional restore), which costs a few milliseconds instead of a boot. The
// runtime reads the bridge address from the environment lazily, so setting it late works.

// poolOpts are the options pooled kernels boot with.
func (m *Manager) poolOpts(i int) Options {
	dir := filepath.Join(m.cfg.StateDir, "pool")
	return Options{
		Python:   m.cfg.Python,
		Dir:      dir,
		StateDir: filepath.Join(dir, "k"+strconv.Itoa(i)),
		Logger:   m.log,
	}
}

// fillPool keeps the pool at PoolSize until the manager closes.
func (m *Manager) fillPool() {
	defer m.poolWG.Done()
	for i := 0; ; i++ {
		select {
		case <-m.stopCtx.Done():
			return
		case <-m.poolWant:
		}
		for {
			m.mu.Lock()
			short := len(m.pool) < m.cfg.PoolSize
			m.mu.Unlock()
			if !short {
				break
			}
			o := m.poolOpts(i)
			i++
			if err := os.MkdirAll(o.Dir, 0o700); err != nil {
				m.log.Warn("kernel pool", "err", err)
				break
			}
			k, err := newKernel(o, m.spawner(o))
			if err == nil {
				k.mgr, k.forked = m, m.fork != nil
				if err = m.admit(m.stopCtx, k); err == nil {
					err = k.boot(m.stopCtx)
					m.bootDone()
				}
			}
			if err != nil {
				if m.stopCtx.Err() != nil {
					return
				}
				// A failed boot (a transient fork or resource error) pauses the pool until the
				// next kernel is wanted; it does not end it for the daemon's lifetime.
				m.log.Warn("kernel pool: boot failed; retrying when a kernel is next wanted", "err", err)
				break
			}
			m.mu.Lock()
			if m.closed {
				m.mu.Unlock()
				k.Close(context.Background())
				return
			}
			m.pool = append(m.pool, k)
			m.mu.Unlock()
		}
	}
}

func (m *Manager) wantPool() {
	if m.cfg.PoolSize <= 0 {
		return
	}
	select {
	case m.poolWant <- struct{}{}:
	default:
	}
}

// fromPool hands out a pooled kernel adapted to opts, or nil when the pool is empty or opts
// need a fresh process (a sandbox, another interpreter).
func (m *Manager) fromPool(ctx context.Context, opts Options) (*Kernel, error) {
	if m.cfg.PoolSize <= 0 || opts.Sandbox != "" || opts.Gateway != nil || !samePython(opts.Python, m.cfg.Python) {
		return nil, nil
	}
	var k *Kernel
	m.mu.Lock()
	for len(m.pool) > 0 && k == nil {
		k = m.pool[0]
		m.pool = m.pool[1:]
		if p := k.current(); p == nil || p.isExited() {
			go k.Close(context.Background())
			k = nil
		}
	}
	if k != nil {
		m.kernels[k] = struct{}{}
	}
	m.mu.Unlock()
	m.wantPool()
	if k == nil {
		return nil, nil
	}
	if err := k.adopt(ctx, opts); err != nil {
		k.Close(context.Background())
		m.remove(k)
		return nil, err
	}
	return k, nil
}

// adopt turns a pooled kernel into opts' kernel. Nobody else holds k yet.
func (k *Kernel) adopt(ctx context.Context, opts Options) error {
	opts.Python = k.opts.Python
	if err := opts.Validate(); err != nil {
		return err
	}
	for _, d := range []string{opts.StateDir, opts.Snapshot} {
		if d == "" {
			continue
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("adopt pooled kernel: %w", err)
		}
	}
	launcher, err := installRuntime(filepath.Join(opts.StateDir, "runtime"))
	if err != nil {
		return err
	}
	opts.runDir = k.opts.runDir
	k.mu.Lock()
	k.opts, k.launcher = opts, launcher
	k.mu.Unlock()
	if opts.Host != nil {
		if k.bridge, err = newBridge(k.opts.runDir, opts.Host, k.log); err != nil {
			return err
		}
	}
	env := map[string]string{}
	for _, kv := range k.env() {
		name, v, _ := strings.Cut(kv, "=")
		env[name] = v
	}
	envJSON, _ := json.Marshal(env)
	// The pooled kernel booted with the allowlist alone; a name the session denies goes too,
	// should a model's key sit in an allowed variable.
	denyJSON, _ := json.Marshal(append([]string{}, opts.EnvDeny...))
	code := fmt.Sprintf("import os as __o, json as __j\n__o.chdir(%s)\n__o.environ.update(__j.loads(%s))\n"+
		"[__o.environ.pop(__n, None) for __n in __j.loads(%s)]\ndel __o, __j",
		strconv.Quote(opts.Dir), strconv.Quote(string(envJSON)), strconv.Quote(string(denyJSON)))
	var report string
	if opts.Restore != "" {
		report = filepath.Join(k.opts.runDir, "restore-"+newID()[:8]+".json")
		code += fmt.Sprintf("\n__import__('arbor_snapshot').restore(get_ipython().user_ns, %s, %s)"+
			"\n__import__('arbor_runtime').boot(get_ipython())", strconv.Quote(opts.Restore), strconv.Quote(report))
	}
	if report == "" {
		// Nothing to wait for: send the adaptation and let the first cell (which the kernel
		// runs after it, in order) check its reply. Hand-out then costs no round trip.
		p := k.current()
		h, box, err := p.ch.request(shellChan, "execute_request", silentRequest(code))
		if err != nil {
			return fmt.Errorf("adopt pooled kernel: %w", err)
		}
		k.adopting = &pendingCell{p: p, h: h, box: box}
	} else {
		k.execSem <- struct{}{}
		res, err := k.executeSilent(ctx, code)
		<-k.execSem
		if err != nil {
			return fmt.Errorf("adopt pooled kernel: %w", err)
		}
		if res.Status != StatusOK {
			return fmt.Errorf("adopt pooled kernel: %s", res.Text)
		}
		m, err := readRestoreReport(report)
		if err != nil {
			k.log.Warn("kernel: restore report", "err", err)
		}
		k.mu.Lock()
		k.restored = m
		k.mu.Unlock()
	}
	k.mu.Lock()
	k.lastUse = time.Now()
	k.mu.Unlock()
	if opts.Snapshot != "" {
		k.loopWG.Add(1)
		go k.snapshotLoop()
	}
	return nil
}

// WaitPool waits until the pre-warmed pool is full (for benchmarks and tests).
func (m *Manager) WaitPool(ctx context.Context) error {
	if m.cfg.PoolSize <= 0 {
		return nil
	}
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		m.mu.Lock()
		n := len(m.pool)
		m.mu.Unlock()
		if n >= m.cfg.PoolSize {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the kernel pool: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// pendingCell is a silent cell sent without waiting for it.
type pendingCell struct {
	p   *proc
	h   header
	box *mailbox
}

// finishAdopt waits for the pooled kernel's adaptation cell, if one is outstanding. The
// caller holds execSem.
func (k *Kernel) finishAdopt(ctx context.Context) error {
	a := k.adopting
	if a == nil {
		return nil
	}
	k.adopting = nil
	defer a.p.ch.unregister(a.h.MsgID)
	st := &execState{res: &Result{}, max: -1}
	for !st.finished() {
		select {
		case <-a.box.notify:
			st.handleAll(a.box.take())
		case <-a.p.exited:
			return nil // the kernel died; its replacement is set up from k.opts
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	st.finish()
	if st.res.Status != StatusOK {
		return fmt.Errorf("adapt pooled kernel to the session: %s", st.res.Text)
	}
	return nil
}
