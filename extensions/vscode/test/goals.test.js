// Goals in the extension (out/goals.js, out/transcript.js): the --budget grammar of `arbor goal`,
// checked before a request goes out, with messages naming the bad item; the tree's word for a
// goal; the goal events in the transcript; the goal's account and the progress table.
'use strict';
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { parseBudget, goalLabel, goalHolds, renderGoal, renderProgress } = require('../out/goals');
const { renderEvent, isKnownEvent } = require('../out/transcript');
const { sessionDescription } = require('../out/sessions');

test('parseBudget reads the CLI\'s --budget grammar', () => {
  assert.deepEqual(parseBudget('tokens=50000, turns=20,wall=2h,cost=$5'), { tokenBudget: 50000, turnBudget: 20, wallBudget: '2h', costBudget: 5 });
  assert.deepEqual(parseBudget(''), {});
  assert.deepEqual(parseBudget('  '), {});
  assert.deepEqual(parseBudget('wall=1h30m,cost=0.50'), { wallBudget: '1h30m', costBudget: 0.5 });
});

test('parseBudget names the bad item and what it wants', () => {
  const cases = {
    'tokens=5k': 'budget item 1 "tokens=5k": want a whole number of tokens above zero',
    'turns=3,turns=0': 'budget item 2 "turns=0": want a whole number of turns above zero',
    'wall=2 hours': 'budget item 1 "wall=2 hours": want a duration above zero such as 2h or 90m',
    'tokens=1,cost=-1': 'budget item 2 "cost=-1": want an amount of USD above zero such as 5 or 0.50',
    'money=5': 'budget item 1 "money=5": unknown budget; want tokens, turns, wall or cost',
    'tokens': 'budget item 1 "tokens": want KEY=VALUE with KEY tokens, turns, wall or cost',
    'turns=2,': 'budget item 2 "": want KEY=VALUE with KEY tokens, turns, wall or cost',
  };
  for (const [input, want] of Object.entries(cases)) assert.throws(() => parseBudget(input), { message: want }, input);
});

test('the tree says what a session\'s goal is doing', () => {
  assert.equal(goalLabel({ objective: 'x', status: 'active' }), 'goal active');
  assert.equal(goalLabel({ objective: 'x', status: 'active', waiting: 'children' }), 'goal parked on children');
  assert.equal(goalLabel({ objective: 'x', status: 'budget_limited' }), 'goal budget limited');
  assert.equal(goalLabel({ objective: 'x', status: 'active', waiting: 'message' }), 'goal waiting on a reply');
  assert.equal(goalLabel(undefined), undefined);
  assert.ok(goalHolds({ status: 'paused' }) && !goalHolds({ status: 'complete' }) && !goalHolds(undefined));
  const s = { id: 'a', task: 't', state: 'idle', model: 'm', branch: 'arbor/t', total: { inputTokens: 1, outputTokens: 2 } };
  assert.equal(sessionDescription({ ...s, goal: { objective: 'x', status: 'stalled' } }), 'idle · goal stalled · m · 3 tok · arbor/t');
  assert.equal(sessionDescription(s), 'idle · m · 3 tok · arbor/t');
});

const sp = { tokens: 1200, costUSD: 0.25, modelCalls: 3 };
const ev = (type, data) => ({ session: 's', seq: 9, ts: '2026-01-01T10:11:12Z', type, data });

test('goal events render readably', () => {
  const set = renderEvent(ev('goal_set', { objective: 'make the tests pass', tokenBudget: 50000, turnBudget: 20, wallBudgetMs: 7200000,
    costBudget: 5, until: 'make test', by: 'user', replaced: true, spend: sp }));
  assert.match(set, /◎ \*\*goal\*\* \(set by user\): make the tests pass — budget 50000 tokens, 20 turns, 2h, \$5\.00; done when `make test` passes; replaces the previous goal/);
  const changed = renderEvent(ev('goal_changed', { status: 'budget_limited', reason: 'the turns budget (20) is used up', limit: 'turns',
    turns: 20, claimed: true, spend: sp, evidence: 'I ran it' }));
  assert.match(changed, /◎ goal \*\*budget limited\*\*: the turns budget \(20\) is used up _\[20 turns, 1200 tokens, \$0\.2500, 3 model calls\]_/);
  assert.match(changed, /claimed by the model: yes; verified: no/);
  assert.match(changed, /evidence: I ran it/);
  assert.match(renderEvent(ev('goal_wait', { reason: 'children', children: ['cccc3333zzzz'] })), /parked until its subagents report: `cccc3333`/);
  assert.match(renderEvent(ev('goal_wait', { reason: 'backoff', delayMs: 30000, idleTurns: 1 })), /backs off 30s after 1 turn\(s\) that changed nothing/);
  const failed = renderEvent(ev('verified', { command: 'make test', passed: false, exitCode: 2, durationMs: 310, output: 'FAIL x\n', claimed: true, spend: sp }));
  assert.match(failed, /✗ end condition `make test` failed \(exit 2, 310 ms\) \(after the model claimed success\)/);
  assert.match(failed, /```\nFAIL x\n```/);
  assert.match(renderEvent(ev('verified', { command: 'make test', commit: 'abcdef0123456789', passed: true, exitCode: 0, durationMs: 40, spend: sp })),
    /✓ end condition `make test` passed \(40 ms\) on `abcdef0123`/);
  assert.match(renderEvent(ev('heartbeat_tick', { id: 'hb1', run: 4, count: 2, pending: 3, status: 'coalesced' })),
    /♡ heartbeat `hb1` run 4 \(counting 2 due times\) coalesced: the session was busy; 3 pending/);
  assert.match(renderEvent(ev('heartbeat_tick', { id: 'hb1', run: 5, count: 1, pending: 0, status: 'stopped' })), /run 5 not delivered: the session is stopped/);
  for (const t of ['goal_set', 'goal_changed', 'goal_wait', 'verified', 'heartbeat_tick']) assert.ok(isKnownEvent(ev(t, {})), t);
});

test('the goal\'s account and the progress table', () => {
  const md = renderGoal('the task', { session: 's', objective: 'make the tests pass', status: 'complete', reason: 'the end condition passed',
    by: 'user', tokenBudget: 100, set: '2026-01-01T00:00:00Z', turns: 2, spent: sp, claimed: true, verified: true, until: 'make test',
    checks: 2, evidence: 'make test passed', lastCheck: { command: 'make test', passed: true, exitCode: 0, durationMs: 5, spend: sp, output: 'ok\n' } });
  for (const want of ['**status:** complete', '**why:** the end condition passed', '**budget:** 100 tokens',
    '**spent:** 2 turns, 1200 tokens, $0.2500, 3 model calls', '**end condition:** `make test` (2 checks)',
    '**claimed by the model:** yes; **verified:** yes', '**evidence:** make test passed', '**last check:** `make test` passed (5 ms)', '```\nok\n```']) {
    assert.ok(md.includes(want), `no ${want} in\n${md}`);
  }
  assert.match(renderGoal('t', undefined), /No goal/);
  const table = renderProgress('the task', { session: 's', points: [{ seq: 4, time: '2026-01-01T10:11:12.5Z', kind: 'verified', status: 'failed', detail: 'make | test\nmore', spend: sp }] });
  assert.ok(table.includes('| 4 | 10:11:12 | verified | failed | 1200 | $0.2500 | 3 | make \\| test |'), table);
  assert.match(renderProgress('t', { session: 's', points: [] }), /No progress points yet/);
});
