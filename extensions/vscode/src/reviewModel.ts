// What the review and merge views show, as plain functions of the daemon's replies: hunk ids and
// where each hunk sits in the session's version of a file, the messages for refusals (a dirty
// user file, a stale review, a conflict), and where a discarded session's work went.
// No vscode import: the unit tests load it from plain Node.
import { CodeConflict, CodeInvalidState, DiffResult, DiscardResult, FileDiff, Hunk } from './protocol';

/** The id arbor/session.accept and .reject take for hunk i of path in the remaining diff. */
export function hunkId(path: string, index: number): string {
  return `${path}#${index}`;
}

export interface HunkLens {
  /** 0-based line in the session's (head) version of the file where the hunk starts. */
  line: number;
  id: string;
  /** "+3 −1" */
  summary: string;
}

/** One entry per hunk of a file, placed on the first line the hunk touches in the head version. */
export function hunkLenses(f: FileDiff): HunkLens[] {
  return (f.hunks ?? []).map((h, i) => ({ line: hunkLine(h), id: hunkId(f.path, i), summary: hunkSummary(h) }));
}

/**
 * The first changed line of a hunk in the head version (0-based): newStart (1-based) is where its
 * leading context starts. A pure deletion with no context (newLines 0) sits after line newStart.
 */
export function hunkLine(h: Hunk): number {
  if (h.newLines === 0) return Math.max(h.newStart, 0);
  let lead = 0;
  for (const l of h.lines) {
    if (!l.startsWith(' ')) break;
    lead++;
  }
  return Math.max(h.newStart - 1 + lead, 0);
}

export function hunkSummary(h: Hunk): string {
  let add = 0;
  let del = 0;
  for (const l of h.lines) {
    if (l.startsWith('+')) add++;
    else if (l.startsWith('-')) del++;
  }
  return `+${add} −${del}`;
}

/** The hunk of f whose lines in the head version hold line (0-based), else the nearest one above it. */
export function hunkAt(f: FileDiff, line: number): string | undefined {
  let best: string | undefined;
  for (const l of hunkLenses(f)) {
    if (l.line <= line) best = l.id;
  }
  return best ?? (f.hunks?.length ? hunkId(f.path, 0) : undefined);
}

/** A file of the diff by its path. */
export function fileOf(d: DiffResult | undefined, path: string): FileDiff | undefined {
  return d?.files?.find(f => f.path === path);
}

/** The one-line summary of a session's remaining diff. */
export function diffSummary(d: DiffResult): string {
  const files = d.files ?? [];
  const add = files.reduce((n, f) => n + f.additions, 0);
  const del = files.reduce((n, f) => n + f.deletions, 0);
  const from = d.accepted ? `since the accepted ${short(d.base)}` : `against ${short(d.base)}`;
  return `${files.length} file${files.length === 1 ? '' : 's'} +${add} −${del} ${from}`;
}

/** What a DiscardResult says happened to the work: the archive first (branchDeleted is true then too). */
export function discardOutcome(branch: string, res: DiscardResult | undefined): string {
  if (res?.archived) return `its unaccepted work is kept at ${res.archived} (branch ${branch} removed)`;
  if (res?.branchDeleted) return `branch ${branch} deleted`;
  return `branch ${branch} kept`;
}

/** The data of a CodeConflict refusal: what kind, into which branch, which files. */
export interface Conflict {
  kind: string;
  into: string;
  files: string[];
}

/** An error from a request, as vscode-languageclient's ResponseError carries it. */
export interface RpcError {
  code?: number;
  message?: string;
  data?: unknown;
}

/** The ConflictData of a CodeConflict refusal, when that is what err is. */
export function conflictOf(err: unknown): Conflict | undefined {
  const e = err as RpcError;
  if (e?.code !== CodeConflict) return undefined;
  const d = e.data as Partial<Conflict> | undefined;
  if (!d || !Array.isArray(d.files)) return undefined;
  return { kind: d.kind ?? 'conflict', into: d.into ?? '', files: d.files };
}

/**
 * Whether err is the refusal of a review that is out of date: the daemon says "diff again" (the
 * branch moved, part was accepted meanwhile, the merge-base moved), whatever the code it maps to.
 */
export function isStale(err: unknown): boolean {
  const e = err as RpcError;
  const msg = e?.message ?? '';
  return /diff again/i.test(msg) || (e?.code === CodeInvalidState && /out of date|moved on/i.test(msg));
}

/**
 * The message for a refused accept, reject or merge. The file names come first, so a toast cut
 * short still says which files; the daemon's own words follow.
 */
export function refusalMessage(action: string, err: unknown): string {
  const c = conflictOf(err);
  const msg = (err as RpcError)?.message ?? String(err);
  if (c && c.kind === 'dirty') {
    return `${action} refused: uncommitted changes in ${list(c.files)}${c.into ? ` on ${c.into}` : ''} would be overwritten — commit or stash them, then try again.`;
  }
  if (c) return `${action} stopped on conflicts in ${list(c.files)}${c.into ? ` (into ${c.into})` : ''}: resolve them in the Arbor Conflicts view, then Retry Merge.`;
  if (isStale(err)) return `${action} refused: the session's branch moved since this diff was shown; the diff is shown again — review it and try again.`;
  return `${action} failed: ${msg}`;
}

function list(files: string[]): string {
  return files.length ? files.join(', ') : '(no files named)';
}

function short(sha: string | undefined): string {
  return sha ? sha.slice(0, 8) : 'its base';
}

/** Whether a merge result still holds git's conflict markers (a line starting <<<<<<< or >>>>>>>, or a ======= line between them). */
export function hasMarkers(text: string): boolean {
  return /^<{7}( |$)/m.test(text) || /^>{7}( |$)/m.test(text);
}
