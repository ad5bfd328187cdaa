// The transcript renderer (out/transcript.js) on the golden event logs recorded from real
// sessions (extensions/test/golden): every event is rendered from its typed payload, none falls
// through to a dump of its data, and what each log is about shows in the markdown.
'use strict';
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { EventBuffer, renderEvent, renderTranscript, isKnownEvent } = require('../out/transcript');
const { readTs } = require('../../test/generated');
const { loadGolden } = require('./golden');

const golden = loadGolden();
const md = name => renderTranscript(name, golden[name]);

test('the golden logs hold every kind of record the tests below look at', () => {
  assert.deepEqual(Object.keys(golden).sort(), ['child', 'compaction', 'failure', 'fork', 'harness', 'root']);
  const { eventPayloads } = readTs();
  for (const [name, events] of Object.entries(golden)) {
    for (const e of events) assert.ok(eventPayloads.has(e.type), `${name}.jsonl #${e.seq}: ${e.type} is no generated event type`);
  }
});

test('every golden event renders from its payload, none as raw data', () => {
  for (const [name, events] of Object.entries(golden)) {
    for (const e of events) {
      assert.ok(isKnownEvent(e), `${name}.jsonl #${e.seq}: ${e.type} is not rendered from its payload`);
      const out = renderEvent(e);
      const [head, ...body] = out.split('\n\n');
      assert.equal(head.split(' · ').slice(0, 2).join(' · '), `### ${e.type} · #${e.seq}`);
      assert.ok(body.join('').trim(), `${name}.jsonl #${e.seq}: ${e.type} renders nothing`);
      assert.ok(!out.includes('```json'), `${name}.jsonl #${e.seq} is dumped as JSON:\n${out}`);
      assert.ok(!/^- \w+: /m.test(out) || e.type === 'session_created' || e.type === 'subagent_spawned',
        `${name}.jsonl #${e.seq} is listed field by field:\n${out}`);
      assert.ok(!/undefined|\[object Object\]|NaN/.test(out), `${name}.jsonl #${e.seq} reads a field its payload lacks:\n${out}`);
    }
  }
});

test('harness.jsonl: a direct edit, a proposal waiting for review, a refine applied, a rejection and a rollback', () => {
  const out = md('harness');
  const pending = golden.harness.find(e => e.type === 'harness_proposed' && e.data.policy === 'review').data.proposal;
  const refined = golden.harness.find(e => e.type === 'refined').data;
  assert.ok(out.includes('harness session scope changed by agent as `'), out);
  assert.ok(out.includes(`harness proposal \`${pending}\` (agent, workspace scope, waiting for your review): create memory \`db-port\``), out);
  assert.ok(out.includes(`harness proposal \`${refined.proposals[0]}\` applied by policy as \``), out);
  assert.ok(out.includes('> the import failed'), out);
  assert.ok(out.includes(`refine (session scope, events ${refined.fromSeq}–${refined.toSeq}): 1 proposals \`${refined.proposals[0]}\``), out);
  assert.ok(out.includes(`**harness proposal \`${pending}\` rejected** by user: not for this team`), out);
  assert.ok(out.includes('harness session scope: note `tests-first` rolled back to `'), out);
});

test('failure.jsonl: the failed state shows its reason, and the turn its error', () => {
  const reason = golden.failure.at(-1).data.reason;
  assert.match(reason, /the model refused this request$/);
  const out = md('failure');
  assert.ok(out.includes(`→ **failed**: ${reason}`), out);
  assert.ok(out.includes(`**turn 1 failed:** ${reason}`), out);
});

