// The live transcript's view model: turns a session's events into the operations the transcript
// webview (media/transcript.js) applies to its DOM — append an entry, stream a cell's output,
// end a cell. The webview only builds nodes from these; every word it shows is chosen here.
// No vscode import (tested from Node).
import * as P from './protocol';
import { eventBody, isKnownEvent } from './transcript';
import { sessionOrigin } from './sessions';

/** A link or button on an entry; the webview posts it back and the extension acts on it. */
export type Action =
  | { kind: 'open'; label: string; session: string }   // open that session's transcript
  | { kind: 'diff'; label: string; turn: number };      // this session's diff of one turn

/** Look of an entry: messages stand out, cells are boxes, bookkeeping is one quiet line. */
export type Style = 'user' | 'assistant' | 'cell' | 'turn' | 'checkpoint' | 'child' | 'alert' | 'quiet';

export interface Entry {
  seq: number;
  type: string;
  /** HH:MM:SS of the event (UTC, as the daemon records it). */
  time: string;
  style: Style;
  /** Bold label at the start of the entry ("you", "assistant", "cell", …). */
  label: string;
  /** Plain text (shown pre-wrapped; never parsed as HTML). */
  text?: string;
  /** A cell's code (collapsible). */
  code?: string;
  /** A cell's call id: tool_output and tool_finished with this id update this entry. */
  callId?: string;
  /** Collapsed extra lines (a compaction's summary, a failed check's output, …). */
  details?: string;
  /** A small note after the text (tokens and cost of a model call). */
  note?: string;
  actions?: Action[];
}

export type Op =
  | { op: 'entry'; entry: Entry }
  | { op: 'start'; callId: string; seq: number }
  | { op: 'output'; callId: string; seq: number; stream: string; text: string; truncated?: boolean }
  | { op: 'finish'; callId: string; seq: number; status: string; meta: string; output: string; error?: string; extra?: string };

