// Unit tests of the proposal review (out/proposals.js): the tree row, the review document, what
// an accept or reject came to (an accept the gate refused is a warning with the gate's reason),
// the /refine summary, and the package.json contributions of the view and its commands, checked
// against the commands the extension registers. The flow against the real daemon is in
// protocol.test.js.
'use strict';
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const P = require('../out/protocol');
const X = require('../out/proposals');
const { readTs } = require('../../test/generated');

const diff = [
  'diff --git a/notes/team-rule.md b/notes/team-rule.md',
  'new file mode 100644',
  'index 0000000..1111111',
  '--- /dev/null',
  '+++ b/notes/team-rule.md',
  '@@ -0,0 +1,2 @@',
  '+# Team rule',
  '+Run the tests.',
  '',
].join('\n');

/** A pending workspace proposal as arbor/refine.proposal returns it. */
const pending = (over = {}) => ({
  id: 'p3f9a2c1d', scope: 'workspace', ref: 'refs/arbor/harness/workspace', author: 'agent',
  session: '8e6a9ede12345678', turn: 1, trigger: [12, 14], rationale: 'The user asked for tests before every commit.',
  intended: 'Tests run before a commit.', edits: [{ op: 'create', kind: 'note', id: 'team-rule', title: 'Team rule' }],
  base: 'abcdef0123456789', commit: '0123456789abcdef', created: '2026-12-01T15:00:00Z', status: 'pending', diff, ...over,
});

test('the Proposal and RefineRunResult fields used here are the generated ones', () => {
  const { types } = readTs();
  const fields = name => new Map(types.get(name).map(f => [f.name, f]));
  const prop = fields('Proposal');
  for (const k of [...Object.keys(pending()), 'reason', 'decidedBy', 'applied', 'observed', 'gate']) assert.ok(prop.has(k), `Proposal has no ${k}`);
  for (const f of prop.values()) if (!f.optional) assert.ok(f.name in pending(), `the fixture lacks the required ${f.name}`);
  const edit = fields('ProposalEdit');
  for (const k of Object.keys(pending().edits[0])) assert.ok(edit.has(k), `ProposalEdit has no ${k}`);
  const run = fields('RefineRunResult');
  for (const k of ['scope', 'fromSeq', 'toSeq', 'calls', 'inputTokens', 'outputTokens', 'summary', 'error', 'proposals']) assert.ok(run.has(k), `RefineRunResult has no ${k}`);
  const gate = fields('GateVerdict');
  for (const k of ['command', 'passed', 'exitCode', 'timedOut']) assert.ok(gate.has(k), `GateVerdict has no ${k}`);
});

test('a row: the edits as its label; id, scope, author and session as its description; the rationale leads the tooltip', () => {
  const p = pending();
  assert.equal(X.proposalLabel(p), 'create note team-rule');
  assert.equal(X.proposalLabel(pending({ edits: [...p.edits, { op: 'delete', kind: 'skill', id: 'old' }, { op: 'update', kind: 'memory', id: 'm' }] })),
    'create note team-rule +2 more');
  assert.equal(X.proposalLabel(pending({ edits: [] })), 'p3f9a2c1d (no edits)');
  assert.equal(X.proposalDescription(p), 'p3f9a2c1d · workspace scope · agent in 8e6a9ede');
  assert.equal(X.proposalDescription(pending({ session: undefined, author: 'refine', status: 'rejected' })), 'p3f9a2c1d · workspace scope · refine · rejected');
  const tip = X.proposalTooltip(p);
  const lines = tip.split('\n');
  assert.equal(lines[2], 'The user asked for tests before every commit\\.', 'the rationale comes first, escaped');
  for (const want of ['scope: workspace', 'edit: create note team\\-rule — Team rule', 'trigger: events 12, 14', 'intended: Tests run before a commit\\.']) {
    assert.ok(tip.includes(want), `tooltip lacks ${want}:\n${tip}`);
  }
  assert.ok(!X.proposalTooltip(pending({ rationale: '**bold** [x](command:evil)' })).includes('[x](command'), 'markdown in a rationale is escaped');
});