test('root.jsonl: the spawned child, the cells, the ZeroDivisionError and the child\'s message', () => {
  const out = md('root');
  assert.ok(out.includes('spawned subagent **helper** on `arbor/write-the-helper-8bfcf583`: write the helper'), out);
  assert.ok(out.includes('```python\nh = await rlm(\'write the helper\', name=\'helper\')\nprint(\'spawned\', h.name)\n```'), out);
  assert.ok(out.includes('```python\nprint(1/0)\n```'), out);
  assert.match(out, /\*\*result \(error\)\*\* \[2\], 688 ms\n\n```\n-{10,}\nZeroDivisionError {5,}Traceback[\s\S]*\nZeroDivisionError: division by zero\n```/);
  assert.ok(out.includes('**error:** ZeroDivisionError: division by zero'), out);
  assert.ok(out.includes('**child helper**:\n\n[message from child helper]\nhelper written'), out);
  assert.ok(out.includes('queued from **child helper** (auto): helper written'), out);
  assert.ok(out.includes('kernel started (pid 16751)'), out);
  assert.ok(out.includes('_386 in / 6 out tokens_'), out);
  assert.ok(out.trimEnd().endsWith('→ **idle**'), out);
});

test('child.jsonl: its parent, the file it writes, the message to its parent, the checkpoint', () => {
  const out = md('child');
  assert.ok(out.includes('- name: helper\n'), out);
  assert.ok(out.includes('- subagent of `8e6a9ede`'), out);
  assert.ok(out.includes('```python\nopen(\'helper.py\',\'w\').write('), out);
  assert.ok(out.includes('sent to parent **8e6a9ede** (delivered):\n\nhelper written'), out);
  assert.ok(out.includes('checkpoint `13e347442b52` after turn 1'), out);
});

test('fork.jsonl: where the fork came from', () => {
  const out = md('fork');
  assert.ok(out.includes('- fork of `8e6a9ede` at event 20'), out);
  assert.ok(out.includes('forked from `8e6a9ede` at event 20 (checkpoint `6f3f75592f`, 2 turns)'), out);
});

test('compaction.jsonl: each compaction with its counts and summary', () => {
  const out = md('compaction');
  assert.equal(out.split('context compacted: 3 messages summarised, 6 kept').length - 1, 3, out);
  assert.equal(out.split('> SUMMARY: the agent printed numbered blocks.').length - 1, 3, out);
  assert.ok(out.includes('live variables: ArborError, agent_message, arbor_ping, n, rlm'), out);
  assert.ok(out.includes('_272 in / 11 out tokens_'), out);
});

test('renderTranscript puts the title and the lines about the session first', () => {
  const out = renderTranscript('second try', golden.fork, ['idle · branch `arbor/second-try-cce86fd4` · fork of 8e6a9ede at event 20']);
  assert.ok(out.startsWith('# second try\n\nidle · branch `arbor/second-try-cce86fd4` · fork of 8e6a9ede at event 20\n\n### session_created · #1'), out);
});

test('an event type from a newer daemon shows its data; a fence survives backticks in the output', () => {
  assert.ok(!isKnownEvent({ session: 's', seq: 4, ts: '', type: 'new_kind', data: { k: 1 } }));
  assert.match(renderEvent({ session: 's', seq: 4, ts: '', type: 'new_kind', data: { k: 1 } }), /- k: 1/);
  assert.match(renderEvent({ session: 's', seq: 5, ts: '', type: 'new_kind', data: { k: { x: 1 } } }), /```json\n[\s\S]*"x": 1/);
  const out = renderEvent({ session: 's', seq: 6, ts: '', type: 'tool_finished', data: { callId: 'c', status: 'ok', output: 'a\n```\nb\n' } });
  assert.ok(out.includes('````\na\n```\nb\n````'), out);
});

test('EventBuffer ignores replayed seqs', () => {
  const b = new EventBuffer();
  const [first, second] = golden.child;
  assert.ok(b.add(first));
  assert.ok(!b.add(first));
  assert.ok(b.add(second));
  assert.ok(!b.add(first));
  assert.equal(b.lastSeq, 2);
  assert.deepEqual(b.list().map(e => e.seq), [1, 2]);
});
