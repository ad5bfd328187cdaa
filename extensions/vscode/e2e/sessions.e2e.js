// Real VS Code (code-server) + headless Debian Chromium (playwright-core): the Arbor extension
// starts `arbor lsp`, "Arbor: New Task" starts a session, and the Sessions view shows it idle on
// its arbor/… branch; a session's workspace notes wait in the Harness Proposals view, where the
// user opens the diff, rejects one and accepts the other; Refine Harness… runs /refine. Run by scripts/e2e.sh, which sets E2E_* and the daemon's environment.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const { chromium } = require('playwright-core');

const RUN = process.env.E2E_RUN;
const WS = process.env.E2E_WS;
const PORT = Number(process.env.E2E_PORT || 18089);
const SHOT = process.env.E2E_SHOT || path.join(RUN, 'arbor-e2e.png');
const TASK = 'add one and one';
let server, browser, page;

function waitHttp(url, ms) {
  const end = Date.now() + ms;
  return new Promise((resolve, reject) => {
    const once = () => http.get(url, r => { r.resume(); resolve(); })
      .on('error', () => (Date.now() > end ? reject(new Error(`code-server did not answer ${url} within ${ms} ms`)) : setTimeout(once, 200)));
    once();
  });
}

before(async () => {
  assert.ok(RUN && WS, 'run through scripts/e2e.sh (E2E_RUN, E2E_WS unset)');
  const log = fs.openSync(path.join(RUN, 'code-server.log'), 'w');
  server = spawn('code-server', [
    '--auth', 'none', '--bind-addr', `127.0.0.1:${PORT}`,
    '--disable-telemetry', '--disable-update-check', '--disable-workspace-trust', '--disable-getting-started-override',
    '--config', path.join(RUN, 'config.yaml'),
    '--extensions-dir', path.join(RUN, 'ext'), '--user-data-dir', path.join(RUN, 'data'),
    WS,
  ], { stdio: ['ignore', log, log], env: { ...process.env, HOME: path.join(RUN, 'home') } });
  await waitHttp(`http://127.0.0.1:${PORT}/healthz`, 60000);
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium', headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
  page = await browser.newPage({ viewport: { width: 1400, height: 850 } });
  page.on('pageerror', e => console.log('[pageerror]', e.message));
});

after(async () => {
  if (page) await page.screenshot({ path: SHOT }).catch(e => console.log('screenshot failed:', e.message));
  if (browser) await browser.close().catch(() => undefined);
  if (server) {
    server.kill('SIGTERM');
    await new Promise(r => { if (server.exitCode !== null) r(); else { server.once('exit', r); setTimeout(r, 5000); } });
  }
});

/** Waits for a locator, failing with a message that says what the user would have missed. */
async function expectVisible(locator, what, timeout) {
  try {
    await locator.first().waitFor({ state: 'visible', timeout });
  } catch (e) {
    throw new Error(`${what} (not visible after ${timeout} ms)`);
  }
}

