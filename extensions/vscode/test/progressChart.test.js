// The cost–progress chart's data (out/progressModel.js): a session tree's series merged on one
// time axis, spend as the subtree's largest recorded, progress counted over every session.
'use strict';
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { mergeProgress, subtree } = require('../out/progressModel');

const pt = (sec, kind, status, tokens, cost, seq = sec) => ({ seq, time: `2026-12-01T10:00:${String(sec).padStart(2, '0')}Z`, kind, status, detail: `${kind} ${sec}`, spend: { tokens, costUSD: cost, modelCalls: 1 } });
const t0 = Date.parse('2026-12-01T10:00:00Z') / 1000;

test('a tree\'s series on one time axis: spend is the largest recorded so far, progress is counted over every session', () => {
  const c = mergeProgress([
    { session: 'root', title: 'root', points: [pt(1, 'goal_set', 'active', 100, 0.001), pt(5, 'checkpoint', '', 900, 0.009), pt(9, 'verified', 'passed', 1500, 0.015)] },
    { session: 'kid', title: 'kid', points: [pt(3, 'checkpoint', '', 400, 0.004), pt(7, 'verified', 'failed', 600, 0.006), pt(8, 'gate', 'passed', 650, 0.0065)] },
  ]);
  const s = c.series;
  assert.deepEqual(s.x, [1, 3, 5, 7, 8, 9].map(x => t0 + x));
  assert.deepEqual(s.tokens, [100, 400, 900, 900, 900, 1500]);
  assert.deepEqual(s.cost, [0.001, 0.004, 0.009, 0.009, 0.009, 0.015]);
  assert.deepEqual(s.checkpoints, [0, 1, 2, 2, 2, 2]);
  assert.deepEqual(s.passed, [0, 0, 0, 0, 1, 2]);
  assert.deepEqual(s.failed, [0, 0, 0, 1, 1, 1]);
  assert.equal(c.summary, '2 checkpoints, 2 checks passed, 1 failed · 1.5k tokens · $0.0150 · 6 points over 8s · 2 sessions');
  assert.deepEqual(c.rows.map(r => [r.time, r.session, r.kind, r.status]), [
    ['10:00:09', 'root', 'verified', 'passed'], ['10:00:08', 'kid', 'gate', 'passed'], ['10:00:07', 'kid', 'verified', 'failed'],
    ['10:00:05', 'root', 'checkpoint', ''], ['10:00:03', 'kid', 'checkpoint', ''], ['10:00:01', 'root', 'goal_set', 'active']]);
  assert.equal(c.rows[0].cost, '$0.0150');
});

test('points at the same instant make one column with the later values; x stays sorted', () => {
  const c = mergeProgress([{ session: 'a', title: 'a', points: [pt(2, 'checkpoint', '', 10, 0, 4), pt(2, 'verified', 'passed', 20, 0, 5), pt(1, 'goal_set', 'active', 5, 0, 1)] }]);
  assert.deepEqual(c.series.x, [t0 + 1, t0 + 2]);
  assert.deepEqual(c.series.checkpoints, [0, 1]);
  assert.deepEqual(c.series.passed, [0, 1]);
  assert.deepEqual(c.series.tokens, [5, 20]);
  assert.equal(c.summary, '1 checkpoint, 1 check passed · 20 tokens · $0.0000 · 3 points over 1s');
});

test('no points: empty columns and a summary that says what will appear', () => {
  const c = mergeProgress([{ session: 'a', title: 'a', points: [] }]);
  assert.deepEqual(c.series, { x: [], tokens: [], cost: [], checkpoints: [], passed: [], failed: [] });
  assert.match(c.summary, /^No progress points yet/);
  assert.deepEqual(c.rows, []);
});

test('subtree lists a session and its descendants once, root first', () => {
  const kids = { r: ['a', 'b'], a: ['c'], b: [], c: ['r'] };
  assert.deepEqual(subtree('r', id => kids[id] ?? []), ['r', 'a', 'c', 'b']);
});
