// Goals as the extension shows them: the --budget grammar of `arbor goal` (checked before the
// request goes out), a goal's one-word status for the tree, its full account, and the
// cost–progress series as a table. No vscode import (tested from Node).
import * as P from './protocol';

/** The budget fields of arbor/goal.set. */
export type Budget = Pick<P.GoalSetParams, 'tokenBudget' | 'turnBudget' | 'wallBudget' | 'costBudget'>;

const unitMs: Record<string, number> = { ns: 1e-6, us: 1e-3, 'µs': 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** The milliseconds of a Go duration ("2h", "1h30m", "90s"); undefined when it is none. */
export function parseDuration(s: string): number | undefined {
  if (!/^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/.test(s)) return undefined;
  let ms = 0;
  for (const m of s.matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g)) ms += Number(m[1]) * unitMs[m[2]];
  return ms;
}

/**
 * Reads "tokens=N,turns=N,wall=2h,cost=5" (the CLI's --budget) into goal.set's fields; an empty
 * string is no budget. Throws an Error naming the bad item and what it wants instead.
 */
export function parseBudget(s: string): Budget {
  const out: Budget = {};
  if (s.trim() === '') return out;
  s.split(',').forEach((item, i) => {
    const bad = (want: string) => new Error(`budget item ${i + 1} "${item.trim()}": ${want}`);
    const eq = item.indexOf('=');
    if (eq < 0) throw bad('want KEY=VALUE with KEY tokens, turns, wall or cost');
    const k = item.slice(0, eq).trim();
    const v = item.slice(eq + 1).trim();
    switch (k) {
      case 'tokens':
      case 'turns': {
        if (!/^\d+$/.test(v) || Number(v) <= 0) throw bad(`want a whole number of ${k} above zero`);
        if (k === 'tokens') out.tokenBudget = Number(v); else out.turnBudget = Number(v);
        break;
      }
      case 'wall': {
        const ms = parseDuration(v);
        if (ms === undefined || ms <= 0) throw bad('want a duration above zero such as 2h or 90m');
        out.wallBudget = v;
        break;
      }
      case 'cost': {
        const c = v.replace(/^\$/, '');
        if (!/^\d+(\.\d*)?$|^\.\d+$/.test(c) || Number(c) <= 0) throw bad('want an amount of USD above zero such as 5 or 0.50');
        out.costBudget = Number(c);
        break;
      }
      default:
        throw bad('unknown budget; want tokens, turns, wall or cost');
    }
  });
  return out;
}

/** Whether a goal still holds the session (a new one must replace it). */
export function goalHolds(g: { status: string } | undefined | null): boolean {
  return g?.status === 'active' || g?.status === 'paused';
}

/** The tree's word for a session's goal: "goal active", "goal parked on children", "goal stalled"… */
export function goalLabel(g: P.GoalBrief | undefined): string | undefined {
  if (!g) return undefined;
  if (g.status === 'active' && g.waiting === 'children') return 'goal parked on children';
  if (g.status === 'active' && g.waiting === 'backoff') return 'goal backing off';
  if (g.status === 'active' && g.waiting) return `goal waiting on ${g.waiting === 'message' ? 'a reply' : g.waiting}`;
  return `goal ${g.status.replace(/_/g, ' ')}`;
}

function duration(ms: number): string {
  const h = Math.floor(ms / 3_600_000), m = Math.floor(ms / 60_000) % 60, s = Math.round(ms / 1000) % 60;
  return [h ? `${h}h` : '', m ? `${m}m` : '', s || (!h && !m) ? `${s}s` : ''].join('');
}

/** A goal's budgets, "50000 tokens, 20 turns, 2h, $5.00"; "" when it has none. */
export function budgetText(g: { tokenBudget?: number; turnBudget?: number; wallBudgetMs?: number; costBudget?: number }): string {
  const parts: string[] = [];
  if (g.tokenBudget) parts.push(`${g.tokenBudget} tokens`);
  if (g.turnBudget) parts.push(`${g.turnBudget} turns`);
  if (g.wallBudgetMs) parts.push(duration(g.wallBudgetMs));
  if (g.costBudget) parts.push(`$${g.costBudget.toFixed(2)}`);
  return parts.join(', ');
}

