// The arbor/* protocol as the extension sees it: every shape and constant comes from
// protocol.gen.ts, which `go generate ./server` writes from the Go types; this file adds only what
// the client derives from them. No vscode import here, so plain Node (the tests) can load it.
import { SessionState, StateAdmitted, StateIdle, StateInactive, StateRunning } from './protocol.gen';

export * from './protocol.gen';

/** States in which a session still holds (or may resume) a turn: stop makes sense. */
export const liveStates: ReadonlySet<SessionState> = new Set<SessionState>([StateAdmitted, StateRunning, StateIdle, StateInactive]);

