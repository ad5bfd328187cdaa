// The harness panel's words: tree rows for scopes, kinds, entries and versions, and the read-only
// documents of an entry and of one version (its diff with the commit's trailers). The daemon owns
// the harness (arbor/harness.*); this renders its answers. No vscode import (tested from Node).
import * as P from './protocol';

/** The kinds of entries, in the order the daemon lists them, with their plural names. */
export const kinds: ReadonlyArray<[string, string]> = [['note', 'Notes'], ['memory', 'Memories'], ['skill', 'Skills'], ['subagent', 'Subagents']];

function short(s: string | undefined, n = 8): string {
  return (s ?? '').slice(0, n);
}

function time(ts: string | undefined): string {
  return (ts ?? '').replace('T', ' ').replace(/\.\d+/, '').replace('Z', ' UTC');
}

/** Entries by kind, kinds in the daemon's order (an unknown kind last, under its own name). */
export function byKind(entries: readonly P.HarnessEntry[]): Array<{ kind: string; title: string; entries: P.HarnessEntry[] }> {
  const out: Array<{ kind: string; title: string; entries: P.HarnessEntry[] }> = [];
  const known = new Map(kinds);
  for (const [kind, title] of kinds) {
    const es = entries.filter(e => e.kind === kind);
    if (es.length) out.push({ kind, title, entries: es });
  }
  for (const kind of [...new Set(entries.map(e => e.kind))].filter(k => !known.has(k))) {
    out.push({ kind, title: kind, entries: entries.filter(e => e.kind === kind) });
  }
  return out;
}

/** Who made a change and why, from its trailers: "agent in 8e6a9ede, turn 3 (events 12, 14)". */
export function changeBy(c: P.HarnessChange | undefined): string {
  if (!c) return '';
  let s = c.author || 'unknown';
  if (c.session) s += ` in ${short(c.session)}${c.turn ? `, turn ${c.turn}` : ''}`;
  if (c.trigger?.length) s += ` (events ${c.trigger.join(', ')})`;
  return s;
}

/** The description column of a version row: its commit, who, when. */
export function versionDescription(v: P.HarnessVersion): string {
  return [short(v.commit, 10), changeBy(v.change), time(v.time)].filter(Boolean).join(' · ');
}

/** The commit's trailers, one "label: value" line each. */
export function trailers(v: P.HarnessVersion): Array<[string, string]> {
  const c = v.change ?? { author: '' };
  const out: Array<[string, string]> = [['commit', v.commit], ['subject', v.subject], ['time', time(v.time)], ['author', c.author || 'unknown']];
  if (c.session) out.push(['session', c.session + (c.turn ? ` (turn ${c.turn})` : '')]);
  if (c.trigger?.length) out.push(['trigger', `events ${c.trigger.join(', ')}`]);
  if (c.intended) out.push(['intended', c.intended]);
  if (c.observed) out.push(['observed', c.observed]);
  return out;
}

/** What a scope is, for its tree row. */
export function scopeLabel(scope: string, session?: string, title?: string): string {
  if (scope === 'session') return `Session: ${title ?? short(session)}`;
  return scope === 'global' ? 'Global' : 'Workspace';
}

/** The read-only document of one version: "# " lines (trailers, what the diff compares), then the diff. */
export function versionDocument(what: string, v: P.HarnessVersion, d: P.HarnessDiffResult, previous: string | undefined): string {
  const head = trailers(v).map(([k, val]) => `# ${(k + ':').padEnd(10)}${val.replace(/\n/g, '\n#           ')}`);
  head.unshift(`# ${what}: version ${short(v.commit, 10)}`);
  head.push(`# diff:     ${previous ? `${short(d.from || previous, 10)} (the version before)` : 'nothing (its first version)'} → ${short(d.to || v.commit, 10)}`);
  head.push('# rollback: Arbor: Roll Back Harness Entry (the version\'s context menu) restores this version as a new commit');
  const patch = d.patch ?? '';
  return head.join('\n') + '\n\n' + (patch.trim() ? patch.replace(/\n?$/, '\n') : '(no change to this entry in this version)\n');
}

/** The read-only document of an entry as it is now (Markdown). */
export function entryDocument(scope: string, e: P.HarnessEntry): string {
  const out = [`# ${e.title || e.id}`, '', `- ${e.kind} \`${e.id}\` in the ${scope} harness${e.version ? `, version \`${short(e.version, 10)}\`` : ''}`];
  if (e.spec) {
    out.push(`- subagent spec${e.spec.model ? `: model \`${e.spec.model}\`` : ''}${e.spec.maxTurnSteps ? `, at most ${e.spec.maxTurnSteps} steps a turn` : ''}`, '', e.spec.instructions);
  }
  if (e.body) out.push('', e.body);
  if (e.module) out.push('', '```python', e.module.replace(/\n$/, ''), '```');
  return out.join('\n') + '\n';
}
