package kernel

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/arborhq/arbor/atomicfile"
	"github.com/arborhq/arbor/sandbox"
)

// remote is the gateway half of a proc whose kernel runs on a gateway.
type remote struct {
	c        *gatewayClient
	id       string // the gateway's kernel id
	ws       *wsChannels
	log      *slog.Logger
	killOnce sync.Once
}

// remoteRecord names the gateway kernel a Kernel's StateDir last started, so a daemon that
// crashed leaves no kernel running on the cluster once the session's kernel starts again: the
// gateway keeps a kernel whose client vanished (until it culls idle ones, if it does).
const remoteRecord = "gateway-kernel.json"

type remoteRef struct {
	URL string `json:"url"`
	ID  string `json:"id"`
}

func (k *Kernel) recordRemote(id string) {
	b, _ := json.Marshal(remoteRef{URL: k.opts.Gateway.URL, ID: id})
	if err := atomicfile.WriteFileNoSync(filepath.Join(k.opts.StateDir, remoteRecord), b, 0o600); err != nil {
		k.log.Warn("kernel gateway: record kernel id", "err", err)
	}
}

// deleteOrphan deletes the kernel recorded by a previous start that is not this Kernel's
// current one (a daemon crashed, or a delete failed while the gateway was away).
func (k *Kernel) deleteOrphan(ctx context.Context) {
	b, err := os.ReadFile(filepath.Join(k.opts.StateDir, remoteRecord))
	if err != nil {
		return
	}
	var ref remoteRef
	if json.Unmarshal(b, &ref) != nil || ref.ID == "" || ref.URL != k.opts.Gateway.URL {
		return
	}
	if p := k.current(); p != nil && p.gw != nil && p.gw.id == ref.ID && !p.isExited() {
		return
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := k.gwc.delete(dctx, ref.ID); err != nil {
		k.log.Warn("kernel gateway: delete the kernel a previous start left", "kernel", ref.ID, "err", err)
		return
	}
	k.log.Info("kernel gateway: deleted the kernel a previous start left", "kernel", ref.ID)
}

// errStoppedByArbor is the exit reason of a gateway kernel Arbor stopped itself.
var errStoppedByArbor = errors.New("stopped by Arbor")

// stop deletes the kernel on the gateway (once) and ends the proc.
func (r *remote) stop(p *proc) {
	r.killOnce.Do(func() {
		if r.ws != nil {
			r.ws.mu.Lock()
			r.ws.stopping = true
			r.ws.mu.Unlock()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for {
			err := r.c.delete(ctx, r.id)
			var se *statusError
			if err != nil && errors.As(err, &se) && se.code >= 500 && ctx.Err() == nil {
				// Jupyter Server answers 500 while it restarts a kernel that died: wait it out.
				time.Sleep(250 * time.Millisecond)
				continue
			}
			if err != nil {
				r.log.Warn("kernel gateway: delete kernel", "kernel", r.id, "err", err)
			}
			return
		}
	})
	p.end(errStoppedByArbor)
}

// end marks p exited with why, once (gateway kernels: there is no process to wait for).
func (p *proc) end(why error) {
	p.endOnce.Do(func() {
		p.waitErr = why
		close(p.exited)
	})
}

// interruptName is how the second rung of the ladder reaches the kernel, for notices.
func (p *proc) interruptName() string {
	if p.gw != nil {
		return "the gateway's interrupt (POST /api/kernels/{id}/interrupt)"
	}
	return "SIGINT to the kernel's process group"
}

// launchRemote starts a kernel on the gateway (or, with reuse, connects to kernel reuse
// after the gateway restarted it), connects its WebSocket, waits until it answers, and boots
// the runtime in it: the modules sent as source, the snapshot restored, the surface installed,
// host requests over comms.
func (k *Kernel) launchRemote(ctx context.Context, s launchSpec, reuse string) (*proc, error) {
	c := k.gwc
	id := reuse
	if id == "" {
		k.deleteOrphan(ctx)
		m, err := c.start(ctx, k.opts.Dir)
		if err != nil {
			return nil, err
		}
		id = m.ID
		k.recordRemote(id)
	}
	p := &proc{stderr: &tailBuffer{max: 16 << 10}, exited: make(chan struct{}), sockCancel: func() {}}
	p.gw = &remote{c: c, id: id, log: k.log}
	fail := func(err error) (*proc, error) {
		p.gw.stop(p)
		if p.ch != nil {
			p.ch.close()
		}
		return nil, err
	}
	var comm string
	var onBridge func(*wsChannels, bridgeRequest)
	if k.comm != nil {
		comm, onBridge = k.comm.id, k.comm.serve
	}
	w, err := dialKernel(ctx, c, id, p, k.log, comm, onBridge)
	if err != nil {
		return fail(fmt.Errorf("start kernel on the gateway: %w", err))
	}
	p.ch, p.gw.ws = w, w
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	go func() {
		select {
		case <-p.exited:
			cancel()
		case <-rctx.Done():
		}
	}()
	if err := p.ready(rctx); err != nil {
		if p.isExited() {
			err = fmt.Errorf("%w (%v)", err, p.waitErr)
		}
		return fail(fmt.Errorf("start kernel %s on the gateway: no kernel_info reply: %w", id, err))
	}
	res, err := silentOn(rctx, p, k.bootCode(s))
	if err != nil {
		return fail(fmt.Errorf("boot the Arbor runtime in gateway kernel %s: %w", id, err))
	}
	if res.Status != StatusOK {
		return fail(fmt.Errorf("boot the Arbor runtime in gateway kernel %s: %s", id, res.Text))
	}
	return p, nil
}

// bootCode is the silent cell that makes a gateway's stock kernel an Arbor kernel, as
// arbor_kernel.py does for a local one. The runtime travels as source, so it needs nothing
// installed on the cluster; the working directory must be the session's worktree, mounted at
// the same path (the shared-filesystem mode, see DESIGN.md).
func (k *Kernel) bootCode(s launchSpec) string {
	mods := map[string]string{}
	for _, name := range []string{"arbor_runtime", "arbor_snapshot"} {
		b, err := runtimeFS.ReadFile("runtime/" + name + ".py")
		if err != nil {
			panic(err) // embedded: cannot fail
		}
		mods[name] = base64.StdEncoding.EncodeToString(b)
	}
	env := map[string]string{"MPLBACKEND": "agg", "PYTHONUNBUFFERED": "1"}
	for _, kv := range sandbox.Filter(k.opts.Env, k.opts.EnvDeny) {
		if name, val, ok := cutEnv(kv); ok {
			env[name] = val
		}
	}
	mj, _ := json.Marshal(mods)
	ej, _ := json.Marshal(env)
	comm := ""
	if k.comm != nil {
		comm = k.comm.id
	}
	return fmt.Sprintf(`def __arbor_boot():
    import base64, json, os, sys, types
    for name, src in json.loads(base64.b64decode(%s)).items():
        m = types.ModuleType(name)
        m.__file__ = "<arbor " + name + ">"
        exec(compile(base64.b64decode(src).decode(), m.__file__, "exec"), m.__dict__)
        sys.modules[name] = m
    os.environ.update(json.loads(base64.b64decode(%s)))
    try:
        os.chdir(%s)
    except OSError as e:
        raise RuntimeError("the kernel on the gateway cannot use the session's worktree %%s (%%s): "
                           "its pods must mount the repository at the same path (see DESIGN.md, kernels on a gateway)" %% (%s, e)) from None
    if "" not in sys.path:
        sys.path.insert(0, "")
    ip = get_ipython()
    import arbor_runtime
    arbor_runtime.patch_kernel(ip.kernel)
    if %s:
        arbor_runtime.use_comm(ip.kernel, %s)
    if %s:
        os.environ["ARBOR_RESTORE_REPORT"] = %s
    arbor_runtime.boot(ip, %s)
__arbor_boot()
del __arbor_boot`,
		strconv.Quote(base64.StdEncoding.EncodeToString(mj)), strconv.Quote(base64.StdEncoding.EncodeToString(ej)),
		strconv.Quote(k.opts.Dir), strconv.Quote(k.opts.Dir),
		strconv.Quote(comm), strconv.Quote(comm),
		strconv.Quote(s.report), strconv.Quote(s.report), strconv.Quote(s.restore))
}

func cutEnv(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], i > 0
		}
	}
	return "", "", false
}

