// Unit tests of the session store and the tree labels (out/sessions.js), fed Session records built
// from the golden event logs the way the daemon builds them, and checked against the generated
// Session type.
'use strict';
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { SessionStore, formatTokens, sessionTitle, sessionDescription, sessionOrigin, sandboxWarning } = require('../out/sessions');
const { readTs } = require('../../test/generated');
const { loadGolden, sessionFromLog } = require('./golden');

const golden = loadGolden();
const session = name => sessionFromLog(golden[name]);
const idOf = name => golden[name][0].session;
const usage = (i, o) => ({ modelCalls: 1, inputTokens: i, cachedInputTokens: 0, outputTokens: o, costUSD: 0, kernelExecs: 0, messages: 0, humanInterventions: 0, retries: 0,
  harnessEdits: 0, refineCalls: 0, refineInputTokens: 0, refineOutputTokens: 0, refineCostUSD: 0 });

test('the sessions built from the golden logs have the generated Session shape', () => {
  const { types } = readTs();
  const fields = new Map(types.get('Session').map(f => [f.name, f]));
  const usageFields = types.get('Usage').map(f => f.name).sort();
  for (const name of Object.keys(golden)) {
    const s = session(name);
    for (const k of Object.keys(s)) assert.ok(fields.has(k), `${name}: Session has no field ${k}`);
    for (const f of fields.values()) if (!f.optional) assert.ok(f.name in s, `${name}: Session lacks ${f.name}`);
    assert.deepEqual(Object.keys(s.usage).sort(), usageFields, `${name}: usage is not a generated Usage`);
  }
});

test('SessionStore builds the tree of the golden sessions: the child under its parent, the rest roots by age', () => {
  const s = new SessionStore();
  let changes = 0;
  s.onDidChange(() => changes++);
  s.apply({ full: true, sessions: ['failure', 'child', 'fork', 'root', 'compaction'].map(session) });
  assert.deepEqual(s.roots().map(x => x.id), ['root', 'fork', 'compaction', 'failure'].map(idOf));
  assert.deepEqual(s.children(idOf('root')).map(x => x.id), [idOf('child')]);
  assert.deepEqual(s.children(idOf('fork')), [], 'a fork is not a child of its source');
  assert.equal(changes, 1);

  // A delta upserts; a full list replaces.
  s.apply({ full: false, sessions: [{ ...session('root'), state: 'stopped', lastSeq: session('root').lastSeq + 1 }] });
  assert.equal(s.get(idOf('root')).state, 'stopped');
  assert.equal(s.all().length, 5);
  s.apply({ full: true, sessions: [session('fork')] });
  assert.deepEqual(s.all().map(x => x.id), [idOf('fork')]);
  assert.equal(changes, 3);
});

test('SessionStore keeps a newer record over an older one (lastSeq), in deltas and full lists', () => {
  const s = new SessionStore();
  const done = session('root');
  const midway = sessionFromLog(golden.root.slice(0, 8));
  assert.equal(midway.state, 'running');
  assert.equal(midway.lastSeq, 8);
  s.upsert(done);
  s.upsert(midway);
  assert.equal(s.get(done.id).state, 'idle', 'a late reply with an older record turned an idle session back to running');
  s.replace([midway, session('child')]);
  assert.equal(s.get(done.id).state, 'idle');
  assert.equal(s.all().length, 2);
  s.replace([session('child')]);
  assert.equal(s.get(done.id), undefined);
});

test('labels show state, model, rolled-up tokens, branch, and where a fork came from', () => {
  assert.equal(formatTokens(usage(999, 0)), '999');
  assert.equal(formatTokens(usage(1500, 20)), '1.5k');
  assert.equal(formatTokens(usage(150000, 0)), '150k');
  assert.equal(formatTokens(usage(2500000, 0)), '2.5M');
  assert.equal(formatTokens(undefined), '0');
  // The root's four model calls: 345+22, 370+6, 386+6, 448+17 tokens.
  assert.equal(sessionDescription(session('root')), 'idle · scripted · 1.6k tok · arbor/rename-area-of-to-rect-8e6a9ede');
  assert.equal(sessionDescription(session('failure')), 'failed · scripted · 0 tok · arbor/broken-model-0ac5411d');
  assert.equal(sessionTitle(session('child')), 'helper', 'a named session shows its name');
  assert.equal(sessionTitle(session('root')), 'rename area_of to rect_area');
  assert.equal(sessionTitle({ ...session('root'), task: 'first line\nsecond' }), 'first line');
  assert.equal(sessionTitle({ ...session('root'), task: 'x'.repeat(100) }, 10).length, 10);
  assert.equal(sessionOrigin(session('fork')), 'fork of 8e6a9ede @20');
  assert.equal(sessionOrigin(session('root')), undefined);
  assert.match(session('failure').error, /the model refused this request$/);
});

test('a daemon that cannot sandbox kernels is a warning; one that can is none', () => {
  assert.equal(sandboxWarning({ sandbox: { mode: 'bwrap', available: true } }), undefined);
  const w = sandboxWarning({ sandbox: { mode: 'unsandboxed', available: false, reason: 'bwrap: Failed to make / slave' } });
  assert.match(w, /unsandboxed/);
  assert.match(w, /Failed to make \/ slave/);
});
