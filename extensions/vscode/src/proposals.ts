// Harness proposals as the extension shows them: tree rows, the review document, what a decision
// or a /refine run came to. The daemon decides everything (policy, gate, apply); this renders its
// answers. No vscode import, so plain Node (the tests) can load it.
import * as P from './protocol';
import { eventBody } from './transcript';

/** The statuses arbor/refine.proposals knows (agents/harness: Pending, Applied, Rejected). */
export const Pending = 'pending';
export const Applied = 'applied';
export const Rejected = 'rejected';

/** Event types after which the list of pending proposals may have changed. */
const harnessEvents: ReadonlySet<string> = new Set<string>([
  P.EventHarnessProposed, P.EventHarnessApplied, P.EventHarnessRejected, P.EventHarnessRolledBack, P.EventRefined,
]);

export function isHarnessEvent(e: Pick<P.Event, 'type'>): boolean {
  return harnessEvents.has(e.type);
}

function short(s: string | undefined, n = 8): string {
  return (s ?? '').slice(0, n);
}

function edit(e: P.ProposalEdit): string {
  return `${e.op} ${e.kind} ${e.id}`;
}

/** What a proposal changes, for a tree row: "create note team-rule" (+ how many more edits). */
export function proposalLabel(p: P.Proposal): string {
  const es = p.edits ?? [];
  if (es.length === 0) return `${p.id} (no edits)`;
  return es.length === 1 ? edit(es[0]) : `${edit(es[0])} +${es.length - 1} more`;
}

/** The description column: id, scope, author (and the proposing session). */
export function proposalDescription(p: P.Proposal): string {
  const parts = [p.id, `${p.scope} scope`, p.session ? `${p.author} in ${short(p.session)}` : p.author];
  if (p.status !== Pending) parts.push(p.status);
  return parts.join(' · ');
}

/** The facts of a proposal, one "label: value" line each (tooltip and document header). */
export function proposalFacts(p: P.Proposal): Array<[string, string]> {
  const out: Array<[string, string]> = [
    ['proposal', `${p.id} (${p.status})`],
    ['scope', p.scope],
    ['author', p.session ? `${p.author} (session ${short(p.session)}${p.turn ? `, turn ${p.turn}` : ''})` : p.author],
    ['created', p.created],
  ];
  for (const e of p.edits ?? []) out.push(['edit', `${edit(e)}${e.title ? ` — ${e.title}` : ''}`]);
  if (p.trigger?.length) out.push(['trigger', `events ${p.trigger.join(', ')}`]);
  if (p.rationale) out.push(['why', p.rationale]);
  if (p.intended) out.push(['intended', p.intended]);
  if (p.reason) out.push(['reason', `${p.reason}${p.decidedBy ? ` (by ${decider(p.decidedBy)})` : ''}`]);
  if (p.observed && p.observed !== p.reason) out.push(['observed', p.observed]);
  for (const a of p.advice ?? []) out.push(['advice', a]);
  if (p.applied) out.push(['applied', `${short(p.applied, 12)}${p.decidedBy ? ` (by ${decider(p.decidedBy)})` : ''}`]);
  return out;
}

/** Who decided, in words. "gate" is what proposals decided before the branch check had its name. */
export function decider(by: string | undefined): string {
  if (by === 'branch-check' || by === 'gate') return 'the branch check';
  if (by === 'eval-gate') return 'the eval gate';
  return by ?? '';
}