export function spendText(sp: P.Spend | undefined): string {
  return `${sp?.tokens ?? 0} tokens, $${(sp?.costUSD ?? 0).toFixed(4)}, ${sp?.modelCalls ?? 0} model calls`;
}

/** One line for an end-condition check. */
export function checkText(v: P.Verified): string {
  if (v.skipped) return `\`${v.command}\` not run again: the worktree is unchanged since it failed`;
  if (v.passed) return `\`${v.command}\` passed (${v.durationMs} ms)${v.commit ? ` on \`${v.commit.slice(0, 10)}\`` : ''}`;
  if (v.error) return `\`${v.command}\`: ${v.error}`;
  return `\`${v.command}\` failed (exit ${v.exitCode}${v.timedOut ? ', timed out' : ''}, ${v.durationMs} ms)`;
}

/** The markdown account of a goal: status and why, budgets, spending, claimed vs verified, checks. */
export function renderGoal(title: string, g: P.Goal | undefined): string {
  if (!g) return `# Goal of ${title}\n\nNo goal. Set one with **Arbor: Set Goal…**.\n`;
  const status = g.status.replace(/_/g, ' ') + (g.waiting ? ` (waiting on ${g.waiting})` : '');
  const rows = [
    `- **objective:** ${g.objective}`,
    `- **status:** ${status}${g.limit ? ` — the ${g.limit} budget` : ''}`,
  ];
  if (g.reason) rows.push(`- **why:** ${g.reason}`);
  rows.push(`- **budget:** ${budgetText(g) || 'none (no limit)'}`);
  rows.push(`- **spent:** ${g.turns} turns, ${spendText(g.spent)} (the whole subtree since ${g.set})`);
  if (g.until) rows.push(`- **end condition:** \`${g.until}\` (${g.checks ?? 0} checks)`);
  rows.push(`- **claimed by the model:** ${g.claimed ? 'yes' : 'no'}; **verified:** ${g.until ? (g.verified ? 'yes' : 'no') : 'no end condition'}`);
  if (g.evidence) rows.push(`- **evidence:** ${g.evidence}`);
  if (g.lastCheck) rows.push(`- **last check:** ${checkText(g.lastCheck)}`);
  rows.push(`- set by ${g.by}`);
  const out = [`# Goal of ${title}`, rows.join('\n')];
  if (g.lastCheck?.output) out.push('Output of the last check:', '```\n' + g.lastCheck.output.replace(/\n$/, '') + '\n```');
  return out.join('\n\n') + '\n';
}

function cell(s: string): string {
  return s.split('\n')[0].replace(/\|/g, '\\|');
}

/** The cost–progress series as a markdown table: seq, time, kind, status, tokens, cost, calls, detail. */
export function renderProgress(title: string, res: P.ProgressResult): string {
  const head = `# Progress of ${title}`;
  if (!res.points?.length) return `${head}\n\nNo progress points yet (checkpoints, goals, end-condition and gate results).\n`;
  const rows = res.points.map(p => {
    const time = (p.time ?? '').replace(/^.*T/, '').replace(/\.\d+/, '').replace('Z', '');
    return `| ${p.seq} | ${time} | ${p.kind} | ${p.status ?? ''} | ${p.spend?.tokens ?? 0} | $${(p.spend?.costUSD ?? 0).toFixed(4)} | ${p.spend?.modelCalls ?? 0} | ${cell(p.detail ?? '')} |`;
  });
  return [head, '', '| seq | time | kind | status | tokens | cost | calls | detail |', '|---:|---|---|---|---:|---:|---:|---|', ...rows].join('\n') + '\n';
}
