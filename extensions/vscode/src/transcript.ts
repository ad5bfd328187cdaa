// Renders a session's events as a readable transcript. No vscode import (tested from Node).
import * as P from './protocol';
import { budgetText, checkText, spendText } from './goals';

/** Keeps one session's events in seq order, ignoring replays of seqs it already has. */
export class EventBuffer {
  private readonly events: P.Event[] = [];
  private last = -1;

  add(e: P.Event): boolean {
    if (e.seq <= this.last) return false;
    this.events.push(e);
    this.last = e.seq;
    return true;
  }

  get lastSeq(): number {
    return this.last;
  }

  list(): readonly P.Event[] {
    return this.events;
  }
}

/** The first n characters of an id or commit. */
function short(id: string | undefined, n = 8): string {
  return (id ?? '').slice(0, n);
}

/** A fenced block whose fence is longer than any backtick run inside the body. */
function fenced(body: string, lang = ''): string {
  const runs = body.match(/`{3,}/g) ?? [];
  const fence = '`'.repeat(Math.max(3, ...runs.map(r => r.length + 1)));
  return fence + lang + '\n' + body.replace(/\n$/, '') + '\n' + fence;
}

function tokens(u: P.TokenUsage | undefined): string {
  if (!u) return '';
  const cost = u.costUSD ? `, $${u.costUSD.toFixed(4)}` : '';
  return `_${u.inputTokens ?? 0} in / ${u.outputTokens ?? 0} out tokens${u.estimated ? ' (estimated)' : ''}${cost}_`;
}

function files(list: string[] | undefined): string {
  return (list ?? []).map(f => '`' + f + '`').join(', ') || 'no files';
}

/**
 * The markdown paragraphs of one event of a type this build knows. The switch covers every type
 * of the generated EventPayloads: a type added on the Go side is a compile error here.
 */
function body(e: P.TypedEvent): string[] {
  switch (e.type) {
    case P.EventSessionCreated: {
      const d = e.data;
      const facts: string[] = [];
      if (d.name) facts.push(`- name: ${d.name}`);
      if (d.model) facts.push(`- model: \`${d.model}\``);
      if (d.branch) facts.push(`- branch: \`${d.branch}\``);
      if (d.baseCommit) facts.push(`- base commit: \`${short(d.baseCommit, 12)}\``);
      if (d.parent) facts.push(`- subagent of \`${short(d.parent)}\``);
      if (d.forkOf) facts.push(`- fork of \`${short(d.forkOf)}\` at event ${d.forkSeq ?? 0}`);
      const out = [`**Task:** ${d.task ?? ''}`];
      if (facts.length) out.push(facts.join('\n'));
      if (d.selection) out.push('with the selection:', fenced(d.selection));
      return out;
    }
    case P.EventStateChanged:
      return [`→ **${e.data.state}**${e.data.reason ? ': ' + e.data.reason : ''}`];
    case P.EventTurnStarted:
      return [`— turn ${e.data.turn} —`];
    case P.EventMessageQueued: {
      const d = e.data;
      return [`queued from **${d.from || 'user'}** (${d.mode}): ${(d.text ?? '').split('\n')[0]}`];
    }
    case P.EventUserMessage: {
      const d = e.data;
      return [`**${d.from || 'user'}**${d.via ? ` (read from the ${d.via})` : ''}:`, d.text ?? ''];
    }
    case P.EventAssistantMessage: {
      const d = e.data;
      const out: string[] = [];
      if (d.text) out.push(d.text);
      for (const c of d.toolCalls ?? []) out.push(fenced(c.code ?? '', 'python'));
      if (out.length === 0) out.push('_(no text)_');
      const usage = tokens(d.usage);
      out.push(d.retries ? `${usage} _after ${d.retries} retries_` : usage);
      return out.filter(Boolean);
    }
    case P.EventModelRetry:
      return [`model call failed, retry ${e.data.retry}: ${e.data.error}`];
    case P.EventModelChanged:
      return [`model ${e.data.from || '?'} → ${e.data.model}`];
    case P.EventToolStarted:
      // The code is in the assistant_message just before; say only that it runs.
      return [`running cell \`${e.data.callId}\`…`];
    case P.EventToolOutput: {
      const d = e.data;
      return [fenced(d.text + (d.truncated ? '\n[the log keeps no more of this cell\'s streamed output]' : ''), d.stream === 'stderr' ? 'stderr' : '')];
    }
    case P.EventToolFinished: {
      const d = e.data;
      const meta = [d.executionCount ? `[${d.executionCount}]` : '', d.durationMs !== undefined ? `${d.durationMs} ms` : '']
        .filter(Boolean).join(', ');
      const out = [`**result (${d.status})**${meta ? ' ' + meta : ''}`];
      if (d.output) out.push(fenced(d.output));
      if (d.error) out.push(`**error:** ${d.error}`);
      if (d.artifact) out.push(`full output${d.bytes ? ` (${d.bytes} bytes)` : ''}: \`${d.artifact}\``);
      for (const r of d.rich ?? []) out.push(`rich output: \`${r}\``);
      return out;
    }
    case P.EventCheckpoint: {
      const d = e.data;
      return [`checkpoint \`${short(d.commit, 12)}\` after turn ${d.turn}${d.merged ? `, merging subagent \`${short(d.merged)}\`` : ''}`];
    }
    case P.EventTurnFailed: {
      const d = e.data;
      return [`**turn ${d.turn} failed:** ${d.error}` + (d.checkpoint ? ' (only its checkpoint: the turn\'s work is recorded)' : '')];
    }
    case P.EventInterrupted:
      return [`**turn ${e.data.turn} interrupted:** ${e.data.reason}`];
    case P.EventRecovered: {
      const d = e.data;
      return [d.worktree ? `recovered: worktree ${d.worktree}` : `recovered after a daemon restart (was ${d.previousState || 'unknown'})`];
    }
    case P.EventKernel: {
      const d = e.data;
      const out = [`kernel ${d.event}${d.pid ? ` (pid ${d.pid})` : ''}`];
      if (d.restored) out.push(`restored: ${d.restored}`);
      if (d.summary) out.push(`snapshot: ${d.summary}`);
      if (d.error) out.push(`**error:** ${d.error}`);
      return out;
    }
    case P.EventSubagentSpawned: {
      const d = e.data;
      return [`spawned subagent **${d.name || short(d.id)}** on \`${d.branch}\`: ${d.task}`, `- id: \`${d.id}\``];
    }
    case P.EventMessageSent: {
      const d = e.data;
      const to = (d.receipts ?? []).map(r => `${r.role} **${r.name || short(r.to)}** (${r.status})`).join(', ');
      return [`sent to ${to || 'nobody'}:`, d.text ?? ''];
    }
    case P.EventCompaction: {
      const d = e.data;
      const out = [`context compacted: ${d.compacted} messages summarised, ${d.kept} kept${d.forced ? ' (forced: the model refused the context)' : ''}`];
      if (d.summary) out.push(d.summary.split('\n').map(l => '> ' + l).join('\n'));
      if (d.liveVariables) out.push(`live variables: ${d.liveVariables}`);
      out.push(tokens(d.usage));
      return out.filter(Boolean);
    }
    case P.EventWorktreeSetup: {
      const d = e.data;
      if (!d.ok) return [`**worktree setup failed:** ${d.error ?? ''}`];
      const out = ['worktree prepared'];
      if (d.copied?.length) out.push(`- copied: ${files(d.copied)}`);
      if (d.linked?.length) out.push(`- linked: ${files(d.linked)}`);
      if (d.command) out.push(`- ran \`${d.command}\``);
      return out;
    }
    case P.EventForked: {
      const d = e.data;
      return [`forked from \`${short(d.source)}\` at event ${d.seq} (checkpoint \`${short(d.commit, 10)}\`, ${d.turns} turns)`];
    }
    case P.EventAccepted: {
      const d = e.data;
      return [`accepted onto \`${d.branch}\` as \`${short(d.commit, 10)}\` (${d.mode}): ${files(d.files)}`];
    }
    case P.EventMerged: {
      const d = e.data;
      return [`merged subagent \`${short(d.child)}\` (${d.branch}) as \`${short(d.commit, 10)}\`: ${files(d.files)}`];
    }
    case P.EventRejected: {
      const d = e.data;
      return [`**rejected by you**, reverted on the session's branch as \`${short(d.commit, 10)}\`: ${files(d.files)}${d.hunks?.length ? ' (hunks ' + d.hunks.join(', ') + ')' : ''}`];
    }
    case P.EventDiscarded: {
      const d = e.data;
      const where = d.archived ? `unmerged work kept at \`${d.archived}\`` : d.branchDeleted ? `branch \`${d.branch}\` deleted` : `branch \`${d.branch}\` kept`;
      return [`discarded${d.force ? ' (forced)' : ''}; ${where}${d.worktreeRemoved ? '' : '; the worktree was not removed'}`];
    }
    case P.EventHarnessProposed: {
      const d = e.data;
      const wait = d.policy === 'review' ? 'waiting for your review' : 'applied by policy unless refused';
      const out = [`harness proposal \`${d.proposal}\` (${d.author}, ${d.scope} scope, ${wait}): ${harnessEdits(d.edits)}`];
      if (d.rationale) out.push(`> ${d.rationale}`);
      if (d.intended) out.push(`intended effect: ${d.intended}`);
      return out;
    }
    case P.EventHarnessApplied: {
      const d = e.data;
      const what = d.proposal ? `harness proposal \`${d.proposal}\` applied` : `harness ${d.scope} scope changed`;
      const out = [`${what} by ${d.by} as \`${short(d.commit, 10)}\`: ${harnessEdits(d.edits)}`];
      if (d.observed) out.push(`observed: ${d.observed}`);
      return out;
    }
    case P.EventHarnessRejected: {
      const d = e.data;
      const what = d.proposal ? `harness proposal \`${d.proposal}\`` : 'harness change';
      const out = [`**${what} rejected** by ${d.by}: ${d.reason}`];
      if (d.gate?.output) out.push(fenced(d.gate.output, ''));
      return out;
    }
    case P.EventHarnessRolledBack: {
      const d = e.data;
      return [`harness ${d.scope} scope: ${d.kind} \`${d.id}\` rolled back to \`${short(d.to, 10)}\` as \`${short(d.commit, 10)}\``];
    }
    case P.EventRefined: {
      const d = e.data;
      if (d.error) return [`refine (${d.scope} scope, events ${d.fromSeq}–${d.toSeq}) made no proposal: ${d.error}`];
      return [`refine (${d.scope} scope, events ${d.fromSeq}–${d.toSeq}): ${(d.proposals ?? []).length} proposals ${(d.proposals ?? []).map(p => '`' + p + '`').join(', ')}`, tokens(d.usage)];
    }
    case P.EventGoalSet: {
      const d = e.data;
      const b = budgetText(d);
      let line = `◎ **goal** (set by ${d.by}): ${d.objective.split('\n')[0]}`;
      if (b) line += ` — budget ${b}`;
      if (d.until) line += `; done when \`${d.until}\` passes`;
      if (d.replaced) line += '; replaces the previous goal';
      return [line];
    }
    case P.EventGoalChanged: {
      const d = e.data;
      const out = [`◎ goal **${d.status.replace(/_/g, ' ')}**${d.reason ? ': ' + d.reason : ''} _[${d.turns} turns, ${spendText(d.spend)}]_`];
      if (d.claimed || d.verified) out.push(`claimed by the model: ${d.claimed ? 'yes' : 'no'}; verified: ${d.verified ? 'yes' : 'no'}`);
      if (d.evidence) out.push(`evidence: ${d.evidence}`);
      return out;
    }
    case P.EventGoalWait: {
      const d = e.data;
      if (d.reason === 'children') return [`◎ goal parked until its subagents report: ${(d.children ?? []).map(c => '`' + short(c) + '`').join(', ')}`];
      return [`◎ goal backs off ${Math.round((d.delayMs ?? 0) / 1000)}s after ${d.idleTurns ?? 0} turn(s) that changed nothing`];
    }
    case P.EventVerified: {
      const d = e.data;
      const mark = d.skipped ? '✓?' : d.passed ? '✓' : '✗';
      const out = [`${mark} end condition ${checkText(d)}${d.claimed ? ' (after the model claimed success)' : ''} _[${spendText(d.spend)}]_`];
      if (d.output && !d.passed) out.push(fenced(d.output));
      return out;
    }
    case P.EventWorktree: {
      const d = e.data;
      if (d.event === 'released') return [`worktree released to stay within the workspace's worktree bounds; its work is on the branch${d.commit ? ` (checkpoint \`${d.commit.slice(0, 10)}\`)` : ''} and it is checked out again at the next use`];
      return [`worktree checked out again from the branch (${d.durationMs ?? 0} ms)`];
    }
    case P.EventHeartbeatTick: {
      const d = e.data;
      const counted = d.count > 1 ? ` (counting ${d.count} due times)` : '';
      if (d.status === 'coalesced') return [`♡ heartbeat \`${d.id}\` run ${d.run}${counted} coalesced: the session was busy; ${d.pending} pending, delivered as one message when it is free`];
      if (d.status === 'stopped') return [`♡ heartbeat \`${d.id}\` run ${d.run}${counted} not delivered: the session is stopped, so it is no longer scheduled`];
      return [`♡ heartbeat \`${d.id}\` run ${d.run}${counted}: ${d.status} (${d.pending} pending)`];
    }
    default: {
      const unhandled: never = e;
      return unhandled;
    }
  }
}

