// Real VS Code (code-server) + headless Debian Chromium (playwright-core): the Arbor extension
// starts `arbor lsp`, "Arbor: New Task" starts a session, and the Sessions view shows it idle on
// its arbor/… branch; a session's workspace notes wait in the Harness Proposals view, where the
// user opens the diff, rejects one and accepts the other; Refine Harness… runs /refine; a session is
// given goals (Set Goal…, Pause / Resume / Clear Goal, Show Goal, Show Progress) and heartbeats
// (Add Heartbeat…, Heartbeats, Delete Heartbeat…), each step checked in the daemon. Run by scripts/e2e.sh, which sets E2E_* and the daemon's environment.
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
  // A parent drawn before its first child arrived may keep the collapsed state VS Code gave
  // it then: a user expands it, and so does the test.
  const child = page.locator('.monaco-list-row[aria-level="2"]', { hasText: 'tests' }).filter({ hasText: 'arbor/' });
  try {
    await child.first().waitFor({ state: 'visible', timeout: 15000 });
  } catch {
    const parent = page.locator('.monaco-list-row[aria-level="1"]', { hasText: TASK }).first();
    if ((await parent.getAttribute('aria-expanded')) === 'false') {
      t.diagnostic('the session row was collapsed when its subagent arrived: expanding it');
      await parent.locator('.monaco-tl-twistie').click();
    }
  }
  await expectVisible(child, 'the subagent "tests" that the session spawned with rlm() is not shown under it', 30000);

  await page.screenshot({ path: SHOT.replace(/\.png$/, '-sessions.png') }).catch(() => undefined);

  // Clicking the row opens its transcript (a webview); at its end, the model's final answer.
  await idle.first().click();
  const transcript = await webviewWith('#title', TASK, 'clicking the session did not open its transcript', 20000);
  await transcript.waitForSelector('.entry[data-type="session_created"]', { timeout: 20000 });
  await transcript.waitForSelector('.entry[data-type="state_changed"] >> text=→ running', { timeout: 20000 })
    .catch(() => { throw new Error('the transcript does not show the session\'s states'); });
  await page.screenshot({ path: SHOT.replace(/\.png$/, '-transcript.png') }).catch(() => undefined);
  await transcript.waitForSelector('.s-assistant .text >> text=the sum is two', { timeout: 20000 })
    .catch(() => { throw new Error('the transcript does not end with the final answer "the sum is two"'); });
  assert.equal(await transcript.locator('.entry[data-type="state_changed"] .label').last().innerText(), '→ idle',
    'the transcript does not end with the session idle');
  await transcript.evaluate(() => window.scrollTo(0, document.body.scrollHeight));
  await page.screenshot({ path: SHOT.replace(/\.png$/, '-transcript-end.png') }).catch(() => undefined);
  await page.locator('.monaco-workbench .part.statusbar').click();

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

/** The frame of the webview in which selector's text includes text (VS Code nests each webview in frames). */
async function webviewWith(selector, text, what, ms) {
  const end = Date.now() + ms;
  for (;;) {
    for (const f of page.frames()) {
      const got = await f.evaluate(sel => document.querySelector(sel)?.textContent ?? null, selector).catch(() => null);
      if (got && got.includes(text)) return f;
    }
    if (Date.now() > end) throw new Error(`${what} (no webview after ${ms} ms)`);
    await new Promise(r => setTimeout(r, 100));
  }
}

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
  await chooseMenuItem(item, 'Refine Harness…');
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

/** The daemon's record of a session's goal, from the real CLI (`arbor goal ID --json`); null when none. */
function daemonGoal(id) {
  const out = JSON.parse(execFileSync(process.env.ARBOR_BIN, ['goal', id, '--json'], { env: process.env, encoding: 'utf8', timeout: 20000 }));
  return out.objective ? out : out.goal ?? null;
}

/** Polls fn until it returns a truthy value; fails with what, and the last value, after ms. */
async function until(what, ms, fn) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    last = await fn();
    if (last) return last;
    if (Date.now() > end) throw new Error(`${what} (after ${ms} ms; last: ${JSON.stringify(last)})`);
    await new Promise(r => setTimeout(r, 250));
  }
}

/** Right-click on the session row, then the context menu item called label. */
async function rowAction(task, label) {
  const row = page.locator('.pane', { has: page.locator('.pane-header', { hasText: 'Sessions' }) }).locator('.monaco-list-row', { hasText: task });
  await expectVisible(row, `the session "${task}" is not listed`, 10000);
  const item = page.locator('.monaco-menu .action-item', { hasText: label });
  // The menu's items follow the row's context value, which changes with the session's state
  // (a goal set a moment ago): a menu opened before the tree redrew is closed and opened again.
  for (let attempt = 1; ; attempt++) {
    await row.first().click({ button: 'right' });
    if (await item.first().waitFor({ state: 'visible', timeout: 4000 }).then(() => true, () => false)) break;
    await page.keyboard.press('Escape');
    if (attempt === 3) await expectVisible(item, `the session's context menu has no "${label}"`, 1);
    await page.waitForTimeout(1000);
  }
  await chooseMenuItem(item, label);
}

