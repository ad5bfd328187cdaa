-- Mirror of server/protocol.go, the single source of the arbor/* protocol. Keep the names and
-- values identical to the Go constants: extensions/test/protocol-mirror.test.js checks that they agree.
local M = {}

-- Requests, client → daemon.
M.MethodSessionCreate = 'arbor/session.create'
M.MethodSessions = 'arbor/sessions'
M.MethodSessionGet = 'arbor/session.get'
M.MethodSessionAttach = 'arbor/session.attach'
M.MethodSessionDetach = 'arbor/session.detach'
M.MethodSessionLog = 'arbor/session.log'
M.MethodSessionSend = 'arbor/session.send'
M.MethodSessionStop = 'arbor/session.stop'
M.MethodSessionFork = 'arbor/session.fork'
M.MethodSessionDiff = 'arbor/session.diff'
M.MethodSessionFileAt = 'arbor/session.fileAt'
M.MethodSessionAccept = 'arbor/session.accept'
M.MethodSessionMerge = 'arbor/session.merge'
M.MethodSessionDiscard = 'arbor/session.discard'
M.MethodDaemonStatus = 'arbor/daemon.status'
M.MethodDaemonStop = 'arbor/daemon.stop'

-- Notifications, daemon → client.
M.NotifyEvent = 'arbor/event'
M.NotifySessionTree = 'arbor/sessionTree'
M.NotifyFellBehind = 'arbor/fellBehind'
M.NotifyShowDocument = 'arbor/showDocument'

-- Session states as they appear on the wire.
M.StateAdmitted = 'admitted'
M.StateRunning = 'running'
M.StateIdle = 'idle'
M.StateInactive = 'inactive'
M.StateStopped = 'stopped'
M.StateFailed = 'failed'

-- JSON-RPC error codes of arbor/* methods.
M.CodeUnknownSession = -32001
M.CodeNotRepository = -32002
M.CodeModelUnavailable = -32003
M.CodeConflict = -32004
M.CodeShuttingDown = -32005
M.CodeInvalidState = -32006

-- States in which a session can still be stopped.
M.live_states = {
  [M.StateAdmitted] = true,
  [M.StateRunning] = true,
  [M.StateIdle] = true,
  [M.StateInactive] = true,
}

return M
