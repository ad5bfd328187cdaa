// Package kernel runs persistent IPython kernels for Arbor sessions and speaks the Jupyter
// messaging protocol to them itself (github.com/go-zeromq/zmq4, HMAC-SHA256 verified on every
// incoming message; bad ones are dropped and logged).
//
// In the daemon, make one [Manager] with [NewManager] and start each session's kernel with
// [Manager.Start]; it reaps kernels orphaned by a crashed daemon, forks kernels from a
// pre-imported template (≈ 0.15–0.2× a plain launch) or hands out a pre-warmed one, bounds
// concurrent boots, parks the least recently used idle kernels beyond MaxLive (snapshot, stop;
// the next cell revives them) and revives dead kernels on their next cell with the namespace
// restored. [Start] alone launches one plain kernel with nothing managed unless its Options ask.
//
//	m, err := kernel.NewManager(kernel.ManagerConfig{StateDir: dir, Fork: true, PoolSize: 1, Logger: log})
//	k, err := m.Start(ctx, kernel.Options{Dir: worktree, StateDir: sessionKernelDir, Host: h})
//	res, err := k.Execute(ctx, "1+1", kernel.ExecOptions{Timeout: time.Minute})
//	// res.Status "ok", res.Text "2\n"; res.Notice says what Arbor did (revived, restored …)
//	defer m.Close() // each kernel takes a final snapshot, then no process is left
//
// Each kernel is `python arbor_kernel.py conn.json` (or a fork of the fork server): the embedded
// launcher boots ipykernel's IPKernelApp, restores a namespace snapshot into the user namespace
// if asked (before the runtime, so restored values never shadow it), installs the Arbor runtime
// (rlm, agent_message, harness, arbor_ping, ArborError: only what works, listed once in the runtime's
// _SURFACE table) and serves. Channels use ipc:// sockets in the 0700 state directory when the
// path fits in sun_path, else loopback TCP. Kernels run in their own process group; Close kills
// the whole group.
//
// # Host bridge
//
// Python calls into the daemon (await rlm(...), agent_message.send(...)) travel over a
// per-kernel Unix socket in the kernel's run dir (0600; see below), authenticated by a random token passed in the
// kernel's environment (ARBOR_BRIDGE, ARBOR_BRIDGE_TOKEN), framed as newline-delimited JSON
// {"id","method","params"} → {"id","result"} | {"id","error":{"message"}}. The runtime opens one
// connection per event loop, lazily, and multiplexes concurrent asyncio tasks over it; the daemon
// side checks the method against a fixed table, answers each request in its own goroutine
// (context cancelled when the kernel closes) and routes replies by id, so tasks that outlive
// their cell still get answers. "ping" is answered by the bridge itself. Why not a Jupyter
// channel: a cell awaiting a host reply keeps shell busy (a shell reply would deadlock), comms
// on control need ipykernel 6.17 patched, and the socket round trip (≈ 0.06 ms) is ≈ 40×
// faster than a control-channel comm.
//
// # Kernels on a gateway
//
// With Options.Gateway the kernel is not a local process: it runs on a Jupyter Server or a
// Jupyter Enterprise Gateway (which runs kernels as Kubernetes pods or YARN containers),
// started with POST /api/kernels (the Gateway's KernelName) and driven over
// /api/kernels/{id}/channels, a WebSocket carrying Jupyter's JSON message format (a "channel"
// field on each message; binary frames when there are buffers), every request authenticated
// with Authorization: token. The transport is the only part that changes: beneath [Kernel]
// both kinds are a wire (shell and control requests out, messages routed to their request's
// mailbox by parent msg_id), so Execute, output streaming, snapshots, Ping and the rest run
// the same code. What a local kernel does with signals and its process, a gateway kernel does
// with REST: the ladder's second rung is POST …/interrupt, its last rung POST …/restart (the
// same kernel id, the namespace restored from the snapshot), Close is DELETE.
//
// A gateway's kernel is the stock kernel of its spec, so the runtime is booted into it by a
// silent cell that sends the runtime's modules as source, changes to Dir, restores the
// snapshot and installs the surface: nothing Arbor-specific is installed on the cluster. Dir,
// StateDir and the snapshot must be at the same paths there (shared-filesystem mode; DESIGN.md
// shows a Kubernetes example and designs the mode without one); a kernel that cannot use Dir
// fails its start saying so.
//
// The host bridge cannot be the Unix socket: the kernel is on another machine, and the
// cluster need not be able to reach the daemon at all. It is carried over the Jupyter
// connection the daemon already holds: the runtime sends each request as a comm_msg on iopub
// (the same {"id","method","params"} frame, on a comm id given at boot), and the daemon
// answers with comm_msg on the control channel, which the boot cell routes to the runtime
// (ipykernel serves control on its own thread while a cell runs; a reply on shell would wait
// behind the very cell that awaits it). Requests are checked against the same method table,
// at most 64 answered at once. No token is needed on top: only a client holding the gateway's
// token can reach the kernel's channels, and the session's identity comes from the kernel's
// owner, as with the socket. Jupyter Server rate-limits iopub (1,000 messages/s, 1 MB/s of
// stream output by default): a gateway for Arbor should raise iopub_data_rate_limit.
//
// A gateway kernel is dead when the gateway says so (a "dead" status, a "restarting" or a
// shutdown Arbor did not ask for, a 404 from GET /api/kernels/{id} polled every Gateway.Poll)
// or when its WebSocket drops and cannot be reconnected within Gateway.Reconnect; a drop that
// heals is invisible, since the server replays what it buffered for the session. A cell in
// flight then returns Status "died" with the reason; Revive starts a new kernel (deleting the
// dead one) at the next cell. A start fails with ErrGatewayUnreachable for a URL that does not
// answer, ErrGatewayAuth for a refused token (401/403, named), and an unknown kernel name with
// the gateway's list. The kernel id is recorded in StateDir, so the next start of a session
// whose daemon crashed deletes the kernel it left on the cluster. A Manager parks idle gateway
// kernels like local ones (snapshot, delete), freeing the cluster; it gives them no boot slot
// and counts them against no MaxLive, since they take no local memory.
//
// # Cells that will not stop, and dead kernels
//
// A cell past its timeout gets interrupt_request, then SIGINT, then a restart with the namespace
// restored from the latest snapshot; Result.Notice tells the model which. Stock ipykernel 6.17
// cannot interrupt a cell stuck in an await (its SIGINT handler schedules the cancellation on a
// loop callback that never runs); the runtime replaces that handler with one that cancels the
// cell's future thread-safely. The kernel process is watched by wait (or a pidfd for forked
// kernels), so a death is noticed within milliseconds: [Kernel.Done] closes and a cell in flight
// returns Status "died".
//
// # Snapshots
//
// [Kernel.Snapshot] pickles each user variable on its own (pickle first; dill for what pickle
// refuses or what refers to __main__), skipping unpicklable values with the reason in the
// [Manifest]. With Options.Snapshot set, kernels snapshot themselves after cells (debounced) and
// at Close. Files are written temp → fsync → rename → fsync dir, the manifest last.
//
// # Sandbox
//
// With Options.Sandbox "bwrap" the kernel runs under bubblewrap, built by package sandbox (new
// user, pid, ipc, uts, cgroup and — unless AllowNetwork — net namespaces, every capability
// dropped even for root, its own /proc; a default-deny view): the system and the Python
// environment (sys.prefix, sys.path, site dirs, even under $HOME) read-only; the worktree, the
// state dir's tmp (at /tmp), cache (XDG_CACHE_HOME) and snapshot writable, the state dir itself
// and SandboxReadOnlyFiles (the worktree's .git file) read-only; $HOME (but for SandboxHome),
// ~/.ssh, $XDG_RUNTIME_DIR and SandboxHide invisible; SandboxReadOnly readable inside them. The
// writable parts are opened beneath the state dir by descriptor, no symlink followed, and bound
// by descriptor: a cell that replaced one with a link gets a refusal, not a mount. The caller
// (agents) hides the user's tree, every workspace's sessions and the daemon's socket dir, and
// gives back the git common dir.
//
// A kernel's connection file (its HMAC key), ZMQ sockets, bridge socket and restore report are
// in a 0700 run dir of its own under Options.RuntimeDir ($XDG_RUNTIME_DIR/arbor-kernels, else
// /tmp/arbor-<uid>/kernels), short enough for sun_path and in no sandbox's view, so no cell
// reaches another kernel — sandboxed or not.
// Sandboxed kernels launch plainly — the fork server and the pool share one mount namespace —
// and talk over ipc:// sockets, since they may have no network. The kernel's own getpid() is a
// pid of its namespace: bwrap's --info-fd gives the host pid of the sandbox's init, whose child
// is the kernel that signals go to.
//
// [Kernel.Freeze] stops everything in a sandboxed kernel's sandbox until its thaw — while the
// host's git reads the worktree by path — and holds off a new launch meanwhile: the budget's
// cgroup is frozen where it can be (v2 cgroup.freeze; on v1, a cgroup the launch also joins
// in the freezer hierarchy), else every process of the sandbox's pid namespace gets SIGSTOP
// until a pass finds none running, and SIGCONT at thaw (sandbox.Freeze).
//
// # Budget
//
// Every kernel launched as a process gets Options.Limits (sandbox.DetectBudget says how they are
// enforced here): its own cgroups, which the launch joins before it execs bwrap or the kernel
// (a v1 cgroup through a /bin/sh that writes its pid and execs; a v2 one by CLONE_INTO_CGROUP),
// or, sandboxed, prlimit inside the sandbox setting RLIMIT_NPROC and RLIMIT_AS. The cgroups are
// removed once the process has exited, their counters read first: a cell during which a fork
// failed at pids.max, or a process was killed at the memory limit, gets a Result.Notice naming
// the limit and the setting to raise (limits.processes, limits.memory), and a death by the
// memory limit says so in its exit reason. Forked (unsandboxed, pooled) kernels are the fork
// server's children and share its budget: none.
//
// # Environment
//
// A kernel's environment is built from an allowlist (sandbox.AllowedEnv: PATH, HOME, locale,
// terminal, Python and toolchain variables), the names in Options.EnvPass (the user's
// "kernelEnv") and Options.Env, never a name in Options.EnvDeny (the variables holding model API
// keys, which agents passes) nor an inherited ARBOR_* variable; the bridge's ARBOR_BRIDGE and
// ARBOR_BRIDGE_TOKEN are added. A list of credential-looking patterns was the earlier rule; it
// let any key whose variable is named otherwise through. The fork server starts with the
// allowlist alone, since forked kernels keep its initial environment block.
package kernel