test('Arbor: New Task starts a session that appears idle in the Sessions view', async (t) => {
  const t0 = Date.now();
  await page.goto(`http://127.0.0.1:${PORT}/?folder=${encodeURIComponent(WS)}`);
  await expectVisible(page.locator('.monaco-workbench'), 'the VS Code workbench did not load', 90000);

  // The extension activated and its language client reached the daemon: the status bar item
  // appears once the first arbor/sessionTree arrives.
  await expectVisible(page.locator('.statusbar-item', { hasText: 'Arbor:' }),
    'the Arbor status bar item never appeared: the extension did not activate or `arbor lsp` did not connect', 90000);
  t.diagnostic(`workbench + extension + daemon ready after ${Date.now() - t0} ms`);

  // F1 → "Arbor: New Task" → the task → Enter.
  await page.locator('.monaco-workbench').click({ position: { x: 700, y: 400 } });
  await page.keyboard.press('F1');
  const input = page.locator('.quick-input-widget input');
  await expectVisible(input, 'F1 did not open the command palette', 10000);
  await input.fill('>Arbor: New Task');
  await expectVisible(page.locator('.quick-input-list .monaco-list-row', { hasText: 'Arbor: New Task' }),
    'the command palette does not list "Arbor: New Task"', 10000);
  await page.keyboard.press('Enter');
  await expectVisible(page.locator('.quick-input-widget', { hasText: 'What should the agent do?' }),
    '"Arbor: New Task" did not ask for the task', 10000);
  await input.fill(TASK);
  await page.keyboard.press('Enter');

  // The Sessions view (activity bar container "Arbor") shows the session, then idle on its branch.
  await page.locator('.activitybar [aria-label^="Arbor"]').first().click();
  const row = page.locator('.monaco-list-row', { hasText: TASK });
  await expectVisible(row, `the Sessions view does not show the new session "${TASK}"`, 30000);
  const idle = page.locator('.monaco-list-row', { hasText: TASK }).filter({ hasText: 'idle' }).filter({ hasText: 'arbor/' });
  try {
    await idle.first().waitFor({ state: 'visible', timeout: 60000 });
  } catch {
    throw new Error(`the session never showed as idle on an arbor/ branch; the row says: ${(await row.first().innerText()).replace(/\s+/g, ' ')}`);
  }
  const text = (await idle.first().innerText()).replace(/\s+/g, ' ');
  t.diagnostic(`Sessions view row: ${text}`);
  assert.match(text, /idle · scripted · .* tok · arbor\//);
  // The kernel's rlm('write the tests', name='tests') started a subagent: it sits one level down.
  await expectVisible(page.locator('.monaco-list-row[aria-level="2"]', { hasText: 'tests' }).filter({ hasText: 'arbor/' }),
    'the subagent "tests" that the session spawned with rlm() is not shown under it', 30000);

  await page.screenshot({ path: SHOT.replace(/\.png$/, '-sessions.png') }).catch(() => undefined);

  // Clicking the row opens its transcript; at its end, the model's final answer.
  await idle.first().click();
  const transcript = page.locator('.monaco-editor .view-lines', { hasText: 'session_created' });
  await expectVisible(transcript, 'clicking the session did not open its transcript', 20000);
  await expectVisible(page.locator('.monaco-editor .view-lines', { hasText: '→ **running**' }),
    'the transcript does not show the session\'s states', 20000);
  await page.screenshot({ path: SHOT.replace(/\.png$/, '-transcript.png') }).catch(() => undefined);
  await transcript.first().click();
  await page.keyboard.press('Control+End');
  await expectVisible(page.locator('.monaco-editor .view-lines', { hasText: 'the sum is two' }),
    'the transcript does not end with the final answer "the sum is two"', 20000);
  await expectVisible(page.locator('.monaco-editor .view-lines', { hasText: '→ **idle**' }),
    'the transcript does not end with the session idle', 20000);
  await page.screenshot({ path: SHOT.replace(/\.png$/, '-transcript-end.png') }).catch(() => undefined);

  // F1 → "Arbor: Review Diff" → the session → sum.txt opens a diff editor (vscode.diff over arbor-file:).
  await page.keyboard.press('F1');
  await expectVisible(input, 'F1 did not open the command palette', 10000);
  await input.fill('>Arbor: Review Diff');
  await expectVisible(page.locator('.quick-input-list .monaco-list-row', { hasText: 'Arbor: Review Diff' }),
    'the command palette does not list "Arbor: Review Diff"', 10000);
  await page.keyboard.press('Enter');
  await expectVisible(page.locator('.quick-input-list .monaco-list-row', { hasText: TASK }),
    '"Arbor: Review Diff" did not offer the session', 10000);
  await page.locator('.quick-input-list .monaco-list-row', { hasText: TASK }).first().click();
  const file = page.locator('.quick-input-list .monaco-list-row', { hasText: 'sum.txt' });
  await expectVisible(file, 'the diff review does not list sum.txt, the file the kernel wrote', 15000);
  await file.first().click();
  await expectVisible(page.locator('.monaco-diff-editor .view-lines', { hasText: '2' }),
    'picking sum.txt did not open a diff editor showing its new content', 20000);
  t.diagnostic(`UI part took ${Date.now() - t0} ms`);
});

/** The daemon's record of the workspace's proposals, from the real CLI (`arbor proposals --json`). */
function daemonProposals() {
  const out = execFileSync(process.env.ARBOR_BIN, ['proposals', '--status', 'all', '--json', '--dir', WS], { env: process.env, encoding: 'utf8', timeout: 20000 });
  return JSON.parse(out);
}

test('Harness Proposals: a kernel\'s workspace notes wait for review; the user opens the diff, rejects one, accepts the other', async (t) => {
  const RULES = 'write the team rules';
  await page.keyboard.press('Escape');
  await page.keyboard.press('F1');
  const input = page.locator('.quick-input-widget input');
  await expectVisible(input, 'F1 did not open the command palette', 10000);
  await input.fill('>Arbor: New Task');
  await expectVisible(page.locator('.quick-input-list .monaco-list-row', { hasText: 'Arbor: New Task' }),
    'the command palette does not list "Arbor: New Task"', 10000);
  await page.keyboard.press('Enter');
  await expectVisible(page.locator('.quick-input-widget', { hasText: 'What should the agent do?' }), '"Arbor: New Task" did not ask for the task', 10000);
  await input.fill(RULES);
  await page.keyboard.press('Enter');
  await expectVisible(page.locator('.monaco-list-row', { hasText: RULES }).filter({ hasText: 'idle' }),
    `the session "${RULES}" never showed as idle`, 60000);

  // No transcript follows this session: the view lists again because the session changed state.
  const view = page.locator('.pane', { has: page.locator('.pane-header', { hasText: 'Harness Proposals' }) });
  const rule = view.locator('.monaco-list-row', { hasText: 'create note team-rule' });
  const style = view.locator('.monaco-list-row', { hasText: 'create note style-rule' });
  await expectVisible(rule, 'the Harness Proposals view does not list the kernel\'s workspace note team-rule', 30000);
  await expectVisible(style, 'the Harness Proposals view does not list the kernel\'s workspace note style-rule', 10000);
  const rowText = (await rule.first().innerText()).replace(/\s+/g, ' ');
  t.diagnostic(`Harness Proposals row: ${rowText}`);
  assert.match(rowText, /create note team-rule ?p[0-9a-f]+ · workspace scope · agent in [0-9a-f]{8}/);
  const pending = daemonProposals().filter(p => p.status === 'pending');
  assert.equal(pending.length, 2, `the daemon lists ${JSON.stringify(pending)}`);
  const ruleId = pending.find(p => p.edits[0].id === 'team-rule').id;
  const styleId = pending.find(p => p.edits[0].id === 'style-rule').id;
  await page.screenshot({ path: SHOT.replace(/\.png$/, '-proposals.png') }).catch(() => undefined);

  // Clicking the row opens the read-only diff document: the facts, then the diff adding the note.
  await rule.first().click();
  await expectVisible(page.locator('.monaco-editor .view-lines', { hasText: `# proposal: ${ruleId} (pending)` }),
    'clicking the proposal did not open its review document', 20000);
  await expectVisible(page.locator('.monaco-editor .view-lines', { hasText: '+Run the tests.' }),
    'the review document does not show the diff adding the note\'s body', 10000);
  await expectVisible(page.locator('.tab', { hasText: `${ruleId}.diff` }), 'the review document\'s tab is not named after the proposal', 10000);
  await page.screenshot({ path: SHOT.replace(/\.png$/, '-proposal-diff.png') }).catch(() => undefined);

  // Reject (inline action) with a reason.
  await rule.first().hover();
  await rule.first().locator('.action-label[aria-label="Reject Harness Proposal"]').click();
  await expectVisible(page.locator('.quick-input-widget', { hasText: 'Why?' }), '"Reject" did not ask for a reason', 10000);
  await input.fill('not a team rule');
  await page.keyboard.press('Enter');
  await expectVisible(page.locator('.notifications-toasts', { hasText: `rejected ${ruleId}` }), 'no notification says the proposal was rejected', 15000);
  await rule.first().waitFor({ state: 'detached', timeout: 15000 }).catch(() => { throw new Error('the rejected proposal is still listed'); });
  await expectVisible(page.locator('.monaco-editor .view-lines', { hasText: `# proposal: ${ruleId} (rejected)` }),
    'the open review document still shows the proposal pending after the reject', 10000);
  await expectVisible(page.locator('.monaco-editor .view-lines', { hasText: 'not a team rule (by user)' }),
    'the open review document does not show the reject\'s reason', 10000);

  // Accept (inline action), confirmed in the modal; no gate is configured, so it applies.
  await style.first().hover();
  await style.first().locator('.action-label[aria-label="Accept Harness Proposal"]').click();
  const dialog = page.locator('.monaco-dialog-box', { hasText: 'accept create note style-rule' });
  await expectVisible(dialog, '"Accept" did not ask to confirm', 10000);
  await dialog.locator('.monaco-button', { hasText: /^Accept$/ }).click();
  await expectVisible(page.locator('.notifications-toasts', { hasText: `applied ${styleId}` }), 'no notification says the proposal was applied', 15000);
  await style.first().waitFor({ state: 'detached', timeout: 15000 }).catch(() => { throw new Error('the accepted proposal is still listed'); });
  await expectVisible(view.locator('.welcome-view-content', { hasText: 'No harness proposals are waiting' }),
    'the emptied view does not say that nothing waits for review', 10000);
  await page.screenshot({ path: SHOT.replace(/\.png$/, '-proposals-decided.png') }).catch(() => undefined);

  // The daemon recorded both decisions.
  const all = daemonProposals();
  const r = all.find(p => p.id === ruleId);
  const a = all.find(p => p.id === styleId);
  assert.equal(r.status, 'rejected');
  assert.equal(r.reason, 'not a team rule');
  assert.equal(r.decidedBy, 'user');
  assert.equal(a.status, 'applied');
  assert.equal(a.decidedBy, 'user');
  assert.match(a.applied, /^[0-9a-f]{7,}$/);
});

test('Refine Harness… on a session: the focus is asked for, /refine runs, and its outcome is shown', async () => {
  // The fixture's model has no refiner reply: it answers "the sum is two", which is no edit list,
  // so the daemon's answer is a refine that made no proposal, and that is what must be shown.
  const session = page.locator('.monaco-list-row', { hasText: 'write the team rules' }).filter({ hasText: 'idle' });
  await expectVisible(session, 'the session "write the team rules" is not listed', 10000);
  await session.first().click({ button: 'right' });
  const item = page.locator('.monaco-menu .action-item', { hasText: 'Refine Harness…' });
  await expectVisible(item, 'the session\'s context menu has no "Refine Harness…"', 10000);
  await item.first().click();
  await expectVisible(page.locator('.quick-input-widget', { hasText: 'What to look at' }), '"Refine Harness…" did not ask for a focus', 10000);
  await page.locator('.quick-input-widget input').fill('the team rules');
  await page.keyboard.press('Enter');
  const note = page.locator('.notifications-toasts', { hasText: /refine \(session scope, events \d+–\d+, 2 model calls, \d+\+\d+ tokens\) made no proposal: the refiner's reply was not usable/ });
  await expectVisible(note, 'no notification says what the refine came to', 60000);
  await page.screenshot({ path: SHOT.replace(/\.png$/, '-refine.png') }).catch(() => undefined);
  const log = execFileSync(process.env.ARBOR_BIN, ['log', '--json', (await daemonSession('write the team rules')).id],
    { env: process.env, encoding: 'utf8', timeout: 20000 });
  const refined = log.split('\n').filter(Boolean).map(l => JSON.parse(l)).filter(e => e.type === 'refined');
  assert.equal(refined.length, 1, 'the session log has no refined event');
  assert.equal(refined[0].data.focus, 'the team rules', 'the refine did not get the focus the user typed');
  assert.equal(refined[0].data.trigger, 'user');
});

/** The daemon's record of the session with task, from `arbor ls --json`. */
async function daemonSession(task) {
  const list = JSON.parse(execFileSync(process.env.ARBOR_BIN, ['ls', '--json'], { cwd: WS, env: process.env, encoding: 'utf8', timeout: 20000 }));
  const s = (Array.isArray(list) ? list : list.sessions ?? []).find(x => x.task === task);
  assert.ok(s, `arbor ls --json has no session "${task}"`);
  return s;
}
