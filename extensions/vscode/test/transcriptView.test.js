// The live transcript's view model (out/transcriptModel.js) on the golden logs and on streamed
// cell output: which entries a webview gets, which cell each output chunk and result goes to,
// the actions (subagent links, a turn's diff) and the text it shows.
'use strict';
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { TranscriptModel, batches, plain, stripAnsi, parseSeq, turnDiffText, aboutLine } = require('../out/transcriptModel');
const { loadGolden } = require('./golden');

const golden = loadGolden();
const opsOf = events => new TranscriptModel().all(events);
const entries = ops => ops.filter(o => o.op === 'entry').map(o => o.entry);
const ev = (seq, type, data) => ({ session: 's1', seq, ts: '2026-12-01T10:00:0' + (seq % 10) + '.5Z', type, data });

test('every golden event gives at least one op, in seq order, and no text reads a missing field', () => {
  for (const [name, events] of Object.entries(golden)) {
    const model = new TranscriptModel();
    let last = 0;
    for (const e of events) {
      const ops = model.ops(e);
      assert.ok(ops.length > 0, `${name} #${e.seq} (${e.type}) shows nothing`);
      for (const o of ops) {
        const seq = o.op === 'entry' ? o.entry.seq : o.seq;
        assert.equal(seq, e.seq, `${name} #${e.seq}: an op of another event`);
        assert.ok(seq >= last);
        last = seq;
        const s = JSON.stringify(o);
        assert.ok(!/undefined|\[object Object\]|NaN/.test(s), `${name} #${e.seq}: ${s}`);
        if (o.op === 'entry') assert.ok(!/\*\*|`/.test((o.entry.text ?? '') + o.entry.label) || e.type === 'user_message' || e.type === 'assistant_message',
          `${name} #${e.seq} shows Markdown markup as text: ${s}`);
      }
    }
  }
});

test('root.jsonl: messages, cells with their code, results and errors, the subagent as a link, state lines', () => {
  const ops = opsOf(golden.root);
  const es = entries(ops);
  const task = es.find(e => e.type === 'user_message');
  assert.deepEqual([task.style, task.label, task.text], ['user', 'task', 'rename area_of to rect_area']);
  const cells = es.filter(e => e.style === 'cell');
  assert.deepEqual(cells.map(c => c.code), ["h = await rlm('write the helper', name='helper')\nprint('spawned', h.name)", 'print(1/0)']);
  assert.deepEqual(cells.map(c => c.callId), ['call_scripted_1', 'call_scripted_3']);
  assert.match(cells[0].note, /^\d+ in \/ \d+ out tokens$/);
  const fin = ops.filter(o => o.op === 'finish');
  assert.deepEqual(fin.map(f => [f.callId, f.status]), [['call_scripted_1', 'ok'], ['call_scripted_3', 'error']]);
  assert.equal(fin[0].output, 'spawned helper\n');
  assert.equal(fin[0].meta, '[1] · 2.9 s');
  assert.match(fin[1].output, /ZeroDivisionError: division by zero/);
  assert.equal(fin[1].error, 'ZeroDivisionError: division by zero');
  assert.ok(!fin.some(f => /\x1b/.test(f.output)), 'ANSI colours reach the DOM');
  assert.deepEqual(ops.filter(o => o.op === 'start').map(o => o.callId), ['call_scripted_1', 'call_scripted_3']);
  const child = es.find(e => e.type === 'subagent_spawned');
  assert.equal(child.style, 'child');
  assert.equal(child.text, 'helper on arbor/write-the-helper-8bfcf583: write the helper');
  assert.deepEqual(child.actions, [{ kind: 'open', label: 'open helper', session: '8bfcf5839197f46f' }]);
  const asst = es.find(e => e.style === 'assistant');
  assert.equal(asst.text, 'Waiting for the helper.');
  const states = es.filter(e => e.type === 'state_changed');
  assert.deepEqual(states.map(s => [s.style, s.label]), [['quiet', '→ admitted'], ['quiet', '→ running'], ['quiet', '→ idle']]);
  const from = es.find(e => e.type === 'user_message' && e.label === 'child helper');
  assert.ok(from, 'the child\'s message is not labelled with its sender');
  assert.equal(es.find(e => e.type === 'kernel').text, 'kernel started (pid 16751)');
  assert.equal(es.find(e => e.type === 'session_created').time, '10:29:25');
});

test('child.jsonl: the checkpoint offers its turn\'s diff, and the parent is a link', () => {
  const es = entries(opsOf(golden.child));
  const cp = es.find(e => e.type === 'checkpoint');
  assert.equal(cp.style, 'checkpoint');
  assert.equal(cp.text, '13e347442b52 after turn 1');
  assert.deepEqual(cp.actions, [{ kind: 'diff', label: 'diff of turn 1', turn: 1 }]);
  const created = es.find(e => e.type === 'session_created');
  assert.equal(created.actions[0].kind, 'open');
  assert.match(created.actions[0].session, /^8e6a9ede/);
  const sent = es.find(e => e.type === 'message_sent');
  assert.equal(sent.text, 'helper written');
  assert.match(sent.label, /^sent to parent 8e6a9ede \(delivered\)$/);
});

test('fork.jsonl: the fork says where it came from and links its source', () => {
  const es = entries(opsOf(golden.fork));
  const f = es.find(e => e.type === 'forked');
  assert.equal(f.text, 'from 8e6a9ede at event 20 (checkpoint 6f3f75592f, 2 turns)');
  assert.equal(f.actions[0].session.slice(0, 8), '8e6a9ede');
  assert.match(es.find(e => e.type === 'session_created').text, /fork of 8e6a9ede @20/);
});

test('compaction.jsonl: the summary is collapsed under a one-line entry', () => {
  const es = entries(opsOf(golden.compaction)).filter(e => e.type === 'compaction');
  assert.equal(es.length, 3);
  assert.equal(es[0].style, 'quiet');
  assert.equal(es[0].text, 'context compacted: 3 messages summarised, 6 kept');
  assert.match(es[0].details, /SUMMARY: the agent printed numbered blocks\./);
});

test('tool_output streams into its cell; tool_finished ends it with the authoritative output', () => {
  const m = new TranscriptModel();
  const a = m.ops(ev(1, 'assistant_message', { text: 'counting', toolCalls: [{ id: 'c1', code: 'for i in range(3): print(i)' }], usage: { inputTokens: 5, outputTokens: 2, costUSD: 0.0012 } }));
  assert.deepEqual(a.map(o => o.op), ['entry', 'entry']);
  assert.equal(a[0].entry.note, '5 in / 2 out tokens · $0.0012');
  assert.equal(a[1].entry.callId, 'c1');
  assert.deepEqual(m.ops(ev(2, 'tool_started', { callId: 'c1', code: 'x' })), [{ op: 'start', callId: 'c1', seq: 2 }]);
  assert.deepEqual(m.ops(ev(3, 'tool_output', { callId: 'c1', stream: 'stdout', text: '0\n1\n' })),
    [{ op: 'output', callId: 'c1', seq: 3, stream: 'stdout', text: '0\n1\n', truncated: undefined }]);
  assert.deepEqual(m.ops(ev(4, 'tool_output', { callId: 'c1', stream: 'stderr', text: '\x1b[31mwarn\x1b[0m\n', truncated: true })),
    [{ op: 'output', callId: 'c1', seq: 4, stream: 'stderr', text: 'warn\n', truncated: true }]);
  const fin = m.ops(ev(5, 'tool_finished', { callId: 'c1', status: 'ok', output: '0\n1\n2\n', durationMs: 12345, executionCount: 3, artifact: '/a/out.txt', bytes: 9000 }));
  assert.deepEqual(fin, [{ op: 'finish', callId: 'c1', seq: 5, status: 'ok', meta: '[3] · 12 s', output: '0\n1\n2\n', error: undefined, extra: 'full output (9000 bytes): /a/out.txt' }]);
});

test('a late attach that starts inside a cell creates the cell from the event it gets', () => {
  const m = new TranscriptModel();
  const out = m.ops(ev(7, 'tool_output', { callId: 'c9', stream: 'stdout', text: 'x' }));
  assert.deepEqual(out.map(o => o.op), ['entry', 'output']);
  assert.equal(out[0].entry.style, 'cell');
  assert.equal(out[0].entry.callId, 'c9');
  const started = new TranscriptModel().ops(ev(8, 'tool_started', { callId: 'c8', code: 'print(8)' }));
  assert.deepEqual(started.map(o => o.op), ['entry', 'start']);
  assert.equal(started[0].entry.code, 'print(8)');
  // A cell it has shown is not shown again.
  assert.deepEqual(m.ops(ev(9, 'tool_finished', { callId: 'c9', status: 'ok', output: 'x' })).map(o => o.op), ['finish']);
});

test('an event type from a newer daemon is a quiet line of its data', () => {
  const [o] = new TranscriptModel().ops(ev(3, 'brand_new', { k: 1, s: 'two' }));
  assert.equal(o.entry.style, 'quiet');
  assert.equal(o.entry.label, 'brand new');
  assert.equal(o.entry.text, '- k: 1\n- s: two');
});

test('a failed state and a failed turn are alerts', () => {
  const es = entries(opsOf(golden.failure));
  assert.ok(es.some(e => e.type === 'turn_failed' && e.style === 'alert' && /^turn 1 failed: /.test(e.text)));
  const st = es.filter(e => e.type === 'state_changed').at(-1);
  assert.equal(st.style, 'alert');
  assert.match(st.text, /the model refused this request$/);
});

test('helpers: plain text of Markdown, ANSI stripping, batches, seq parsing, the turn diff document, the about line', () => {
  assert.equal(plain('**a** `b` _c_ x_y_z'), 'a b c x_y_z');
  assert.equal(plain('out:\n```\nline\n```'), 'out:\nline');
  assert.equal(stripAnsi('\x1b[0;31mred\x1b[0m'), 'red');
  assert.deepEqual(batches([1, 2, 3, 4, 5], 2), [[1, 2], [3, 4], [5]]);
  assert.equal(parseSeq(' #12 ', 20), 12);
  assert.match(parseSeq('abc', 20), /not an event number/);
  assert.match(parseSeq('21', 20), /has events 1–20/);
  assert.match(parseSeq('0', 20), /has events 1–20/);
  const doc = turnDiffText('add one', 2, { base: 'a'.repeat(40), head: 'b'.repeat(40), files: [{ path: 'sum.txt', status: 'added', additions: 1, deletions: 0 }], patch: 'diff --git a/sum.txt b/sum.txt\n+2\n' });
  assert.equal(doc, `# turn 2 of add one: ${'a'.repeat(12)}..${'b'.repeat(12)}\n#   added    sum.txt  +1 −0\n\ndiff --git a/sum.txt b/sum.txt\n+2\n`);
  assert.match(turnDiffText('t', 1, { base: 'a', head: 'a', files: [], patch: '' }), /the turn changed no files/);
  assert.equal(aboutLine({ state: 'idle', branch: 'arbor/x', forkOf: '0123456789', forkSeq: 4, model: 'scripted' }), 'idle · arbor/x · fork of 01234567 @4 · scripted');
});
