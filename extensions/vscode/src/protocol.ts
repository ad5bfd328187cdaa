// Mirror of server/protocol.go, the single source of the arbor/* protocol. Keep the constant names
// and values identical to the Go ones: test/protocol-mirror.test.js checks that they agree.
// No vscode import here, so plain Node (the protocol tests) can load the compiled file.

// Requests, client → daemon.
export const MethodSessionCreate = 'arbor/session.create';
export const MethodSessions = 'arbor/sessions';
export const MethodSessionGet = 'arbor/session.get';
export const MethodSessionAttach = 'arbor/session.attach';
export const MethodSessionDetach = 'arbor/session.detach';
export const MethodSessionLog = 'arbor/session.log';
export const MethodSessionSend = 'arbor/session.send';
export const MethodSessionStop = 'arbor/session.stop';
export const MethodSessionFork = 'arbor/session.fork';
export const MethodSessionDiff = 'arbor/session.diff';
export const MethodSessionFileAt = 'arbor/session.fileAt';
export const MethodSessionAccept = 'arbor/session.accept';
export const MethodSessionMerge = 'arbor/session.merge';
export const MethodSessionDiscard = 'arbor/session.discard';
export const MethodDaemonStatus = 'arbor/daemon.status';
export const MethodDaemonStop = 'arbor/daemon.stop';

// Notifications, daemon → client.
export const NotifyEvent = 'arbor/event';
export const NotifySessionTree = 'arbor/sessionTree';
export const NotifyFellBehind = 'arbor/fellBehind';
export const NotifyShowDocument = 'arbor/showDocument';

// Session states as they appear on the wire.
export const StateAdmitted = 'admitted';
export const StateRunning = 'running';
export const StateIdle = 'idle';
export const StateInactive = 'inactive';
export const StateStopped = 'stopped';
export const StateFailed = 'failed';

export type SessionState =
  | typeof StateAdmitted | typeof StateRunning | typeof StateIdle
  | typeof StateInactive | typeof StateStopped | typeof StateFailed;

/** States in which a session still holds (or may resume) a turn: stop makes sense. */
export const liveStates: ReadonlySet<string> = new Set([StateAdmitted, StateRunning, StateIdle, StateInactive]);

// JSON-RPC error codes of arbor/* methods.
export const CodeUnknownSession = -32001;
export const CodeNotRepository = -32002;
export const CodeModelUnavailable = -32003;
export const CodeConflict = -32004;
export const CodeShuttingDown = -32005;
export const CodeInvalidState = -32006;

/** Accounting for one session (own) or a subtree (total). */
export interface Usage {
  modelCalls: number;
  inputTokens: number;
  outputTokens: number;
  costUSD: number;
  kernelExecs: number;
  messages: number;
  humanInterventions: number;
  retries: number;
  harnessEdits: number;
}

/** One session. usage is the session's own; total adds every descendant. */
export interface Session {
  id: string;
  parent?: string;
  name?: string;
  task: string;
  state: SessionState | string;
  error?: string;
  model: string;
  branch: string;
  worktree: string;
  baseCommit: string;
  workspace: string;
  created: string; // RFC 3339
  lastSeq: number;
  usage: Usage;
  total: Usage;
  children?: string[];
}

/** Editor context attached to a task: the text a user selected (lines 0-based, as in LSP). */
export interface Selection {
  uri: string;
  startLine: number;
  endLine: number;
  text: string;
}

export interface SessionCreateParams {
  task: string;
  dir: string;
  parent?: string;
  name?: string;
  model?: string;
  selection?: Selection;
}

/** Names one session by id (a unique prefix is accepted). */
export interface SessionRef { id: string; }

export interface SessionsParams { dir?: string; }
export interface SessionsResult { sessions: Session[]; }

export interface AttachParams { id: string; sinceSeq: number; }
export interface AttachResult { session: Session; }

export interface LogParams { id: string; sinceSeq: number; limit?: number; }
export interface LogResult { events: Event[]; }

/** One event-log record of a session; also the arbor/event notification. */
export interface Event {
  session: string;
  seq: number;
  ts: string;
  type: string;
  data: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

export type SendMode = 'auto' | 'steer' | 'follow_up';
export interface SendParams { id: string; text: string; mode?: SendMode; }
export interface SendResult { status: 'delivered' | 'queued' | string; }

export interface ForkParams { id: string; atSeq?: number; name?: string; }

export interface DiffParams { id: string; turn?: number; }

export interface Hunk {
  oldStart: number;
  oldLines: number;
  newStart: number;
  newLines: number;
  header?: string;
  lines: string[];
}

export interface FileDiff {
  path: string;
  oldPath?: string;
  status: 'added' | 'modified' | 'deleted' | 'renamed' | string;
  additions: number;
  deletions: number;
  binary?: boolean;
  hunks?: Hunk[];
}

export interface DiffResult {
  base: string;
  head: string;
  files: FileDiff[];
  patch: string;
}

export type Side = 'base' | 'head';
export interface FileAtParams { id: string; path: string; side: Side; }
export interface FileAtResult { content: string; missing?: boolean; }

export interface AcceptParams {
  id: string;
  files?: string[];
  hunks?: string[]; // "path#index"
  mode?: 'squash' | 'merge';
  /** The head of the diff the user reviewed: exactly that is accepted. */
  head?: string;
}
export interface AcceptResult { commit: string; files: string[]; }

export interface DiscardParams { id: string; force?: boolean; }
/** Where a discarded session's work went: its branch is deleted when another branch holds its
 * commits, else kept under archived (refs/arbor/archive/…) unless the discard was forced. */
export interface DiscardResult {
  session: Session;
  worktreeRemoved: boolean;
  branchDeleted: boolean;
  archived?: string;
}

export interface DaemonStatus {
  pid: number;
  version: string;
  socket: string;
  started: string;
  sessions: number;
  live: number;
  clients: number;
  workspaces: string[];
  /** The model settings the daemon started with from its environment and flags. */
  modelBaseURL?: string;
  model?: string;
  apiKeyEnv?: string;
}

/** arbor/sessionTree: full=true replaces the client's list, full=false upserts the sessions. */
export interface SessionTreeParams { full: boolean; sessions: Session[]; }
export interface FellBehindParams { session: string; lastSeq: number; }
export interface ShowDocumentParams { uri: string; startLine?: number; }