/** Clicks an open context menu's item. A menu that has only just opened may take the click for
 *  the end of the right-click (the workbench ignores a mouse-up that soon) and stay open: then
 *  the item is chosen from the keyboard. */
async function chooseMenuItem(item, label) {
  await item.first().click();
  const menu = page.locator('.monaco-menu');
  if (await menu.first().waitFor({ state: 'detached', timeout: 1500 }).then(() => false, () => true)) {
    await item.first().hover();
    await page.keyboard.press('Enter');
    await menu.first().waitFor({ state: 'detached', timeout: 5000 })
      .catch(() => { throw new Error(`the context menu stayed open after choosing "${label}"`); });
  }
}

/** F1 → command → the session picked by its task. */
async function paletteOnSession(command, task) {
  await page.keyboard.press('Escape');
  await page.keyboard.press('F1');
  const input = page.locator('.quick-input-widget input');
  await expectVisible(input, 'F1 did not open the command palette', 10000);
  await input.fill('>' + command);
  await expectVisible(page.locator('.quick-input-list .monaco-list-row', { hasText: command }), `the command palette does not list "${command}"`, 10000);
  await page.keyboard.press('Enter');
  const pick = page.locator('.quick-input-list .monaco-list-row', { hasText: task });
  await expectVisible(pick, `"${command}" did not offer the session "${task}"`, 10000);
  await pick.first().click();
}