/** ANSI escape sequences (colours in tracebacks) that a DOM text node would show as garbage. */
const ansi = /\x1b\[[0-9;?]*[ -\/]*[@-~]/g;

export function stripAnsi(s: string): string {
  return s.replace(ansi, '');
}

function time(ts: string | undefined): string {
  return (ts ?? '').replace(/^.*T/, '').replace(/\.\d+/, '').replace('Z', '');
}

function short(id: string | undefined, n = 8): string {
  return (id ?? '').slice(0, n);
}

/** Markdown of one paragraph of the Markdown transcript as plain text. */
export function plain(md: string): string {
  return md.replace(/^`{3,}\w*$\n?/gm, '').replace(/\n$/, '').replace(/\*\*([^*]+)\*\*/g, '$1').replace(/`([^`\n]*)`/g, '$1').replace(/(^|\s)_([^_\n]+)_(?=\s|$)/g, '$1$2');
}

function usageNote(u: P.TokenUsage | undefined, retries?: number): string {
  if (!u) return '';
  const cost = u.costUSD ? ` · $${u.costUSD.toFixed(4)}` : '';
  const r = retries ? ` · after ${retries} retries` : '';
  return `${u.inputTokens ?? 0} in / ${u.outputTokens ?? 0} out tokens${u.estimated ? ' (estimated)' : ''}${cost}${r}`;
}

/**
 * One session's transcript model. It remembers which cells it has shown, so that output and the
 * end of a cell go to the cell's entry; a cell it never saw (its assistant message came before
 * the events it was given) is created from tool_started's code.
 */
export class TranscriptModel {
  private readonly cells = new Set<string>();

  /** The ops that show event e. */
  ops(e: P.Event): Op[] {
    const base = { seq: e.seq, type: e.type, time: time(e.ts) };
    if (e.type === P.EventToolOutput) {
      const d = (e.data ?? {}) as Partial<P.ToolOutput>;
      const callId = d.callId ?? '';
      const out: Op[] = [];
      if (!this.cells.has(callId)) out.push(this.cell(base, callId, ''));
      out.push({ op: 'output', callId, seq: e.seq, stream: d.stream ?? 'stdout', text: stripAnsi(d.text ?? ''), truncated: d.truncated || undefined });
      return out;
    }
    if (!isKnownEvent(e)) {
      const text = eventBody(e).map(plain).join('\n');
      return [{ op: 'entry', entry: { ...base, style: 'quiet', label: e.type.replace(/_/g, ' '), text } }];
    }
    switch (e.type) {
      case P.EventUserMessage: {
        const d = e.data;
        const label = d.from && d.from !== 'user' && d.from !== 'task' ? d.from : d.from === 'task' ? 'task' : 'you';
        return [{ op: 'entry', entry: { ...base, style: 'user', label: label + (d.via ? ` (read from the ${d.via})` : ''), text: d.text ?? '' } }];
      }
      case P.EventAssistantMessage: {
        const d = e.data;
        const out: Op[] = [];
        const calls = d.toolCalls ?? [];
        if (d.text || calls.length === 0) {
          out.push({ op: 'entry', entry: { ...base, style: 'assistant', label: 'assistant', text: d.text || '(no text)', note: usageNote(d.usage, d.retries) } });
        }
        calls.forEach((c, i) => {
          const op = this.cell(base, c.id, c.code ?? '');
          if (i === 0 && !d.text) op.entry.note = usageNote(d.usage, d.retries);
          out.push(op);
        });
        return out;
      }
      case P.EventToolStarted: {
        const d = e.data;
        const out: Op[] = [];
        if (!this.cells.has(d.callId)) out.push(this.cell(base, d.callId, d.code ?? ''));
        out.push({ op: 'start', callId: d.callId, seq: e.seq });
        return out;
      }
      case P.EventToolFinished: {
        const d = e.data;
        const out: Op[] = [];
        if (!this.cells.has(d.callId)) out.push(this.cell(base, d.callId, ''));
        const meta = [d.executionCount ? `[${d.executionCount}]` : '', d.durationMs !== undefined ? formatMs(d.durationMs) : '']
          .filter(Boolean).join(' · ');
        const extra = [d.artifact ? `full output${d.bytes ? ` (${d.bytes} bytes)` : ''}: ${d.artifact}` : '', ...(d.rich ?? []).map(r => `rich output: ${r}`)]
          .filter(Boolean).join('\n');
        out.push({ op: 'finish', callId: d.callId, seq: e.seq, status: d.status, meta, output: stripAnsi(d.output ?? ''), error: d.error || undefined, extra: extra || undefined });
        return out;
      }
      case P.EventTurnStarted:
        return [{ op: 'entry', entry: { ...base, style: 'turn', label: `turn ${e.data.turn}` } }];
      case P.EventCheckpoint: {
        const d = e.data;
        const merged = d.merged ? `, merging subagent ${short(d.merged)}` : '';
        return [{ op: 'entry', entry: { ...base, style: 'checkpoint', label: 'checkpoint', text: `${short(d.commit, 12)} after turn ${d.turn}${merged}`,
          actions: [{ kind: 'diff', label: `diff of turn ${d.turn}`, turn: d.turn }] } }];
      }
      case P.EventSubagentSpawned: {
        const d = e.data;
        return [{ op: 'entry', entry: { ...base, style: 'child', label: 'subagent', text: `${d.name || short(d.id)} on ${d.branch}: ${d.task}`,
          actions: [{ kind: 'open', label: `open ${d.name || short(d.id)}`, session: d.id }] } }];
      }
      case P.EventSessionCreated: {
        const d = e.data;
        const actions: Action[] = [];
        if (d.parent) actions.push({ kind: 'open', label: `parent ${short(d.parent)}`, session: d.parent });
        if (d.forkOf) actions.push({ kind: 'open', label: `source ${short(d.forkOf)}`, session: d.forkOf });
        const facts = [d.model && `model ${d.model}`, d.branch && `branch ${d.branch}`, d.baseCommit && `base ${short(d.baseCommit, 12)}`,
          d.forkOf && `fork of ${short(d.forkOf)} @${d.forkSeq ?? 0}`].filter(Boolean).join(' · ');
        return [{ op: 'entry', entry: { ...base, style: 'quiet', label: 'session created', text: facts, details: d.selection ? `with the selection:\n${d.selection}` : undefined, actions } }];
      }
      case P.EventForked: {
        const d = e.data;
        return [{ op: 'entry', entry: { ...base, style: 'quiet', label: 'forked', text: `from ${short(d.source)} at event ${d.seq} (checkpoint ${short(d.commit, 10)}, ${d.turns} turns)`,
          actions: [{ kind: 'open', label: `source ${short(d.source)}`, session: d.source }] } }];
      }
      case P.EventMessageSent: {
        const d = e.data;
        const to = (d.receipts ?? []).map(r => `${r.role} ${r.name || short(r.to)} (${r.status})`).join(', ');
        return [{ op: 'entry', entry: { ...base, style: 'assistant', label: `sent to ${to || 'nobody'}`, text: d.text ?? '',
          actions: (d.receipts ?? []).map(r => ({ kind: 'open' as const, label: `open ${r.name || short(r.to)}`, session: r.to })) } }];
      }
      case P.EventTurnFailed:
      case P.EventInterrupted:
      case P.EventModelRetry:
        return [this.quiet(e, base, 'alert')];
      case P.EventModelChanged:
        return [this.quiet(e, base, 'quiet')];
      case P.EventStateChanged: {
        const d = e.data;
        const alert = d.state === P.StateFailed ? 'alert' : 'quiet';
        return [{ op: 'entry', entry: { ...base, style: alert, label: '→ ' + d.state, text: d.reason ?? '' } }];
      }
      default:
        return [this.quiet(e, base, 'quiet')];
    }
  }

  /** Ops for a list of events, in order. */
  all(events: readonly P.Event[]): Op[] {
    return events.flatMap(e => this.ops(e));
  }

  private cell(base: { seq: number; type: string; time: string }, callId: string, code: string): { op: 'entry'; entry: Entry } {
    this.cells.add(callId);
    return { op: 'entry', entry: { ...base, style: 'cell', label: 'cell', code, callId } };
  }

  /** Any other event: its first Markdown paragraph as one line, the rest collapsed. */
  private quiet(e: P.Event, base: { seq: number; type: string; time: string }, style: Style): Op {
    const [first = '', ...rest] = eventBody(e).map(plain);
    return { op: 'entry', entry: { ...base, style, label: e.type.replace(/_/g, ' '), text: first, details: rest.join('\n\n') || undefined } };
  }
}

export function formatMs(ms: number): string {
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;
}

/** Splits ops into batches of at most n, so a long history reaches the webview in pieces. */
export function batches<T>(ops: readonly T[], n = 400): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < ops.length; i += n) out.push(ops.slice(i, i + n));
  return out;
}

/** The about line of a session: state, branch, where it came from. */
export function aboutLine(s: P.Session | undefined): string {
  if (!s) return '';
  return [s.error ? `${s.state}: ${s.error}` : s.state, s.branch, sessionOrigin(s), s.model].filter(Boolean).join(' · ');
}

/** The document of one turn's diff: "# " lines saying what it compares, then the patch. */
export function turnDiffText(title: string, turn: number, d: P.DiffResult): string {
  const files = (d.files ?? []).map(f => `#   ${f.status.padEnd(8)} ${f.path}  +${f.additions} −${f.deletions}`);
  const head = [`# turn ${turn} of ${title}: ${(d.base ?? '').slice(0, 12)}..${(d.head ?? '').slice(0, 12)}`, ...(files.length ? files : ['#   (the turn changed no files)'])];
  return head.join('\n') + '\n\n' + (d.patch ?? '');
}

/** A typed event number: the seq, or what is wrong with it (1 ≤ seq ≤ last). */
export function parseSeq(v: string, last: number): number | string {
  const t = v.trim().replace(/^#/, '');
  if (!/^\d+$/.test(t)) return `"${v}" is not an event number: type the # an entry of the transcript shows`;
  const n = Number(t);
  if (n < 1 || (last > 0 && n > last)) return `event ${n} is not in the session: it has events 1–${last}`;
  return n;
}
