// The cost–progress chart's data: a session tree's arbor/progress series merged on one time axis —
// what the subtree had spent (tokens, cost) against its verified progress (checkpoints and end
// condition or gate checks passed). No vscode import (tested from Node).
import * as P from './protocol';

/** Columns of the chart, aligned: x[i] is a time in seconds (uPlot's unit), the rest its values. */
export interface Series {
  x: number[];
  tokens: number[];
  cost: number[];
  checkpoints: number[];
  passed: number[];
  failed: number[];
}

export interface Chart {
  series: Series;
  summary: string;
  /** One row per point, newest first, for the table under the chart. */
  rows: Array<{ time: string; session: string; kind: string; status: string; detail: string; tokens: number; cost: string }>;
}

const isCheck = (k: string) => k === 'verified' || k === 'gate';

function fmtTokens(n: number): string {
  if (n < 1000) return `${n}`;
  if (n < 1_000_000) return `${(n / 1000).toFixed(n < 10_000 ? 1 : 0)}k`;
  return `${(n / 1_000_000).toFixed(1)}M`;
}

function duration(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 90) return `${s}s`;
  const m = Math.round(s / 60);
  return m < 90 ? `${m}m` : `${(m / 60).toFixed(1)}h`;
}

/**
 * Merges the series of a tree's sessions (root first). A point's spend is its session's
 * subtree's, so the tree's spend at a time is the largest spend any of its sessions had recorded
 * by then (the root's, once it has a point); progress counts every session's points.
 */
export function mergeProgress(results: ReadonlyArray<{ session: string; title: string; points: readonly P.ProgressPoint[] }>): Chart {
  const all = results.flatMap(r => (r.points ?? []).map(p => ({ ...p, who: r.title, at: Date.parse(p.time) })))
    .filter(p => Number.isFinite(p.at))
    .sort((a, b) => a.at - b.at || a.seq - b.seq);
  const s: Series = { x: [], tokens: [], cost: [], checkpoints: [], passed: [], failed: [] };
  let tokens = 0, cost = 0, checkpoints = 0, passed = 0, failed = 0;
  for (const p of all) {
    tokens = Math.max(tokens, p.spend?.tokens ?? 0);
    cost = Math.max(cost, p.spend?.costUSD ?? 0);
    if (p.kind === 'checkpoint') checkpoints++;
    if (isCheck(p.kind) && p.status === 'passed') passed++;
    if (isCheck(p.kind) && p.status === 'failed') failed++;
    const x = p.at / 1000;
    if (s.x.length && s.x[s.x.length - 1] === x) {
      // Two points at one instant: one column holding the later values.
      s.x.pop(); s.tokens.pop(); s.cost.pop(); s.checkpoints.pop(); s.passed.pop(); s.failed.pop();
    }
    s.x.push(x); s.tokens.push(tokens); s.cost.push(cost); s.checkpoints.push(checkpoints); s.passed.push(passed); s.failed.push(failed);
  }
  const span = all.length > 1 ? all[all.length - 1].at - all[0].at : 0;
  const summary = all.length === 0
    ? 'No progress points yet: checkpoints, goals and end-condition or gate checks appear here as they happen.'
    : `${checkpoints} checkpoint${checkpoints === 1 ? '' : 's'}, ${passed} check${passed === 1 ? '' : 's'} passed${failed ? `, ${failed} failed` : ''}`
      + ` · ${fmtTokens(tokens)} tokens · $${cost.toFixed(4)} · ${all.length} points over ${duration(span)}`
      + (results.length > 1 ? ` · ${results.length} sessions` : '');
  const rows = all.slice().reverse().slice(0, 200).map(p => ({
    time: p.time.replace(/^.*T/, '').replace(/\.\d+/, '').replace('Z', ''),
    session: p.who, kind: p.kind, status: p.status ?? '', detail: (p.detail ?? '').split('\n')[0],
    tokens: p.spend?.tokens ?? 0, cost: `$${(p.spend?.costUSD ?? 0).toFixed(4)}`,
  }));
  return { series: s, summary, rows };
}

/** A session and its descendants, root first (ids), from a child lookup. */
export function subtree(root: string, children: (id: string) => readonly string[]): string[] {
  const out: string[] = [];
  const seen = new Set<string>();
  const walk = (id: string) => {
    if (seen.has(id)) return;
    seen.add(id);
    out.push(id);
    for (const c of children(id)) walk(c);
  };
  walk(root);
  return out;
}

/** Event types after which a session's progress series may have grown. */
export const progressEvents: ReadonlySet<string> = new Set<string>([
  P.EventCheckpoint, P.EventGoalSet, P.EventGoalChanged, P.EventVerified, P.EventHarnessApplied, P.EventHarnessRejected,
]);