// silentOn runs a silent cell on p (not k's current process: p is still booting).
func silentOn(ctx context.Context, p *proc, code string) (*Result, error) {
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
			return nil, fmt.Errorf("%w (%v)", ErrDead, p.waitErr)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	st.finish()
	return st.res, nil
}

// restartRemote restarts old's kernel through the gateway's restart endpoint (the ladder's
// last rung for a gateway kernel, where a local one is killed) and boots the runtime in it
// again, restoring src. nil: the restart did not work; the caller deletes the kernel and
// starts a new one.
func (k *Kernel) restartRemote(ctx context.Context, old *proc, src string) *proc {
	if old == nil || old.gw == nil || old.isExited() || old.gw.ws == nil {
		return nil
	}
	w := old.gw.ws
	w.mu.Lock()
	w.restarting = true
	w.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, gatewayBootTimeout)
	defer cancel()
	if err := old.gw.c.restart(rctx, old.gw.id); err != nil {
		k.log.Warn("kernel gateway: restart failed; starting a new kernel", "kernel", old.gw.id, "err", err)
		return nil
	}
	// The old proc is retired without deleting the kernel: the new one drives the same id.
	old.gw.killOnce.Do(func() {})
	old.end(errors.New("restarted by Arbor through the gateway"))
	old.release()
	p, err := k.launchWith(rctx, src, old.gw.id)
	if err != nil {
		k.log.Warn("kernel gateway: reconnect after restart failed; starting a new kernel", "kernel", old.gw.id, "err", err)
		return nil
	}
	return p
}

