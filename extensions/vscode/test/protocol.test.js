// The extension's protocol layer (out/protocol.js, out/sessions.js) against the real `arbor lsp`
// through vscode-languageserver-protocol's Node client: initialize, arbor/sessionTree,
// arbor/session.create, arbor/sessions, attach + arbor/event, diff, fileAt, errors, shutdown.
// Needs ARBOR_BIN (absolute path to the arbor binary) and a compiled extension (npm run compile).
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { pathToFileURL } = require('node:url');
const rpc = require('vscode-languageserver-protocol/node');
const P = require('../out/protocol');
const { SessionStore } = require('../out/sessions');
const { EventBuffer, renderTranscript } = require('../out/transcript');
const { withTrust, trustPrompt } = require('../out/trust');
const { isHarnessEvent, proposalDocument, proposalLabel, decisionMessage, refineSummary } = require('../out/proposals');
const { makeEnv, startFakeModel, stopDaemon, script, waitFor } = require('./harness');

const bin = process.env.ARBOR_BIN;
let fx, model, proc, conn, stderr = '';
const store = new SessionStore();
const events = new Map(); // session id -> EventBuffer
const trees = [];

before(async () => {
  assert.ok(bin && path.isAbsolute(bin) && fs.existsSync(bin), `set ARBOR_BIN to the absolute path of the arbor binary (got ${bin})`);
  fx = makeEnv();
  model = await startFakeModel(bin, script, fx.root, fx.env);
  proc = spawn(bin, ['lsp'], {
    cwd: fx.repo,
    env: { ...fx.env, ARBOR_MODEL_BASE_URL: model.url, ARBOR_MODEL: 'scripted' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  proc.stderr.on('data', d => { stderr += d; });
  conn = rpc.createProtocolConnection(new rpc.StreamMessageReader(proc.stdout), new rpc.StreamMessageWriter(proc.stdin));
  conn.onNotification(P.NotifySessionTree, p => { trees.push(p); store.apply(p); });
  conn.onNotification(P.NotifyEvent, e => {
    if (!events.has(e.session)) events.set(e.session, new EventBuffer());
    events.get(e.session).add(e);
  });
  // Answer server→client requests a real client would (progress tokens, configuration).
  conn.onRequest('window/workDoneProgress/create', () => null);
  conn.onRequest('workspace/configuration', p => (p.items || []).map(() => null));
  conn.onRequest('client/registerCapability', () => null);
  conn.listen();
});

after(async () => {
  if (conn) conn.dispose();
  if (proc && proc.exitCode === null) proc.kill();
  if (fx) stopDaemon(bin, fx.env);
  if (model) await model.stop();
  // The daemon's kernels may still be writing their snapshots for a moment after it stopped.
  if (fx) fs.rmSync(fx.root, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
});

test('arbor lsp speaks LSP and arbor/* to a vscode-languageserver-protocol client', async (t) => {
  const rootUri = pathToFileURL(fx.repo).href;
  const init = await conn.sendRequest(rpc.InitializeRequest.type, {
    processId: process.pid,
    rootUri,
    workspaceFolders: [{ uri: rootUri, name: 'repo' }],
    capabilities: { window: { workDoneProgress: true }, workspace: { workspaceFolders: true } },
    clientInfo: { name: 'arbor-vscode-protocol-test' },
  }).catch(e => { throw new Error(`initialize failed: ${e.message}\n${stderr}`); });
  assert.ok(init.capabilities, 'initialize result has capabilities');
  const commands = init.capabilities.executeCommandProvider?.commands ?? [];
  t.diagnostic(`server: ${JSON.stringify(init.serverInfo)}; commands: ${commands.join(', ')}`);
  await conn.sendNotification(rpc.InitializedNotification.type, {});

  await t.test('arbor/sessionTree (full) arrives after initialized', async () => {
    await waitFor('a full arbor/sessionTree', 10000, () => trees.some(p => p.full));
  });

  let created;
  await t.test('arbor/session.create starts a session on an arbor/ branch', async () => {
    created = await conn.sendRequest(P.MethodSessionCreate, { task: 'add one and one', dir: fx.repo });
    assert.match(created.id, /\S/);
    assert.match(created.branch, /^arbor\//);
    assert.equal(created.task, 'add one and one');
    assert.ok(['admitted', 'running', 'idle'].includes(created.state), `state ${created.state}`);
  });

  await t.test('arbor/sessionTree shows it, then idle', async () => {
    await waitFor('the session in arbor/sessionTree', 10000, () => store.get(created.id));
    await waitFor(`session ${created.id} idle (now ${store.get(created.id)?.state})`, 60000, () => {
      const s = store.get(created.id);
      if (s?.state === 'failed') throw new Error(`session failed: ${s.error}`);
      return s?.state === 'idle';
    });
    const s = store.get(created.id);
    assert.equal(s.branch, created.branch);
    assert.ok(s.total.modelCalls >= 2, `total.modelCalls ${s.total.modelCalls}`);
  });

  await t.test('arbor/sessions lists it', async () => {
    const res = await conn.sendRequest(P.MethodSessions, { dir: fx.repo });
    const s = res.sessions.find(x => x.id === created.id);
    assert.ok(s, `arbor/sessions lacks ${created.id}: ${JSON.stringify(res)}`);
    assert.equal(s.state, 'idle');
    const one = await conn.sendRequest(P.MethodSessionGet, { id: created.id.slice(0, 8) });
    assert.equal(one.id, created.id, 'session.get accepts a unique id prefix');
  });

  await t.test('arbor/session.attach replays the events as arbor/event', async () => {
    const res = await conn.sendRequest(P.MethodSessionAttach, { id: created.id, sinceSeq: 0 });
    assert.equal(res.session.id, created.id);
    await waitFor('replayed events up to lastSeq', 10000, () => (events.get(created.id)?.lastSeq ?? -1) >= res.session.lastSeq);
    const list = events.get(created.id).list();
    const types = list.map(e => e.type);
    for (const want of ['session_created', 'state_changed', 'tool_finished', 'assistant_message']) {
      assert.ok(types.includes(want), `no ${want} event in ${types.join(', ')}`);
    }
    const md = renderTranscript('t', list);
    assert.ok(md.includes('the sum is two'), 'the transcript has the final answer');
    assert.match(md, /```\n2\n```/, 'the transcript has the kernel output of print(1+1)');
    const log = await conn.sendRequest(P.MethodSessionLog, { id: created.id, sinceSeq: 0 });
    assert.equal(log.events.length, list.length, 'session.log returns the same events');
  });

  await t.test('arbor/session.diff and fileAt show the file the kernel wrote', async () => {
    const d = await conn.sendRequest(P.MethodSessionDiff, { id: created.id });
    const f = d.files.find(x => x.path === 'sum.txt');
    assert.ok(f, `diff lacks sum.txt: ${JSON.stringify(d.files)}`);
    assert.equal(f.status, 'added');
    assert.match(d.patch, /\+2/);
    const head = await conn.sendRequest(P.MethodSessionFileAt, { id: created.id, path: 'sum.txt', side: 'head' });
    assert.equal(head.content, '2\n');
    const base = await conn.sendRequest(P.MethodSessionFileAt, { id: created.id, path: 'sum.txt', side: 'base' });
    assert.equal(base.missing, true);
  });

  await t.test('a child session (parent) sits under its parent; the parent\'s total includes it', async () => {
    const child = await conn.sendRequest(P.MethodSessionCreate, { task: 'add one and one', dir: fx.repo, parent: created.id, name: 'helper' });
    assert.equal(child.parent, created.id);
    await waitFor(`child ${child.id} idle`, 60000, () => {
      const c = store.get(child.id);
      if (c?.state === 'failed') throw new Error(`child failed: ${c.error}`);
      return c?.state === 'idle';
    });
    assert.deepEqual(store.children(created.id).map(x => x.id), [child.id]);
    assert.ok(!store.roots().some(x => x.id === child.id), 'the child is not a root');
    const parent = await conn.sendRequest(P.MethodSessionGet, { id: created.id });
    assert.ok(parent.children?.includes(child.id), `parent.children ${JSON.stringify(parent.children)}`);
    const c = store.get(child.id);
    assert.ok(parent.total.modelCalls >= parent.usage.modelCalls + c.usage.modelCalls,
      `parent total ${JSON.stringify(parent.total)} lacks the child's ${JSON.stringify(c.usage)}`);
  });

  await t.test('arbor/session.accept brings the change onto the user\'s branch', async () => {
    const res = await conn.sendRequest(P.MethodSessionAccept, { id: created.id });
    assert.match(res.commit, /^[0-9a-f]{7,}$/);
    assert.deepEqual(res.files, ['sum.txt']);
    const git = (...a) => execFileSync('git', ['-C', fx.repo, ...a], { encoding: 'utf8' });
    assert.equal(git('rev-parse', 'HEAD').trim(), res.commit, 'HEAD of the user\'s branch is the accept commit');
    assert.equal(git('show', 'HEAD:sum.txt'), '2\n');
    assert.equal(git('status', '--porcelain'), '', 'the user\'s tree is clean after accept');
  });

  await t.test('arbor/session.fork makes a new session on its own branch; discard removes it', async () => {
    const f = await conn.sendRequest(P.MethodSessionFork, { id: created.id });
    assert.notEqual(f.id, created.id);
    assert.match(f.branch, /^arbor\//);
    assert.notEqual(f.branch, created.branch);
    await waitFor('the fork in arbor/sessionTree', 10000, () => store.get(f.id));
    const wt = f.worktree;
    // A fork returns registered; its files follow, and the tree says when they are in.
    await waitFor('the fork\'s files written', 20000, () => store.get(f.id)?.worktreeWriting !== true && fs.existsSync(wt));
    await conn.sendRequest(P.MethodSessionDiscard, { id: f.id, force: true });
    assert.ok(!fs.existsSync(wt), 'discard removed the worktree');
    const list = execFileSync('git', ['-C', fx.repo, 'worktree', 'list'], { encoding: 'utf8' });
    assert.ok(!list.includes(wt), `git worktree list still has ${wt}:\n${list}`);
  });

  await t.test('arbor/session.send reaches the session; arbor/session.stop stops it', async () => {
    const before = store.get(created.id).lastSeq;
    const res = await conn.sendRequest(P.MethodSessionSend, { id: created.id, text: 'and once more', mode: 'auto' });
    assert.ok(['delivered', 'queued'].includes(res.status), `send status ${res.status}`);
    await waitFor('the message in the event log', 20000, () =>
      events.get(created.id).list().some(e => e.seq > before && JSON.stringify(e.data).includes('and once more')));
    await waitFor('idle again', 30000, () => store.get(created.id).state === 'idle' && store.get(created.id).lastSeq > before);
    await conn.sendRequest(P.MethodSessionStop, { id: created.id });
    await waitFor(`stopped (now ${store.get(created.id).state})`, 20000, () => store.get(created.id).state === 'stopped');
  });

  await t.test('harness proposals: a kernel\'s workspace notes wait for review; reject, accept and /refine through arbor/refine.*', async () => {
    const s = await conn.sendRequest(P.MethodSessionCreate, { task: 'write team rules', dir: fx.repo });
    await waitFor(`session ${s.id} idle`, 60000, () => {
      const x = store.get(s.id);
      if (x?.state === 'failed') throw new Error(`session failed: ${x.error}`);
      return x?.state === 'idle';
    });
    const mine = async status => (await conn.sendRequest(P.MethodRefineProposals, { dir: fx.repo, status })).proposals.filter(p => p.session === s.id);
    const listed = await mine('pending');
    assert.deepEqual(listed.map(p => proposalLabel(p)).sort(), ['create note style-rule', 'create note team-rule'],
      `pending proposals of the session: ${JSON.stringify(listed)}`);
    for (const p of listed) {
      assert.equal(p.scope, 'workspace');
      assert.equal(p.author, 'agent');
      assert.equal(p.diff, undefined, 'the list carries no diffs');
    }
    const rule = listed.find(p => p.edits[0].id === 'team-rule');
    const style = listed.find(p => p.edits[0].id === 'style-rule');

    // The harness_proposed events are ones the view refreshes on.
    const att = await conn.sendRequest(P.MethodSessionAttach, { id: s.id, sinceSeq: 0 });
    await waitFor('the replayed events', 10000, () => (events.get(s.id)?.lastSeq ?? -1) >= att.session.lastSeq);
    const proposed = events.get(s.id).list().filter(e => e.type === P.EventHarnessProposed);
    assert.equal(proposed.length, 2);
    assert.ok(proposed.every(isHarnessEvent));
    assert.equal(proposed[0].data.policy, 'review');

    // The review document: the facts, then the daemon's diff, which adds the note's body.
    const one = await conn.sendRequest(P.MethodRefineProposal, { dir: fx.repo, id: rule.id });
    assert.match(one.diff, /^diff --git /m);
    assert.match(one.diff, /^\+.*Run the tests\./m, `the diff does not add the note's body:\n${one.diff}`);
    const doc = proposalDocument(one);
    assert.ok(doc.endsWith(one.diff.replace(/\n?$/, '\n')), 'the document ends with the diff verbatim');
    assert.match(doc, new RegExp(`# proposal: ${rule.id} \\(pending\\)`));

    // Reject with a reason: recorded, gone from pending, listed as rejected by the user.
    const rejected = await conn.sendRequest(P.MethodRefineReject, { dir: fx.repo, id: rule.id, reason: 'not a team rule' });
    assert.equal(rejected.status, 'rejected');
    assert.equal(decisionMessage(rejected, 'reject').text, `Arbor: rejected ${rule.id} (create note team-rule): not a team rule.`);
    assert.deepEqual((await mine('pending')).map(p => p.id), [style.id]);
    const all = await mine('all');
    const r = all.find(p => p.id === rule.id);
    assert.equal(r.status, 'rejected');
    assert.equal(r.reason, 'not a team rule');
    assert.equal(r.decidedBy, 'user');

    // Accept: no gate configured, so it applies; the note is then in the workspace harness.
    const applied = await conn.sendRequest(P.MethodRefineAccept, { dir: fx.repo, id: style.id });
    assert.equal(applied.status, 'applied', JSON.stringify(applied));
    assert.match(applied.applied, /^[0-9a-f]{7,}$/);
    const m = decisionMessage(applied, 'accept');
    assert.equal(m.severity, 'info');
    assert.match(m.text, new RegExp(`applied ${style.id} \\(create note style-rule\\) to the workspace harness as ${applied.applied.slice(0, 8)}`));
    const entry = await conn.sendRequest(P.MethodHarnessGet, { dir: fx.repo, scope: 'workspace', kind: 'note', id: 'style-rule' });
    assert.match(entry.body, /Use tabs\./);
    assert.deepEqual(await mine('pending'), []);
    await assert.rejects(conn.sendRequest(P.MethodRefineAccept, { dir: fx.repo, id: style.id }), e => {
      assert.equal(e.code, P.CodeStale, 'accepting a decided proposal is refused');
      return true;
    });
    await waitFor('harness_rejected and harness_applied in the session log', 10000, () => {
      const types = events.get(s.id).list().map(e => e.type);
      return types.includes(P.EventHarnessRejected) && types.includes(P.EventHarnessApplied);
    });

    // /refine with a focus, for the workspace scope: the refiner cites the failed cell; its
    // proposal waits for review like the agent's.
    const run = await conn.sendRequest(P.MethodRefineRun, { session: s.id, focus: 'the broken build', scope: 'workspace' });
    assert.equal(run.error, undefined, `refine: ${run.error}`);
    assert.equal(run.proposals.length, 1, JSON.stringify(run));
    const [q] = run.proposals;
    assert.equal(q.status, 'pending');
    assert.equal(q.author, 'refine');
    assert.match(refineSummary(run), new RegExp(`^Arbor: refine \\(workspace scope, events \\d+–\\d+, 1 model call, \\d+\\+\\d+ tokens\\): 1 proposal — ${q.id} pending: create note fix-build`));
    assert.deepEqual((await mine('pending')).map(p => p.id), [q.id]);
    await conn.sendRequest(P.MethodRefineReject, { dir: fx.repo, id: q.id });
    const rq = (await mine('rejected')).find(p => p.id === q.id);
    assert.equal(rq.reason, 'rejected by the user', 'a reject without a reason gets the daemon\'s');
  });

  await t.test('an accept the workspace branch check fails comes back rejected by it, shown as a warning with its exit', async () => {
    const file = path.join(fx.repo, 'arbor.json');
    fs.writeFileSync(file, JSON.stringify({ harness: { workspace: { gate: 'echo the team tests fail; exit 3' } } }));
    try {
      const s = await withTrust(() => conn.sendRequest(P.MethodSessionCreate, { task: 'write team rules', dir: fx.repo }), {
        ask: async st => st.settings.some(x => x.name === 'harness.workspace.gate'),
        grant: st => conn.sendRequest(P.MethodTrustGrant, { dir: st.repo, hash: st.hash }),
      });
      assert.ok(s, 'the gate setting was not what trust asked about');
      await waitFor(`session ${s.id} idle`, 60000, () => {
        const x = store.get(s.id);
        if (x?.state === 'failed') throw new Error(`session failed: ${x.error}`);
        return x?.state === 'idle';
      });
      // team-rule is proposed again (the first was rejected); style-rule exists since its accept,
      // so its create fails in the cell.
      const mine = (await conn.sendRequest(P.MethodRefineProposals, { dir: fx.repo })).proposals.filter(p => p.session === s.id);
      assert.deepEqual(mine.map(proposalLabel), ['create note team-rule'], JSON.stringify(mine));
      const p = await conn.sendRequest(P.MethodRefineAccept, { dir: fx.repo, id: mine[0].id });
      assert.equal(p.status, 'rejected', `the gate exits 3, yet: ${JSON.stringify(p)}`);
      assert.equal(p.decidedBy, 'branch-check');
      assert.equal(p.gate?.exitCode, 3);
      assert.match(p.gate?.output ?? '', /the team tests fail/);
      const m = decisionMessage(p, 'accept');
      assert.equal(m.severity, 'warning');
      assert.ok(m.text.startsWith(`Arbor: ${p.id} (${proposalLabel(p)}) was not applied: rejected by the branch check: ${p.reason}`), m.text);
      assert.match(m.text, /rejected by the branch check: branch check `echo the team tests fail; exit 3` failed \(exit 3\)/);
      const after = (await conn.sendRequest(P.MethodRefineProposals, { dir: fx.repo, status: 'all' })).proposals.find(x => x.id === p.id);
      assert.equal(after.status, 'rejected', 'the daemon did not record the gate\'s rejection');
      const doc = proposalDocument(await conn.sendRequest(P.MethodRefineProposal, { dir: fx.repo, id: p.id }));
      assert.match(doc, /# gate: +`echo the team tests fail; exit 3` exited 3 in /, doc);
      assert.match(doc, /# gate output:\n# +the team tests fail\n/, 'the review document lacks the gate\'s output');
    } finally {
      fs.rmSync(file, { force: true });
    }
  });

  await t.test('an unknown session id is a clear CodeUnknownSession error', async () => {
    await assert.rejects(conn.sendRequest(P.MethodSessionGet, { id: 'no-such-session' }), e => {
      assert.equal(e.code, P.CodeUnknownSession);
      assert.match(e.message, /no-such-session/);
      return true;
    });
  });

  await t.test('an untrusted arbor.json: create refused with CodeUntrusted, then trusted through the prompt and retried', async () => {
    // The command runs in the session's sandbox, where only its worktree is writable: the
    // marker is left there (and before trust there is no worktree at all).
    const command = 'touch setup-ran';
    const file = path.join(fx.repo, 'arbor.json');
    fs.writeFileSync(file, JSON.stringify({ worktree: { command } }));
    try {
      const params = { task: 'add one and one', dir: fx.repo };
      await assert.rejects(conn.sendRequest(P.MethodSessionCreate, params), e => {
        assert.equal(e.code, P.CodeUntrusted);
        assert.equal(e.data.settings[0].name, 'worktree.command');
        assert.match(e.message, /arbor trust /);
        return true;
      });
      const shown = [];
      const s = await withTrust(() => conn.sendRequest(P.MethodSessionCreate, params), {
        ask: async st => { shown.push(trustPrompt(st).detail); return true; },
        grant: st => conn.sendRequest(P.MethodTrustGrant, { dir: st.repo, hash: st.hash }),
      });
      assert.match(s.branch, /^arbor\//);
      assert.equal(shown.length, 1);
      assert.ok(shown[0].includes(command), shown[0]);
      assert.ok(fs.existsSync(path.join(s.worktree, 'setup-ran')), 'the trusted setup command did not run');
      const st = await conn.sendRequest(P.MethodTrustGet, { dir: fx.repo });
      assert.equal(st.trusted, true);
      await waitFor('the trusted session settles', 60000, () => ['idle', 'failed'].includes(store.get(s.id)?.state));
    } finally {
      fs.rmSync(file, { force: true });
    }
  });

  await t.test('arbor/daemon.status', async () => {
    const st = await conn.sendRequest(P.MethodDaemonStatus, {});
    assert.ok(st.pid > 0 && st.sessions >= 1, JSON.stringify(st));
  });

  await t.test('shutdown and exit', async () => {
    await conn.sendRequest(rpc.ShutdownRequest.type);
    await conn.sendNotification(rpc.ExitNotification.type);
    const code = await new Promise(r => proc.exitCode !== null ? r(proc.exitCode) : proc.once('exit', c => r(c)));
    assert.equal(code, 0, `arbor lsp exit code; stderr:\n${stderr}`);
  });
});