// Every generated event type, once: a missing or unknown key is a compile error.
const known: Record<P.EventType, true> = {
  [P.EventSessionCreated]: true, [P.EventStateChanged]: true, [P.EventTurnStarted]: true,
  [P.EventMessageQueued]: true, [P.EventUserMessage]: true, [P.EventAssistantMessage]: true,
  [P.EventModelRetry]: true, [P.EventModelChanged]: true, [P.EventToolStarted]: true, [P.EventToolOutput]: true, [P.EventToolFinished]: true,
  [P.EventCheckpoint]: true, [P.EventTurnFailed]: true, [P.EventInterrupted]: true,
  [P.EventRecovered]: true, [P.EventKernel]: true, [P.EventSubagentSpawned]: true,
  [P.EventMessageSent]: true, [P.EventCompaction]: true, [P.EventWorktreeSetup]: true, [P.EventWorktree]: true,
  [P.EventForked]: true, [P.EventAccepted]: true, [P.EventMerged]: true, [P.EventRejected]: true, [P.EventDiscarded]: true,
  [P.EventHarnessProposed]: true, [P.EventHarnessApplied]: true, [P.EventHarnessRejected]: true,
  [P.EventHarnessRolledBack]: true, [P.EventRefined]: true,
  [P.EventGoalSet]: true, [P.EventGoalChanged]: true, [P.EventGoalWait]: true, [P.EventVerified]: true,
  [P.EventHeartbeatTick]: true,
};