// commBridge answers the host requests a gateway kernel's runtime sends over comms (see the
// package doc): the same methods, checks and bounds as the socket bridge.
type commBridge struct {
	id   string // the comm id the runtime uses
	host HostHandler
	log  *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	closed   bool
	wg       sync.WaitGroup
	inflight chan struct{}
}

func newCommBridge(host HostHandler, log *slog.Logger) *commBridge {
	ctx, cancel := context.WithCancel(context.Background())
	return &commBridge{id: "arbor-bridge-" + newID(), host: host, log: log, ctx: ctx, cancel: cancel,
		inflight: make(chan struct{}, maxBridgeInflight)}
}

// serve answers req in its own goroutine and sends the reply on w's control channel. It is
// called from w's reader, so it never blocks: past maxBridgeInflight requests it refuses.
func (b *commBridge) serve(w *wsChannels, req bridgeRequest) {
	reply := func(r bridgeReply) {
		data, err := json.Marshal(r)
		if err != nil {
			data, _ = json.Marshal(bridgeReply{ID: r.ID, Error: &bridgeError{Message: "encode result: " + err.Error()}})
		}
		content := map[string]any{"comm_id": b.id, "data": json.RawMessage(data)}
		if err := w.send(controlChan, newHeader(w.sessionID(), "comm_msg"), content); err != nil {
			b.log.Warn("kernel gateway bridge: send reply", "err", err)
		}
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	select {
	case b.inflight <- struct{}{}:
	default:
		b.mu.Unlock()
		go reply(bridgeReply{ID: req.ID, Error: &bridgeError{Message: fmt.Sprintf("the Arbor bridge is answering %d requests already; retry", maxBridgeInflight)}})
		return
	}
	b.wg.Add(1)
	b.mu.Unlock()
	go func() {
		defer func() { <-b.inflight; b.wg.Done() }()
		res, err := answerHost(b.ctx, b.host, req)
		if err != nil {
			reply(bridgeReply{ID: req.ID, Error: &bridgeError{Message: err.Error()}})
			return
		}
		if res == nil {
			res = json.RawMessage("null")
		}
		reply(bridgeReply{ID: req.ID, Result: res})
	}()
}

// close cancels in-flight requests and waits for them.
func (b *commBridge) close() {
	b.mu.Lock()
	b.closed = true
	b.cancel()
	b.mu.Unlock()
	b.wg.Wait()
}
