// The client's picture of the daemon's session tree, fed by arbor/sessionTree and arbor/sessions.
// No vscode import: the protocol tests load it from plain Node.
import { DaemonStatusResult, Session, SessionTreeParams, Usage, StateRunning, StateAdmitted, StateIdle, StateInactive } from './protocol';
import { goalLabel } from './goals';

export class SessionStore {
  private readonly byId = new Map<string, Session>();
  private readonly listeners: Array<() => void> = [];

  /** Calls fn after every change. */
  onDidChange(fn: () => void): { dispose(): void } {
    this.listeners.push(fn);
    return { dispose: () => { const i = this.listeners.indexOf(fn); if (i >= 0) this.listeners.splice(i, 1); } };
  }

  /**
   * Applies an arbor/sessionTree notification: full replaces the list, otherwise upsert. A record
   * older than the one held (a lower lastSeq: a reply that was overtaken by a notification) never
   * replaces it, so a late answer cannot turn a stopped session back to idle.
   */
  apply(p: SessionTreeParams): void {
    const old = this.byId;
    const next = p.full ? new Map<string, Session>() : old;
    for (const s of p.sessions ?? []) {
      const held = old.get(s.id);
      next.set(s.id, held && (held.lastSeq ?? 0) > (s.lastSeq ?? 0) ? held : s);
    }
    if (p.full) { old.clear(); for (const [k, v] of next) old.set(k, v); }
    this.fire();
  }

  /** Replaces the list with an arbor/sessions result. */
  replace(sessions: Session[]): void {
    this.apply({ full: true, sessions });
  }

  upsert(s: Session): void {
    this.apply({ full: false, sessions: [s] });
  }

  get(id: string): Session | undefined {
    return this.byId.get(id);
  }

  all(): Session[] {
    return [...this.byId.values()];
  }

  /** Sessions without a known parent, oldest first. */
  roots(): Session[] {
    return this.sorted(this.all().filter(s => !s.parent || !this.byId.has(s.parent)));
  }

  children(id: string): Session[] {
    return this.sorted(this.all().filter(s => s.parent === id));
  }

  private sorted(list: Session[]): Session[] {
    return list.sort((a, b) => (a.created ?? '').localeCompare(b.created ?? '') || a.id.localeCompare(b.id));
  }

  private fire(): void {
    for (const fn of [...this.listeners]) fn();
  }
}

/** "12.3k" style token count of a usage record (input + output). */
export function formatTokens(u: Usage | undefined): string {
  const n = (u?.inputTokens ?? 0) + (u?.outputTokens ?? 0);
  if (n < 1000) return `${n}`;
  if (n < 1_000_000) return `${(n / 1000).toFixed(n < 10_000 ? 1 : 0)}k`;
  return `${(n / 1_000_000).toFixed(1)}M`;
}

/** The short title of a session: its name, else its task's first line, cut to fit a tree row. */
export function sessionTitle(s: Session, max = 60): string {
  const t = (s.name || s.task || s.id).split('\n')[0].trim();
  return t.length > max ? t.slice(0, max - 1) + '…' : t;
}

/** The description column of a tree row: state (or "discarded"), where a fork comes from, the goal's status, model, total tokens, branch. */
export function sessionDescription(s: Session): string {
  const parts: string[] = [s.discarded ? 'discarded' : s.state];
  const origin = sessionOrigin(s);
  if (origin) parts.push(origin);
  const wt = worktreeNote(s);
  if (wt) parts.push(wt);
  const goal = goalLabel(s.goal);
  if (goal) parts.push(goal);
  if (s.model) parts.push(s.model);
  parts.push(`${formatTokens(s.total ?? s.usage)} tok`);
  if (s.branch) parts.push(s.branch);
  return parts.join(' · ');
}

/** What a row says of a session's worktree when its files are not simply on disk, as `arbor ls` does. */
export function worktreeNote(s: Session): string | undefined {
  if (s.discarded) return undefined;
  if (s.worktreeReleased) return 'worktree released';
  if (s.worktreeQueued) return 'files queued';
  if (s.worktreeWriting) return 'writing files';
  return undefined;
}

/** Where a session came from when it is a fork: "fork of 8e6a9ede @20" (forked at event 20). */
export function sessionOrigin(s: Session): string | undefined {
  return s.forkOf ? `fork of ${s.forkOf.slice(0, 8)} @${s.forkSeq ?? 0}` : undefined;
}

/** Whether a session can take a child: it still holds a turn or may resume one, and is not discarded. */
export function canParent(s: Session): boolean {
  return (s.state === StateRunning || s.state === StateAdmitted || s.state === StateIdle || s.state === StateInactive) && !s.discarded;
}

/** The status bar's text: sessions running and waiting for a slot (admitted); finished ones are not counted. */
export function statusText(sessions: Session[]): string {
  const running = sessions.filter(s => s.state === StateRunning).length;
  const waiting = sessions.filter(s => s.state === StateAdmitted).length;
  if (!running && !waiting) return '$(type-hierarchy) Arbor: none running';
  const parts = [];
  if (running) parts.push(`${running} running`);
  if (waiting) parts.push(`${waiting} waiting`);
  return `$(sync~spin) Arbor: ${parts.join(', ')}`;
}

export function isBusy(s: Session): boolean {
  return s.state === StateRunning || s.state === StateAdmitted;
}

/** The warning to show when the daemon's kernels cannot be sandboxed here; undefined when they can. */
export function sandboxWarning(st: DaemonStatusResult): string | undefined {
  if (!st.sandbox || st.sandbox.available) return undefined;
  return `Arbor: kernels run unsandboxed — model-written code has your user's full access. ${st.sandbox.reason ?? ''}`.trim();
}
