// Package kernel runs persistent IPython kernels for Arbor sessions and speaks the Jupyter
// messaging protocol to them itself (github.com/go-zeromq/zmq4, HMAC-SHA256 on every message).
//
// Call [Start] with [Options] to launch a kernel, [Kernel.Execute] to run a cell, and
// [Kernel.Close] to stop it (shutdown_request, then SIGKILL of its process group — no orphans).
//
//	k, err := kernel.Start(ctx, kernel.Options{Dir: worktree, StateDir: stateDir, Host: h, Logger: log})
//	res, err := k.Execute(ctx, "1+1", kernel.ExecOptions{Timeout: time.Minute})
//	// res.Status "ok", res.Text "2\n"
//
// Each kernel is `python arbor_kernel.py conn.json`: the embedded launcher boots ipykernel's
// IPKernelApp, restores a namespace snapshot into the user namespace if asked (so restored
// values never shadow the runtime), installs the Arbor runtime (rlm, agent_message, harness,
// refine, goal, heartbeat, arbor_ping, ArborError) and serves. Connections use ipc:// sockets in
// the 0700 state directory when the path fits in sun_path, else loopback TCP.
//
// # Host bridge
//
// Python calls into the daemon (await rlm(...), harness.notes.create(...)) travel over a
// per-kernel Unix socket in StateDir (0600), authenticated by a random token passed in the
// kernel's environment (ARBOR_BRIDGE, ARBOR_BRIDGE_TOKEN), framed as newline-delimited JSON
// {"id","method","params"} → {"id","result"} | {"id","error":{"message"}}. The runtime opens one
// connection per event loop, lazily, and multiplexes concurrent asyncio tasks over it; the daemon
// side answers each request in its own goroutine and routes replies by id, so tasks that outlive
// their cell still get answers. Why not a Jupyter channel: a cell awaiting a host reply keeps
// shell busy (a shell reply would deadlock), comms on control need ipykernel 6.17 patched, and a
// Unix socket round trip (~0.06 ms) is ~40× faster than a control-channel comm.
//
// # Cells that will not stop, and dead kernels
//
// A cell past its timeout gets interrupt_request, then SIGINT to the kernel's process group,
// then a restart with the namespace restored from the latest [Kernel.Snapshot]; Result.Notice
// tells the model which. The kernel process is a child waited on by a goroutine, so a death is
// noticed within milliseconds: [Kernel.Done] closes and a cell in flight returns Status "died".
//
// Inherited environment variables that look like credentials (…API_KEY, …TOKEN, …SECRET) are
// not passed to kernels: model keys must never be readable by the model.
package kernel
