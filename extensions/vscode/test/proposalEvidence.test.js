// The evidence of a harness proposal (out/proposals.js): the events its trigger cites, read from
// the proposing session's log and shown as "#" lines of its review document, and the status line
// the Accept / Reject code actions read.
'use strict';
const { test } = require('node:test');
const assert = require('node:assert/strict');
const X = require('../out/proposals');
const { loadGolden } = require('./golden');

const golden = loadGolden();
const proposal = (over = {}) => ({ id: 'p1', scope: 'workspace', ref: 'r', author: 'refine', session: '8e6a9ede12345678', trigger: [18, 11],
  edits: [{ op: 'create', kind: 'note', id: 'n' }], commit: 'c'.repeat(40), created: '2026-12-01T10:00:00Z', status: 'pending', diff: '+x\n', ...over });

test('the trigger names the range of the log to read', () => {
  assert.deepEqual(X.triggerRange(proposal()), { sinceSeq: 11, limit: 8 });
  assert.equal(X.triggerRange(proposal({ trigger: [] })), undefined);
  assert.equal(X.triggerRange(proposal({ session: undefined })), undefined);
  assert.deepEqual(X.triggerRange(proposal({ trigger: [1, 99999] })), { sinceSeq: 1, limit: 2000 });
});

test('the cited events are "#" lines after the facts: seq, type and what it says on one line, no Markdown', () => {
  const evidence = golden.root.filter(e => e.seq === 11 || e.seq === 18);
  const doc = X.proposalDocument(proposal(), evidence);
  const lines = doc.split('\n');
  const at = lines.indexOf('# evidence: the events that prompted it');
  assert.ok(at > 0, doc);
  assert.equal(lines[at + 1], '#   [11] tool_finished: result (ok) [1], 2866 ms spawned helper');
  assert.match(lines[at + 2], /^# {3}\[18\] tool_finished: result \(error\) \[2\], 688 ms -+ ZeroDivisionError .{20,}…$/);
  assert.ok(lines.indexOf('# diff:     git diff of the proposal\'s commit cccccccccccc against an empty workspace harness') > at, doc);
  assert.ok(!X.proposalDocument(proposal()).includes('# evidence'), 'no evidence given, none shown');
  const long = X.evidenceLine({ seq: 3, type: 'user_message', ts: '', session: 's', data: { text: 'y'.repeat(300), from: 'user', queuedSeq: 1 } });
  assert.ok(long.length < 200 && long.endsWith('…'), long);
});

test('the status line of a review document (what the code actions offer on)', () => {
  assert.deepEqual(X.documentStatus(X.proposalDocument(proposal())), { id: 'p1', status: 'pending' });
  assert.deepEqual(X.documentStatus(X.proposalDocument(proposal({ status: 'applied' }))), { id: 'p1', status: 'applied' });
  assert.equal(X.documentStatus('diff --git a b'), undefined);
});
