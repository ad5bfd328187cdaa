// Package acp is Arbor as an Agent Client Protocol agent: `arbor acp` speaks ACP
// (agentclientprotocol.com, protocol version 1, through github.com/coder/acp-go-sdk) on stdio to
// an editor — Zed, JetBrains IDEs, CodeCompanion, avante.nvim — and is a client of the same
// daemon as `arbor lsp`, which it starts when none runs. Every ACP session is a daemon
// session: a root session on its own branch and worktree that outlives the editor, that any
// later `arbor acp` lists, loads and forks.
//
// The package is a translator and holds no session logic (it sits beside the CLI in
// DESIGN.md's package table: cmd → acp → server). Requests become arbor/* calls:
//
//	session/new          arbor/session.create {open}: idle until the first prompt names it
//	session/prompt       arbor/session.send, then the session's events until its turn settles
//	session/cancel       arbor/session.interrupt: the turn stops, the session stays
//	session/load         arbor/session.attach from seq 1: the history replayed as updates
//	session/resume       arbor/session.attach from the next seq: no replay
//	session/list         arbor/sessions of the cwd's repository
//	session/fork         arbor/session.fork, at _meta.arbor.atSeq (any event) or the latest
//	session/set_model    arbor/session.setModel (arbor/models lists the choices)
//	session/set_mode     the review policy below, kept per session in the state directory
//
// Events become session/update notifications: assistant text as agent_message_chunk, each
// Python cell as a tool_call (its code the content) with tool_call_updates carrying its
// streamed output (tool_output events) and its end state, the session's children as plan
// entries whose status follows their state, and every update's _meta.arbor naming the
// session and the event's seq (a fork point), with the session tree — state, branch, own and
// total usage of every subagent — on plan updates and on the prompt's response.
//
// Modes are what may leave the session's branch: "review" (the default) asks with
// session/request_permission, showing the diff, before a turn's change is accepted onto the
// user's branch; "branch" never asks and leaves the change on the session branch for
// `arbor accept` or an editor; "apply" accepts without asking. An accepted change is written
// through the client's fs/write_text_file when it offers it, so open buffers update and the
// change lands in their undo history.
//
// A slow client never holds up the daemon: updates go out through an outbox that merges what
// supersedes itself (a tool call's later update replaces its earlier one, text chunks
// concatenate, a plan replaces the plan), so what waits is bounded by the number of cells in
// flight, not by how much they print, while the daemon already bounds a cell's output
// events (at most one per stream per 100 ms).
package acp