test('Goals: Set Goal… checks the budgets, Pause and Resume reach the daemon, a second goal replaces the first after asking, Show Goal and Show Progress', async (t) => {
  const TASK = 'chase a goal';
  const input = page.locator('.quick-input-widget input');
  await page.keyboard.press('Escape');
  await page.keyboard.press('F1');
  await expectVisible(input, 'F1 did not open the command palette', 10000);
  await input.fill('>Arbor: New Task');
  await expectVisible(page.locator('.quick-input-list .monaco-list-row', { hasText: 'Arbor: New Task' }), 'the command palette does not list "Arbor: New Task"', 10000);
  await page.keyboard.press('Enter');
  await expectVisible(page.locator('.quick-input-widget', { hasText: 'What should the agent do?' }), '"Arbor: New Task" did not ask for the task', 10000);
  await input.fill(TASK);
  await page.keyboard.press('Enter');
  // The Sessions view's row (a closed quick pick keeps its rows, with the same text, in the DOM).
  const row = page.locator('.pane', { has: page.locator('.pane-header', { hasText: 'Sessions' }) }).locator('.monaco-list-row', { hasText: TASK });
  await expectVisible(row.filter({ hasText: 'idle' }), `the session "${TASK}" never showed as idle`, 60000);
  const id = (await daemonSession(TASK)).id;

  // Set Goal…: the objective, then a bad budget (named, and Enter does not take it), then good ones.
  await rowAction(TASK, 'Set Goal…');
  await expectVisible(page.locator('.quick-input-widget', { hasText: 'What should the goal achieve?' }), '"Set Goal…" did not ask for the objective', 10000);
  await input.fill('keep going');
  await page.keyboard.press('Enter');
  await expectVisible(page.locator('.quick-input-widget', { hasText: 'Budgets over the session' }), '"Set Goal…" did not ask for the budgets', 10000);
  await input.fill('tokens=5k');
  await expectVisible(page.locator('.quick-input-widget', { hasText: 'budget item 1 "tokens=5k": want a whole number of tokens above zero' }),
    'a bad budget item is not named while it is typed', 10000);
  await page.keyboard.press('Enter');
  await page.waitForTimeout(500);
  await expectVisible(page.locator('.quick-input-widget', { hasText: 'budget item 1 "tokens=5k"' }), 'Enter took a bad budget', 5000);
  assert.equal(await input.inputValue(), 'tokens=5k', 'Enter took a bad budget');
  await input.fill('tokens=50000,turns=20,wall=2h,cost=5');
  await page.keyboard.press('Enter');
  await expectVisible(page.locator('.quick-input-widget', { hasText: 'End condition (optional)' }), '"Set Goal…" did not ask for an end condition', 10000);
  await page.keyboard.press('Enter');
  await expectVisible(page.locator('.notifications-toasts', { hasText: 'goal active on chase a goal: keep going' }), 'no notification says the goal was set', 15000);
  let g = daemonGoal(id);
  assert.equal(g.status, 'active');
  assert.deepEqual([g.objective, g.tokenBudget, g.turnBudget, g.wallBudgetMs, g.costBudget, g.until], ['keep going', 50000, 20, 7200000, 5, undefined]);
  await expectVisible(row.filter({ hasText: /goal (active|backing off)/ }), 'the Sessions view does not show the goal on the row', 15000);
  t.diagnostic(`row with a goal: ${(await row.first().innerText()).replace(/\s+/g, ' ')}`);

  // Pause, Resume (the goal takes a turn that changes nothing and backs off), Pause again.
  await rowAction(TASK, 'Pause Goal');
  await until('the daemon did not record the goal paused', 10000, () => daemonGoal(id).status === 'paused');
  await expectVisible(row.filter({ hasText: 'goal paused' }), 'the Sessions view does not show the goal paused', 10000);
  await rowAction(TASK, 'Resume Goal');
  await until('the resumed goal took no turn and did not back off', 30000, () => { const x = daemonGoal(id); return x.status === 'active' && x.turns >= 2 && x.waiting === 'backoff'; });
  await rowAction(TASK, 'Pause Goal');
  await until('the daemon did not record the goal paused again', 10000, () => daemonGoal(id).status === 'paused');

  // A second goal over the paused one asks first; the session writes done.txt, `test -f done.txt` passes.
  await rowAction(TASK, 'Set Goal…');
  await expectVisible(page.locator('.quick-input-widget', { hasText: 'What should the goal achieve?' }), '"Set Goal…" did not ask for the objective', 10000);
  await input.fill('write done.txt');
  await page.keyboard.press('Enter');
  await expectVisible(page.locator('.quick-input-widget', { hasText: 'Budgets over the session' }), '"Set Goal…" did not ask for the budgets', 10000);
  await input.fill('turns=5');
  await page.keyboard.press('Enter');
  await expectVisible(page.locator('.quick-input-widget', { hasText: 'End condition (optional)' }), '"Set Goal…" did not ask for an end condition', 10000);
  await input.fill('test -f done.txt');
  await page.keyboard.press('Enter');
  const dialog = page.locator('.monaco-dialog-box', { hasText: 'already has a goal (paused): "keep going". Replace it?' });
  await expectVisible(dialog, 'a second goal did not ask before replacing the paused one', 10000);
  await dialog.locator('.monaco-button', { hasText: /^Replace$/ }).click();
  g = await until('the replacing goal did not end', 60000, () => { const x = daemonGoal(id); return x.status !== 'active' && x.objective === 'write done.txt' && x; });
  assert.deepEqual([g.status, g.claimed, g.verified, g.evidence, g.until, g.turnBudget], ['complete', true, true, 'done.txt written', 'test -f done.txt', 5]);
  await expectVisible(row.filter({ hasText: 'goal complete' }), 'the Sessions view does not show the goal complete', 15000);

  // Show Goal: the account of the goal, claimed apart from verified.
  await paletteOnSession('Arbor: Show Goal', TASK);
  for (const want of ['# Goal of chase a goal', 'status:** complete', 'budget:** 5 turns', 'claimed by the model:** yes; **verified:** yes',
    'evidence:** done.txt written', 'last check:** `test -f done.txt` passed']) {
    await expectVisible(page.locator('.monaco-editor .view-lines', { hasText: want }), `Show Goal does not show "${want}"`, 15000);
  }
  await page.screenshot({ path: SHOT.replace(/\.png$/, '-goal.png') }).catch(() => undefined);

  // Show Progress: a table with a row per point of the daemon's series.
  await paletteOnSession('Arbor: Show Progress', TASK);
  await expectVisible(page.locator('.monaco-editor .view-lines', { hasText: '| seq | time | kind | status | tokens | cost | calls | detail |' }),
    'Show Progress shows no table', 15000);
  await expectVisible(page.locator('.monaco-editor .view-lines', { hasText: /\|\s+verified\s+\|\s+passed\s+\|\s+\d+\s+\|\s+\$\d/ }), 'the progress table has no passed verification', 10000);
  const points = JSON.parse(execFileSync(process.env.ARBOR_BIN, ['progress', id, '--json'], { env: process.env, encoding: 'utf8', timeout: 20000 })).points;
  const kinds = points.map(p => p.kind);
  assert.ok(kinds.includes('goal_set') && kinds.includes('goal_changed') && kinds.includes('verified'), kinds.join(','));
  const rows = await page.locator('.monaco-editor .view-line', { hasText: /^\|\s\d+\s\|/ }).count();
  assert.equal(rows, points.length, 'the table has a row per point of the series');
  await page.screenshot({ path: SHOT.replace(/\.png$/, '-progress.png') }).catch(() => undefined);

  // A resume the daemon refuses shows its reason in full; Clear removes the goal.
  await page.keyboard.press('Escape');
  await rowAction(TASK, 'Resume Goal');
  await expectVisible(page.locator('.notifications-toasts', { hasText: "goal is complete, not paused or stalled or budget_limited" }),
    'the refused resume does not show the daemon\'s reason', 15000);
  await rowAction(TASK, 'Clear Goal');
  await until('the daemon still has a goal after Clear Goal', 10000, () => daemonGoal(id) === null);
  await row.filter({ hasText: /goal (active|paused|complete|stalled|backing|budget|parked|waiting)/ }).first().waitFor({ state: 'detached', timeout: 15000 })
    .catch(async () => { throw new Error(`the Sessions view still shows a goal after Clear Goal: ${(await row.first().innerText()).replace(/\s+/g, ' ')}`); });
});

