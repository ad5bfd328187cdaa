// Unit tests of the vscode-free parts of the extension (compiled into out/).
'use strict';
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { SessionStore, formatTokens, sessionTitle, sessionDescription } = require('../out/sessions');
const { EventBuffer, renderEvent } = require('../out/transcript');

const usage = (i, o) => ({ modelCalls: 1, inputTokens: i, outputTokens: o, costUSD: 0, kernelExecs: 0, messages: 0, humanInterventions: 0, retries: 0, harnessEdits: 0 });
const sess = (id, extra = {}) => ({ id, task: `task ${id}`, state: 'idle', model: 'scripted', branch: `arbor/${id}`, worktree: '', baseCommit: '', workspace: '/r', created: `2026-01-01T00:00:0${id.length}Z`, lastSeq: 0, usage: usage(0, 0), total: usage(1500, 20), ...extra });

test('SessionStore applies full and delta sessionTree notifications', () => {
  const s = new SessionStore();
  let changes = 0;
  s.onDidChange(() => changes++);
  s.apply({ full: true, sessions: [sess('a'), sess('bb', { parent: 'a' }), sess('ccc', { parent: 'missing' })] });
  assert.deepEqual(s.roots().map(x => x.id), ['a', 'ccc']);
  assert.deepEqual(s.children('a').map(x => x.id), ['bb']);
  s.apply({ full: false, sessions: [sess('bb', { parent: 'a', state: 'running' })] });
  assert.equal(s.get('bb').state, 'running');
  assert.equal(s.all().length, 3);
  s.apply({ full: true, sessions: [sess('a')] });
  assert.equal(s.all().length, 1);
  assert.equal(changes, 3);
});

test('SessionStore keeps a newer record over an older one (lastSeq)', () => {
  const s = new SessionStore();
  s.apply({ full: false, sessions: [sess('a', { state: 'stopped', lastSeq: 9 })] });
  s.apply({ full: false, sessions: [sess('a', { state: 'idle', lastSeq: 8 })] });
  assert.equal(s.get('a').state, 'stopped');
  s.replace([sess('a', { state: 'idle', lastSeq: 7 }), sess('b')]);
  assert.equal(s.get('a').state, 'stopped');
  assert.equal(s.all().length, 2);
  s.replace([sess('b')]);
  assert.equal(s.get('a'), undefined);
  s.upsert(sess('b', { state: 'running' }));
  assert.equal(s.get('b').state, 'running');
});

test('labels show state, model, rolled-up tokens and branch', () => {
  assert.equal(formatTokens(usage(999, 0)), '999');
  assert.equal(formatTokens(usage(1500, 20)), '1.5k');
  assert.equal(formatTokens(usage(150000, 0)), '150k');
  assert.equal(formatTokens(usage(2500000, 0)), '2.5M');
  assert.equal(sessionDescription(sess('a')), 'idle · scripted · 1.5k tok · arbor/a');
  assert.equal(sessionTitle(sess('a', { task: 'first line\nsecond' })), 'first line');
  assert.equal(sessionTitle(sess('a', { name: 'reviewer' })), 'reviewer');
  assert.equal(sessionTitle(sess('a', { task: 'x'.repeat(100) }), 10).length, 10);
});

test('EventBuffer ignores replayed seqs; renderEvent knows the common types', () => {
  const b = new EventBuffer();
  assert.ok(b.add({ session: 's', seq: 1, ts: '', type: 'x', data: {} }));
  assert.ok(!b.add({ session: 's', seq: 1, ts: '', type: 'x', data: {} }));
  assert.equal(b.list().length, 1);
  assert.match(renderEvent({ session: 's', seq: 2, ts: '2026-01-01T10:11:12.123Z', type: 'assistant_message', data: { text: 'hi', toolCalls: [{ ID: 'c1', Code: 'print(1)' }] } }), /10:11:12[\s\S]*hi[\s\S]*```python\nprint\(1\)\n```/);
  assert.match(renderEvent({ session: 's', seq: 3, ts: '', type: 'state_changed', data: { state: 'failed', error: 'boom' } }), /failed\*\*: boom/);
  assert.match(renderEvent({ session: 's', seq: 4, ts: '', type: 'new_kind', data: { k: 1 } }), /- k: 1/);
  assert.match(renderEvent({ session: 's', seq: 5, ts: '', type: 'new_kind', data: { k: { x: 1 } } }), /"x": 1/);
  assert.match(renderEvent({ session: 's', seq: 6, ts: '', type: 'checkpoint', data: { turn: 2, commit: '0123456789abcdef' } }), /checkpoint `0123456789ab` after turn 2/);
});