test('the review document: the facts as # lines, what the diff compares, then the daemon\'s diff verbatim', () => {
  const doc = X.proposalDocument(pending());
  const [head, body] = [doc.slice(0, doc.indexOf('\n\n')), doc.slice(doc.indexOf('\n\n') + 2)];
  assert.equal(body, diff, 'the diff is shown exactly as the daemon sent it');
  for (const line of head.split('\n')) assert.match(line, /^# /, `header line ${JSON.stringify(line)} is not a # line`);
  assert.match(head, /# proposal: p3f9a2c1d \(pending\)/);
  assert.match(head, /# diff: +git diff of the proposal's commit 0123456789ab against the workspace harness at abcdef012345 \(its version when this was proposed\)/);
  assert.match(head, /# review: /, 'a pending proposal says how to decide it');
  assert.match(X.proposalDocument(pending({ base: undefined })), /against an empty workspace harness/);
  const decided = X.proposalDocument(pending({ status: 'rejected', reason: 'not a team rule\nat all', decidedBy: 'user' }));
  assert.match(decided, /# reason: +not a team rule\n# +at all \(by user\)/, 'a multi-line reason stays inside the header');
  assert.doesNotMatch(decided, /# review:/, 'a decided proposal offers no decision');
  assert.match(X.proposalDocument(pending({ diff: '' })), /\(the daemon returned an empty diff\)/);
  const advised = X.proposalDocument(pending({ advice: ['note team-rule names tests/x.py, a path the checks rely on (**/tests/**): make sure it does not change what they judge'] }));
  assert.match(advised, /# advice: +note team-rule names tests\/x\.py, a path the checks rely on/, 'the text rules\' advice is in the header');
  const gated = X.proposalDocument(pending({ status: 'rejected', decidedBy: 'gate', reason: 'gate `make test` failed (exit 2)',
    gate: { command: 'make test', commit: 'abcdef0123', passed: false, exitCode: 2, durationMs: 1500, output: 'FAIL calc\nexit 2\n' } }));
  assert.match(gated, /# gate: +`make test` exited 2 in 1\.5 s on abcdef01\n# gate output:\n# +FAIL calc\n# +exit 2\n/, gated);
  for (const line of gated.slice(0, gated.indexOf('\n\n')).split('\n')) assert.match(line, /^# /, 'the gate output stays inside the header');
});

test('decisions: applied is info with the commit; an accept the gate rejected is a warning with its reason and exit', () => {
  const applied = X.decisionMessage(pending({ status: 'applied', applied: 'feedbeef1234', decidedBy: 'user' }), 'accept');
  assert.deepEqual(applied, { severity: 'info', text: 'Arbor: applied p3f9a2c1d (create note team-rule) to the workspace harness as feedbeef.' });
  const gate = { command: 'make test', passed: false, exitCode: 2, durationMs: 40 };
  const gated = X.decisionMessage(pending({ status: 'rejected', decidedBy: 'gate', reason: 'gate `make test` failed (exit 2) in 0.0 s on abc12345', gate }), 'accept');
  assert.equal(gated.severity, 'warning');
  assert.equal(gated.text, 'Arbor: p3f9a2c1d (create note team-rule) was not applied: rejected by the branch check: gate `make test` failed (exit 2) in 0.0 s on abc12345.');
  const terse = X.decisionMessage(pending({ status: 'rejected', decidedBy: 'gate', reason: 'the change broke the build', gate: { ...gate, timedOut: true } }), 'accept');
  assert.equal(terse.text, 'Arbor: p3f9a2c1d (create note team-rule) was not applied: rejected by the branch check: the change broke the build (branch check `make test` exited 2, timed out).');
  const observed = X.decisionMessage(pending({ status: 'rejected', decidedBy: 'gate', reason: 'gate failed', observed: '3 tests failed' }), 'accept');
  assert.match(observed.text, /Observed: 3 tests failed/);
  const passed = X.decisionMessage(pending({ status: 'applied', applied: 'feedbeef', observed: 'make test passed in 1.2s' }), 'accept');
  assert.match(passed.text, /Observed: make test passed in 1\.2s/);
  assert.deepEqual(X.decisionMessage(pending({ status: 'rejected', reason: 'not a team rule', decidedBy: 'user' }), 'reject'),
    { severity: 'info', text: 'Arbor: rejected p3f9a2c1d (create note team-rule): not a team rule.' });
  assert.equal(X.decisionMessage(pending(), 'accept').severity, 'warning', 'a proposal still pending after accept is not reported as applied');
});

test('the /refine summary: events, calls, tokens, then each proposal with its status', () => {
  const base = { scope: 'session', fromSeq: 3, toSeq: 40, calls: 1, inputTokens: 1200, outputTokens: 80, proposals: [] };
  assert.equal(X.refineSummary({ ...base, error: 'the model replied no JSON' }),
    'Arbor: refine (session scope, events 3–40, 1 model call, 1200+80 tokens) made no proposal: the model replied no JSON');
  assert.equal(X.refineSummary({ ...base, summary: 'nothing to change' }),
    'Arbor: refine (session scope, events 3–40, 1 model call, 1200+80 tokens) proposed no edits: nothing to change');
  const two = X.refineSummary({ ...base, calls: 2, proposals: [pending({ status: 'applied', scope: 'session' }),
    pending({ id: 'p2', status: 'rejected', reason: 'touches the gate' })] });
  assert.equal(two, 'Arbor: refine (session scope, events 3–40, 2 model calls, 1200+80 tokens): 2 proposals — '
    + 'p3f9a2c1d applied: create note team-rule; p2 rejected (touches the gate): create note team-rule');
});

test('the harness events, and only they, refresh the proposals', () => {
  for (const t of [P.EventHarnessProposed, P.EventHarnessApplied, P.EventHarnessRejected, P.EventHarnessRolledBack, P.EventRefined]) {
    assert.ok(X.isHarnessEvent({ type: t }), t);
  }
  for (const t of [P.EventToolFinished, P.EventStateChanged, P.EventAssistantMessage, 'harness_something_new']) assert.ok(!X.isHarnessEvent({ type: t }), t);
});

test('package.json: the view, its commands and menus name only commands the extension registers', () => {
  const root = path.join(__dirname, '..');
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
  const src = fs.readdirSync(path.join(root, 'src')).filter(f => f.endsWith('.ts')).map(f => fs.readFileSync(path.join(root, 'src', f), 'utf8')).join('\n');
  const registered = new Set();
  for (const m of src.matchAll(/\br\((?:'([\w.]+)'|P\.(\w+)),/g)) registered.add(m[1] ?? P[m[2]]);
  const contributed = new Set(pkg.contributes.commands.map(c => c.command));
  for (const id of contributed) assert.ok(registered.has(id), `package.json contributes ${id}, which no code registers`);
  for (const id of ['arbor.proposals.refresh', 'arbor.proposals.show', 'arbor.proposals.accept', 'arbor.proposals.reject', 'arbor.refine']) {
    assert.ok(contributed.has(id), `${id} is not contributed`);
  }
  for (const [where, items] of Object.entries(pkg.contributes.menus)) {
    for (const it of items) assert.ok(contributed.has(it.command), `menu ${where} names ${it.command}, which is not contributed`);
  }
  assert.ok(pkg.contributes.views.arbor.some(v => v.id === 'arbor.proposals'), 'no arbor.proposals view');
  assert.match(src, /createTreeView\('arbor\.proposals'/, 'the arbor.proposals view has no tree');
  const inline = pkg.contributes.menus['view/item/context'].filter(m => m.when.includes('view == arbor.proposals') && m.group.startsWith('inline'));
  assert.deepEqual(inline.map(m => m.command), ['arbor.proposals.show', 'arbor.proposals.accept', 'arbor.proposals.reject']);
  for (const m of inline.slice(1)) assert.match(m.when, /viewItem == proposal\.pending/, `${m.command} is offered on decided proposals`);
  assert.match(src, /contextValue = p\.status === Pending \? 'proposal\.pending'/, 'the rows\' contextValue is not the one the menus test');
});