test('Heartbeats: Add Heartbeat… names a bad schedule and shows the daemon\'s refusal; one every 2s is delivered, listed and deleted', async (t) => {
  const TASK = 'chase a goal';
  const id = (await daemonSession(TASK)).id;
  const input = page.locator('.quick-input-widget input');
  const beats = () => JSON.parse(execFileSync(process.env.ARBOR_BIN, ['heartbeats', id, '--json'], { env: process.env, encoding: 'utf8', timeout: 20000 })).heartbeats ?? [];
  const add = async (schedule) => {
    await rowAction(TASK, 'Add Heartbeat…');
    await expectVisible(page.locator('.quick-input-widget', { hasText: 'What should the session be told on each beat?' }), '"Add Heartbeat…" did not ask for the instruction', 10000);
    await input.fill('look at the build');
    await page.keyboard.press('Enter');
    await expectVisible(page.locator('.quick-input-widget', { hasText: 'When: "every 10m"' }), '"Add Heartbeat…" did not ask for the schedule', 10000);
    await input.fill(schedule);
  };
  await page.keyboard.press('Escape');
  await add('every 10q');
  await expectVisible(page.locator('.quick-input-widget', { hasText: 'schedule "every 10q": want "every 10m" (an interval of at least 1s) or a cron expression' }),
    'a bad schedule is not named while it is typed', 10000);
  await input.fill('*/15 * * 13 *');
  await page.keyboard.press('Enter');
  await expectVisible(page.locator('.notifications-toasts', { hasText: 'field 4 (month) "13"' }), 'the daemon\'s refusal of the cron expression is not shown', 15000);
  assert.deepEqual(beats(), []);

  await add('every 2s');
  await page.keyboard.press('Enter');
  await expectVisible(page.locator('.notifications-toasts', { hasText: /heartbeat hb\w+ on chase a goal, every 2s: next due/ }), 'no notification says the heartbeat was added', 15000);
  let list = beats();
  assert.equal(list.length, 1, JSON.stringify(list));
  assert.deepEqual([list[0].every, list[0].instruction, list[0].scheduled], ['2s', 'look at the build', true]);
  const hid = list[0].id;
  list = await until('the heartbeat was never delivered', 20000, () => { const l = beats(); return l[0]?.delivered >= 1 && l; });
  t.diagnostic(`heartbeat ${hid}: ${list[0].delivered}/${list[0].ticks} delivered`);

  await rowAction(TASK, 'Heartbeats');
  const item = page.locator('.quick-input-list .monaco-list-row', { hasText: `${hid} · every 2s` });
  await expectVisible(item, 'the heartbeat list does not show the heartbeat', 10000);
  await expectVisible(item.filter({ hasText: /next due \d\d:\d\d:\d\d · \d+\/\d+ runs delivered · \d+ pending/ }), 'the list does not show its next due time, runs and pending count', 5000);
  await page.screenshot({ path: SHOT.replace(/\.png$/, '-heartbeats.png') }).catch(() => undefined);
  await page.keyboard.press('Escape');

  await page.keyboard.press('F1');
  await input.fill('>Arbor: Delete Heartbeat…');
  await expectVisible(page.locator('.quick-input-list .monaco-list-row', { hasText: 'Arbor: Delete Heartbeat…' }), 'the palette does not list "Arbor: Delete Heartbeat…"', 10000);
  await page.keyboard.press('Enter');
  await expectVisible(item, '"Delete Heartbeat…" does not offer the heartbeat', 10000);
  await item.first().click();
  const dialog = page.locator('.monaco-dialog-box', { hasText: `delete heartbeat ${hid}` });
  await expectVisible(dialog, '"Delete Heartbeat…" did not ask first', 10000);
  await dialog.locator('.monaco-button', { hasText: /^Delete$/ }).click();
  await expectVisible(page.locator('.notifications-toasts', { hasText: `deleted heartbeat ${hid}` }), 'no notification says the heartbeat was deleted', 15000);
  assert.deepEqual(beats(), []);
});