function harnessEdits(edits: P.HarnessEdit[] | null | undefined): string {
  return (edits ?? []).map(x => `${x.op} ${x.kind} \`${x.id}\``).join(', ');
}

/** Whether this build renders events of type t itself (others show their data as it came). */
export function isKnownEvent(e: P.Event): e is P.TypedEvent {
  return Object.hasOwn(known, e.type) && typeof e.data === 'object' && e.data !== null;
}

/** Data of an event type from a newer daemon: a list of its fields, or its JSON. */
function raw(data: unknown): string[] {
  if (data === null || data === undefined || typeof data !== 'object') return data === undefined ? [] : [String(data)];
  const d = data as Record<string, unknown>;
  if (Object.keys(d).length === 0) return [];
  const flat = Object.values(d).every(v => v === null || typeof v !== 'object');
  return [flat ? Object.entries(d).map(([k, v]) => `- ${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`).join('\n')
    : fenced(JSON.stringify(d, null, 2), 'json')];
}

/** The Markdown paragraphs of one event, without its heading. */
export function eventBody(e: P.Event): string[] {
  return isKnownEvent(e) ? body(e) : raw(e.data);
}

/** Markdown for one event: a heading with its type, seq and time, then what it says. */
export function renderEvent(e: P.Event): string {
  const time = (e.ts ?? '').replace(/^.*T/, '').replace(/\.\d+/, '').replace('Z', '');
  const head = `### ${e.type} · #${e.seq}${time ? ' · ' + time : ''}`;
  return [head, ...(isKnownEvent(e) ? body(e) : raw(e.data))].join('\n\n');
}

/** The transcript document: a title, lines about the session, then every event. */
export function renderTranscript(title: string, events: readonly P.Event[], about: string[] = []): string {
  return [`# ${title}`, ...(about.length ? [about.join('\n')] : []), ...events.map(renderEvent)].join('\n\n') + '\n';
}
