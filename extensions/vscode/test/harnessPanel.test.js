// The harness panel's words (out/harness.js): entries grouped by kind, a version's trailers and
// row, and the read-only documents of an entry and of one version's diff.
'use strict';
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { byKind, changeBy, entryDocument, scopeLabel, trailers, versionDescription, versionDocument } = require('../out/harness');

const v = (commit, change, subject = 'note plan: update') => ({ commit, time: '2026-12-01T10:00:00.123Z', subject, change });

test('entries are grouped by kind in the daemon\'s order; an unknown kind comes last under its name', () => {
  const g = byKind([
    { kind: 'subagent', id: 'rev', title: 'Reviewer' }, { kind: 'note', id: 'b', title: 'B' }, { kind: 'widget', id: 'w', title: 'W' },
    { kind: 'note', id: 'a', title: 'A' }, { kind: 'memory', id: 'm', title: 'M' },
  ]);
  assert.deepEqual(g.map(x => [x.title, x.entries.map(e => e.id)]), [['Notes', ['b', 'a']], ['Memories', ['m']], ['Subagents', ['rev']], ['widget', ['w']]]);
  assert.deepEqual(byKind([]), []);
});

test('who made a change, from its trailers', () => {
  assert.equal(changeBy({ author: 'agent', session: '8e6a9edeaefaea37', turn: 3, trigger: [12, 14] }), 'agent in 8e6a9ede, turn 3 (events 12, 14)');
  assert.equal(changeBy({ author: 'user' }), 'user');
  assert.equal(changeBy({ author: '' }), 'unknown');
  assert.equal(versionDescription(v('0123456789abcdef', { author: 'refine', session: 'abcdef0123456789' })), '0123456789 · refine in abcdef01 · 2026-12-01 10:00:00 UTC');
  assert.equal(scopeLabel('workspace'), 'Workspace');
  assert.equal(scopeLabel('global'), 'Global');
  assert.equal(scopeLabel('session', 'abcdef0123456789', 'add one'), 'Session: add one');
  assert.equal(scopeLabel('session', 'abcdef0123456789'), 'Session: abcdef01');
});

test('a version\'s document: its trailers, what the diff compares, then the patch', () => {
  const ver = v('c2'.repeat(20), { author: 'agent', session: 's'.repeat(16), turn: 2, trigger: [7], intended: 'run tests first', observed: 'gate passed' });
  const doc = versionDocument('session note plan', ver, { from: 'c1'.repeat(20), to: 'c2'.repeat(20), patch: 'diff --git a/notes/plan.md b/notes/plan.md\n-first version\n+second version\n' }, 'c1'.repeat(20));
  const lines = doc.split('\n');
  assert.equal(lines[0], `# session note plan: version ${'c2'.repeat(5)}`);
  assert.ok(lines.includes(`# commit:   ${'c2'.repeat(20)}`), doc);
  assert.ok(lines.includes('# author:   agent'), doc);
  assert.ok(lines.includes(`# session:  ${'s'.repeat(16)} (turn 2)`), doc);
  assert.ok(lines.includes('# trigger:  events 7'), doc);
  assert.ok(lines.includes('# intended: run tests first'), doc);
  assert.ok(lines.includes('# observed: gate passed'), doc);
  assert.ok(lines.includes(`# diff:     ${'c1'.repeat(5)} (the version before) → ${'c2'.repeat(5)}`), doc);
  assert.ok(doc.endsWith('\n-first version\n+second version\n'), doc);
  const first = versionDocument('note plan', v('aa'.repeat(20), { author: 'user' }), { from: '', to: 'aa'.repeat(20), patch: '' }, undefined);
  assert.match(first, /# diff: {5}nothing \(its first version\) → aaaaaaaaaa/);
  assert.match(first, /\(no change to this entry in this version\)\n$/);
  // A multi-line trailer stays inside the header.
  assert.ok(trailers(v('x', { author: 'agent', intended: 'a\nb' })).some(([k, val]) => k === 'intended' && val === 'a\nb'));
  assert.match(versionDocument('n', v('x', { author: 'agent', intended: 'a\nb' }), { patch: '' }, undefined), /# intended: a\n# {11}b\n/);
});

test('an entry\'s document shows what its kind holds', () => {
  assert.equal(entryDocument('workspace', { kind: 'note', id: 'plan', title: 'The plan', body: 'second version', version: 'abcdef0123456' }),
    '# The plan\n\n- note `plan` in the workspace harness, version `abcdef0123`\n\nsecond version\n');
  const skill = entryDocument('session', { kind: 'skill', id: 'grep', title: 'Grep', body: 'find things', module: 'def grep():\n    pass\n' });
  assert.ok(skill.endsWith('find things\n\n```python\ndef grep():\n    pass\n```\n'), skill);
  const sub = entryDocument('global', { kind: 'subagent', id: 'rev', title: 'Reviewer', spec: { instructions: 'Review the diff.', model: 'm1', maxTurnSteps: 5 } });
  assert.ok(sub.includes('- subagent spec: model `m1`, at most 5 steps a turn\n\nReview the diff.'), sub);
});