/** Markdown with every character that markdown gives a meaning escaped. */
export function escapeMarkdown(s: string): string {
  return s.replace(/[\\`*_{}[\]()#+\-.!|<>]/g, c => '\\' + c);
}

/** The tooltip of a row (markdown): the rationale first, then the facts. */
export function proposalTooltip(p: P.Proposal): string {
  const lines = [`**${escapeMarkdown(proposalLabel(p))}**`, ''];
  if (p.rationale) lines.push(escapeMarkdown(p.rationale), '');
  for (const [k, v] of proposalFacts(p)) if (k !== 'why') lines.push(`- ${k}: ${escapeMarkdown(v)}`);
  return lines.join('\n');
}

/** What the diff of a proposal is, in words: a change against the scope at the time of proposing. */
export function diffBasis(p: P.Proposal): string {
  const from = p.base ? `the ${p.scope} harness at ${short(p.base, 12)} (its version when this was proposed)` : `an empty ${p.scope} harness`;
  return `git diff of the proposal's commit ${short(p.commit, 12)} against ${from}`;
}

/**
 * The read-only review document (language diff): a header of "# " lines saying what the
 * proposal is, what became of it and what the diff compares, then the daemon's diff verbatim.
 */
export function proposalDocument(p: P.Proposal, evidence: readonly P.Event[] = []): string {
  const head = proposalFacts(p).map(([k, v]) => `# ${(k + ':').padEnd(10)}${v.replace(/\n/g, '\n#           ')}`);
  if (evidence.length) head.push('# evidence: the events that prompted it', ...evidence.map(evidenceLine));
  if (p.gate) {
    const g = p.gate;
    const how = g.error ? `could not run: ${g.error}` : g.timedOut ? 'timed out' : g.passed ? 'passed' : `exited ${g.exitCode}`;
    head.push(`# gate:     \`${g.command}\` ${how} in ${(g.durationMs / 1000).toFixed(1)} s${g.commit ? ` on ${short(g.commit)}` : ''}`);
    const out = (g.output ?? '').replace(/\n$/, '');
    if (out) head.push('# gate output:', ...out.split('\n').map(l => `#   ${l}`));
  }
  head.push(`# diff:     ${diffBasis(p)}`);
  if (p.status === Pending) head.push('# review:   Accept / Reject above, or the Harness Proposals view\'s row actions');
  const diff = p.diff ?? '';
  return head.join('\n') + '\n\n' + (diff.trim() ? diff.replace(/\n?$/, '\n') : '(the daemon returned an empty diff)\n');
}

/** One event a proposal cites, as a "#" line: its seq, type and what it says, on one line. */
export function evidenceLine(e: P.Event): string {
  const all = eventBody(e).join(' ').replace(/\*\*|`/g, '').replace(/\s+/g, ' ').trim();
  const text = all.length > 160 ? all.slice(0, 159) + '…' : all;
  return `#   [${e.seq}] ${e.type}: ${text}`;
}

/** The events of a session's log that a proposal's trigger names (the log read from the first). */
export function triggerRange(p: P.Proposal): { sinceSeq: number; limit: number } | undefined {
  const t = p.trigger ?? [];
  if (!p.session || t.length === 0) return undefined;
  const lo = Math.min(...t), hi = Math.max(...t);
  return { sinceSeq: lo, limit: Math.min(hi - lo + 1, 2000) };
}

/** The status a proposal's review document shows in its first line ("# proposal: p1 (pending)"); its lenses read it. */
export function documentStatus(text: string): { id: string; status: string } | undefined {
  const m = /^# proposal: (\S+) \((\w+)\)/.exec(text);
  return m ? { id: m[1], status: m[2] } : undefined;
}

export interface Decision {
  /** warning when the user asked for an accept that did not apply. */
  severity: 'info' | 'warning';
  text: string;
}

/**
 * What an accept or reject came to. An accept is still judged by the scope's checks, so it may
 * come back rejected: then the branch check's or eval gate's reason (and what it observed) is the message.
 */
export function decisionMessage(p: P.Proposal, asked: 'accept' | 'reject'): Decision {
  const what = `${p.id} (${(p.edits ?? []).map(edit).join(', ') || 'no edits'})`;
  if (p.status === Applied) {
    const gate = p.observed ? ` Observed: ${p.observed}` : p.gate ? ` Branch check \`${p.gate.command}\` passed.` : '';
    return { severity: 'info', text: `Arbor: applied ${what} to the ${p.scope} harness as ${short(p.applied, 8)}.${gate}` };
  }
  if (p.status === Rejected) {
    const why = p.reason || 'no reason given';
    const by = p.decidedBy ? ` by ${decider(p.decidedBy)}` : '';
    const seen = p.observed && p.observed !== p.reason ? ` Observed: ${p.observed}` : '';
    // The daemon's reason for a gate failure is the gate's summary (its command and exit): only
    // a reason that does not say so gets the gate's exit added.
    const exit = p.gate && !p.gate.passed && !why.includes(p.gate.command)
      ? ` (branch check \`${p.gate.command}\` exited ${p.gate.exitCode}${p.gate.timedOut ? ', timed out' : ''})` : '';
    if (asked === 'accept') return { severity: 'warning', text: `Arbor: ${what} was not applied: rejected${by}: ${why}${exit}.${seen}` };
    return { severity: 'info', text: `Arbor: rejected ${what}: ${why}.` };
  }
  return { severity: 'warning', text: `Arbor: ${what} is still ${p.status}.` };
}

/** One line about a /refine run: the events it read, its model calls and tokens, its proposals. */
export function refineSummary(r: P.RefineRunResult): string {
  const calls = `${r.calls} model call${r.calls === 1 ? '' : 's'}, ${r.inputTokens}+${r.outputTokens} tokens`;
  const head = `Arbor: refine (${r.scope} scope, events ${r.fromSeq}–${r.toSeq}, ${calls})`;
  if (r.error) return `${head} made no proposal: ${r.error}`;
  const ps = r.proposals ?? [];
  if (ps.length === 0) return `${head} proposed no edits${r.summary ? `: ${r.summary}` : '.'}`;
  const list = ps.map(p => `${p.id} ${p.status}${p.status === Rejected && p.reason ? ` (${p.reason})` : ''}: ${proposalLabel(p)}`);
  return `${head}: ${ps.length} proposal${ps.length === 1 ? '' : 's'} — ${list.join('; ')}${r.summary ? `. ${r.summary}` : ''}`;
}

