// Real VS Code (code-server) + headless Chromium: the extension's views of a session. The live
// transcript webview (messages, cells with code and output, the subagent as a link, a turn's
// diff, fork from an event, output streamed while a cell runs), the harness panel (versions, their
// diff and trailers, rollback) and the cost–progress chart; and the figures: attach → rendered
// for a 5,000-event session, streamed output latency, the extension host's memory with 200
// sessions. Run by scripts/e2e.sh (E2E_FILES=views for this file alone), after or without
// sessions.e2e.js: it opens a repository of its own, on the same daemon.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { chromium } = require('playwright-core');

const RUN = process.env.E2E_RUN;
const PORT = Number(process.env.E2E_PORT || 18089);
const SHOTS = path.dirname(process.env.E2E_SHOT || path.join(RUN || '.', 'x.png'));
const WS = RUN && path.join(RUN, 'ws-views');
const BIN = process.env.ARBOR_BIN;
const figures = [];
// The two long figures (a 5,000-event session, 200 sessions) are benchmarks: `make bench-editors`
// runs them (ARBOR_E2E_FIGURES=1); the test run keeps the streamed-output latency.
const FIGURES = process.env.ARBOR_E2E_FIGURES === '1';
const benchOnly = FIGURES ? {} : { skip: 'a benchmark: make bench-editors measures it' };
/** A figure, with the machine's load when it was measured (other work shares the CPUs). */
const figure = text => { figures.push(`${text} [load average ${os.loadavg()[0].toFixed(1)} on ${os.cpus().length} CPUs]`); return figures.at(-1); };
let server, browser, page;
let turnSession; // the session of the first test, charted later

function shot(name) {
  const file = path.join(SHOTS, `arbor-e2e-views-${name}.png`);
  return page.screenshot({ path: file }).then(() => file, e => console.log('screenshot failed:', e.message));
}

function waitHttp(url, ms) {
  const end = Date.now() + ms;
  return new Promise((resolve, reject) => {
    const once = () => http.get(url, r => { r.resume(); resolve(); })
      .on('error', () => (Date.now() > end ? reject(new Error(`code-server did not answer ${url} within ${ms} ms`)) : setTimeout(once, 200)));
    once();
  });
}

function arbor(...args) {
  return execFileSync(BIN, args, { cwd: WS, env: process.env, encoding: 'utf8', timeout: 60000 });
}

/** The daemon's sessions of this test's repository (`arbor ls --json`). */
function sessions() {
  const list = JSON.parse(arbor('ls', '--json'));
  return Array.isArray(list) ? list : list.sessions ?? [];
}

function sessionByTask(task) {
  return sessions().find(x => x.task === task);
}

/** Polls fn until it returns a truthy value; fails with what, and the last value, after ms. */
async function until(what, ms, fn, every = 250) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    last = await fn();
    if (last) return last;
    if (Date.now() > end) throw new Error(`${what} (after ${ms} ms; last: ${JSON.stringify(last)})`);
    await new Promise(r => setTimeout(r, every));
  }
}

async function expectVisible(locator, what, timeout) {
  try {
    await locator.first().waitFor({ state: 'visible', timeout });
  } catch {
    throw new Error(`${what} (not visible after ${timeout} ms)`);
  }
}

/** Starts a task from the CLI (detached) and waits until the daemon lists it. */
async function run(task) {
  arbor('run', task, '--detach', '--dir', WS);
  return until(`the daemon does not list "${task}"`, 20000, () => sessionByTask(task));
}

const sessionsPane = () => page.locator('.pane', { has: page.locator('.pane-header', { hasText: 'Sessions' }) });

/**
 * The transcript webview whose page matches: VS Code puts each webview in its own frames; ours
 * is the one whose #title (or #about) holds the text.
 */
async function transcriptFrame(what, ms = 30000) {
  return until(`no transcript webview shows ${what}`, ms, async () => {
    for (const f of page.frames()) {
      const head = await f.evaluate(() => {
        const t = document.getElementById('title');
        return t && document.getElementById('entries') ? `${t.textContent}\n${document.getElementById('about').textContent}` : null;
      }).catch(() => null);
      if (head && head.includes(what)) return f;
    }
    return null;
  }, 50);
}

before(async () => {
  assert.ok(RUN && BIN, 'run through scripts/e2e.sh (E2E_RUN, ARBOR_BIN unset)');
  // A repository of this test's own: a big turn needs many steps; idle kernels stop soon (200 sessions).
  fs.rmSync(WS, { recursive: true, force: true });
  fs.mkdirSync(WS, { recursive: true });
  const git = (...a) => execFileSync('git', ['-C', WS, ...a], { stdio: 'pipe' });
  git('init', '-q', '-b', 'main');
  git('config', 'user.email', 'test@example.invalid');
  git('config', 'user.name', 'arbor test');
  fs.writeFileSync(path.join(WS, 'calc.py'), 'def add(a, b):\n    return a + b\n');
  fs.writeFileSync(path.join(WS, 'arbor.json'), JSON.stringify({ maxTurnSteps: 2000, idleTimeout: '20s' }, null, 2) + '\n');
  git('add', '.');
  git('commit', '-q', '-m', 'init');

  const log = fs.openSync(path.join(RUN, 'code-server-views.log'), 'w');
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
  page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.on('pageerror', e => console.log('[pageerror]', e.message));
  page.on('console', m => { if (m.type() === 'error' && /Content Security Policy|Refused/.test(m.text())) console.log('[csp]', m.text()); });
  await page.goto(`http://127.0.0.1:${PORT}/?folder=${encodeURIComponent(WS)}`);
  await expectVisible(page.locator('.monaco-workbench'), 'the VS Code workbench did not load', 90000);
  await expectVisible(page.locator('.statusbar-item', { hasText: 'Arbor' }), 'the Arbor status bar item never appeared', 90000);
  await page.locator('.activitybar [aria-label^="Arbor"]').first().click();
});

after(async () => {
  if (figures.length) console.log('\n--- figures (views.e2e.js) ---\n' + figures.join('\n') + '\n');
  if (page) await shot('final');
  if (browser) await browser.close().catch(() => undefined);
  if (server) {
    server.kill('SIGTERM');
    await new Promise(r => { if (server.exitCode !== null) r(); else { server.once('exit', r); setTimeout(r, 5000); } });
  }
});

/** Clicks the session's row in the Sessions view (which opens its transcript). */
async function clickRow(text) {
  const row = sessionsPane().locator('.monaco-list-row', { hasText: text });
  await expectVisible(row, `the Sessions view does not list "${text}"`, 30000);
  await row.first().click();
}

test('the transcript: messages, cells with code and output, the subagent as a link, a turn\'s diff, fork from an event', async (t) => {
  const TASK = 'view a turn with a subagent';
  const s = await run(TASK);
  turnSession = s;
  await until('the session never became idle', 60000, () => sessionByTask(TASK)?.state === 'idle');
  await clickRow(TASK);
  const f = await transcriptFrame(TASK);
  await f.waitForSelector('.s-cell.ok', { timeout: 20000 });
  await f.waitForSelector('.entry.s-checkpoint', { timeout: 20000 });
  const cell = f.locator('.s-cell').first();
  assert.equal(await cell.locator('details.code pre').innerText(), "h = await rlm('view the kid', name='kid')\nopen('view.txt', 'w').write('v\\n')\nprint('wrote view.txt')");
  assert.match(await cell.locator('details.output pre').innerText(), /wrote view\.txt/);
  assert.match(await cell.locator('.status').innerText(), /^ok · \[1\] · /);
  assert.equal(await f.locator('.s-user .text').first().innerText(), TASK);
  assert.equal(await f.locator('.s-assistant .text').last().innerText(), 'the sum is two');
  const states = await f.locator('.s-quiet[data-type="state_changed"] .label').allInnerTexts();
  assert.ok(states.includes('→ running') && states.at(-1) === '→ idle', states.join(', '));
  // Collapsing: the code block is a <details>; clicking its summary hides the code.
  await cell.locator('details.code summary').click();
  assert.equal(await cell.locator('details.code').getAttribute('open'), null);
  await cell.locator('details.code summary').click();
  await shot('transcript');

  // The turn's diff from the checkpoint: a read-only patch document adding view.txt.
  await f.locator('.entry.s-checkpoint .act-diff').first().click();
  await expectVisible(page.locator('.tab', { hasText: /turn 1 of view a turn/ }), 'the checkpoint\'s diff did not open a document', 20000);
  await expectVisible(page.locator('.monaco-editor .view-lines', { hasText: '+v' }), 'the turn\'s diff does not add view.txt\'s line', 10000);
  await expectVisible(page.locator('.monaco-editor .view-lines', { hasText: 'added' }), 'the turn\'s diff does not list view.txt as added', 10000);
  await shot('turn-diff');

  // The subagent is a link to its transcript.
  await page.locator('.tab', { hasText: `Transcript: ${TASK.slice(0, 20)}` }).first().click();
  const f2 = await transcriptFrame(TASK);
  await f2.locator('.entry.s-child .act-open').first().click();
  const kid = await transcriptFrame('kid');
  await kid.waitForSelector('.s-assistant', { timeout: 20000 });
  assert.match(await kid.locator('#about').innerText(), /arbor\//);
  await shot('child');

  // Fork from here: hover the checkpoint, click its fork button; the fork's transcript opens.
  await page.locator('.tab', { hasText: `Transcript: ${TASK.slice(0, 20)}` }).first().click();
  const f3 = await transcriptFrame(TASK);
  const cp = f3.locator('.entry.s-checkpoint').first();
  const seq = Number(await cp.getAttribute('data-seq'));
  await cp.hover();
  await cp.locator('button.fork').click();
  const fork = await until('the daemon lists no fork of the session at the checkpoint', 30000,
    () => sessions().find(x => x.forkOf === s.id && x.forkSeq === seq));
  t.diagnostic(`forked ${s.id.slice(0, 8)} at event ${seq} as ${fork.id.slice(0, 8)}`);
  const ff = await transcriptFrame(`fork of ${s.id.slice(0, 8)} @${seq}`);
  await ff.waitForSelector('.entry[data-type="forked"]', { timeout: 20000 });
  assert.match(await ff.locator('.entry[data-type="forked"] .line').innerText(), new RegExp(`^from ${s.id.slice(0, 8)} at event ${seq} `));
  await shot('fork');
});
test('streamed output: a cell\'s prints reach the webview while it runs (latency p50)', async (t) => {
  const TASK = 'view streamed output';
  const s = await run(TASK);
  await clickRow(TASK);
  const f = await transcriptFrame(TASK);
  // Record when each output chunk reaches the DOM, and when the cell ends.
  await f.evaluate(() => {
    window.__seen = [];
    new MutationObserver(muts => {
      const now = Date.now();
      for (const m of muts) {
        for (const n of m.addedNodes) if (n.nodeType === 1 && n.matches('span.stdout')) window.__seen.push({ t: now, text: n.textContent });
        if (m.type === 'attributes' && m.attributeName === 'data-finished') window.__finished = now;
      }
    }).observe(document.getElementById('entries'), { subtree: true, childList: true, attributes: true, attributeFilter: ['data-finished'] });
  });
  // The cell waits for the file go in its worktree, so that it prints while the transcript watches.
  await f.waitForSelector('.s-cell.running', { timeout: 90000 });
  fs.writeFileSync(path.join(s.worktree, 'go'), '');
  await f.waitForSelector('.s-cell.running span.stdout', { timeout: 30000 });
  await shot('streaming');
  await f.waitForSelector('.s-cell[data-finished]', { timeout: 60000 });
  const { seen, finished } = await f.evaluate(() => ({ seen: window.__seen, finished: window.__finished }));
  const before = seen.filter(c => c.t < finished);
  assert.ok(before.length >= 10, `only ${before.length} output chunks reached the webview before the cell ended`);
  const lat = [];
  for (const c of before) for (const m of c.text.matchAll(/tick (\d+\.\d+)/g)) lat.push(c.t - Number(m[1]) * 1000);
  lat.sort((a, b) => a - b);
  assert.ok(lat.length >= 20, `only ${lat.length} ticks were streamed`);
  const p = q => lat[Math.min(lat.length - 1, Math.floor(q * lat.length))].toFixed(0);
  figure(`streamed output latency, print → webview DOM: p50 ${p(0.5)} ms, p90 ${p(0.9)} ms, max ${p(1)} ms (${lat.length} prints, ${before.length} chunks; the daemon batches a cell's output per ~100 ms)`);
  t.diagnostic(figures.at(-1));
  // The finished cell's output is the whole of what it printed.
  const text = await f.locator('.s-cell').first().locator('details.output pre').innerText();
  assert.equal(text.trim().split('\n').length, 40, text);
});

/** The pane of the Arbor view container titled title. */
const pane = title => page.locator('.pane', { has: page.locator('.pane-header .title', { hasText: new RegExp(`^${title}$`) }) });

/** Right-click on a row, then the context menu item called label (the keyboard when the click was taken for the right-click's end). */
async function contextMenu(row, label) {
  await row.click({ button: 'right' });
  const item = page.locator('.monaco-menu .action-item', { hasText: label });
  await expectVisible(item, `the context menu has no "${label}"`, 10000);
  await item.first().click();
  const menu = page.locator('.monaco-menu');
  if (await menu.first().waitFor({ state: 'detached', timeout: 1500 }).then(() => false, () => true)) {
    await item.first().hover();
    await page.keyboard.press('Enter');
  }
}

async function expand(row) {
  if (await row.getAttribute('aria-expanded') !== 'true') await row.locator('.monaco-tl-twistie').click();
}

test('the harness panel: a session-scope note\'s versions, each one\'s diff and trailers, rollback to the first', async (t) => {
  const TASK = 'view the harness note';
  const s = await run(TASK);
  await until('the session never became idle', 60000, () => sessionByTask(TASK)?.state === 'idle');
  const h = pane('Harness');
  await expectVisible(h, 'there is no Harness view', 10000);
  if (await h.locator('.pane-header').getAttribute('aria-expanded') !== 'true') await h.locator('.pane-header').click();
  // Room for the tree (rows out of a small pane's sight are not in the DOM): the Sessions and
  // Harness Proposals views fold away while it is read, and unfold at the end.
  const folded = [];
  for (const title of ['Sessions', 'Harness Proposals']) {
    const header = pane(title).locator('.pane-header');
    if (await header.getAttribute('aria-expanded') === 'true') { await header.click(); folded.push(header); }
  }
  t.after(async () => { for (const header of folded) if (await header.getAttribute('aria-expanded') !== 'true') await header.click(); });
  const sessionsNode = h.locator('.monaco-list-row[aria-level="1"]', { hasText: 'Sessions' });
  await expectVisible(sessionsNode, 'the Harness view has no Sessions node', 20000);
  await expand(sessionsNode.first());
  const scope = h.locator('.monaco-list-row[aria-level="2"]', { hasText: `Session: ${TASK}` });
  await expectVisible(scope, 'the Harness view does not list the session\'s scope', 20000);
  await expand(scope.first());
  await expectVisible(h.locator('.monaco-list-row[aria-level="3"]', { hasText: 'Notes' }), 'the session scope shows no Notes', 20000);
  const entry = h.locator('.monaco-list-row[aria-level="4"]', { hasText: 'plan' });
  await expectVisible(entry, 'the session scope does not list the note "plan"', 10000);
  assert.match(await entry.first().innerText(), /plan\s*The plan/);
  await entry.first().click();
  await expectVisible(page.locator('.monaco-editor .view-lines', { hasText: 'second version' }), 'the entry\'s document does not show its body', 15000);
  await expand(entry.first());
  const versions = h.locator('.monaco-list-row[aria-level="5"]');
  await until('the note does not show two versions', 15000, async () => (await versions.count()) === 2);
  const texts = (await versions.allInnerTexts()).map(x => x.replace(/\s+/g, ' '));
  t.diagnostic(`versions: ${texts.join(' | ')}`);
  assert.match(texts[0], /current · [0-9a-f]{10} · agent in [0-9a-f]{8}, turn 1/);
  assert.match(texts[1], /[0-9a-f]{10} · agent in [0-9a-f]{8}, turn 1/);
  await shot('harness');

  // The first version's diff: the note created, with the commit's trailers above it.
  await versions.nth(1).click();
  await expectVisible(page.locator('.monaco-editor .view-lines', { hasText: '+first version' }), 'the first version\'s diff does not add its body', 15000);
  await expectVisible(page.locator('.monaco-editor .view-lines', { hasText: '# author:   agent' }), 'the version\'s document does not show its trailers', 10000);
  await expectVisible(page.locator('.monaco-editor .view-lines', { hasText: 'nothing (its first version)' }), 'the first version is not compared with nothing', 10000);
  await shot('harness-version');
  const first = JSON.parse(arbor('harness', 'history', 'note', 'plan', '--scope', 'session', '--session', s.id, '--json'));
  const list = Array.isArray(first) ? first : first.versions;
  assert.equal(list.length, 2);

  // Roll back to the first version (confirmed): the daemon's entry says "first version" again.
  const dialog = page.locator('.monaco-dialog-box', { hasText: 'roll note plan back to version' });
  // A menu click the workbench took for the end of the right-click chooses nothing: open it again.
  for (let attempt = 1; ; attempt++) {
    await contextMenu(versions.nth(1), 'Roll Back Harness Entry to This Version');
    if (await dialog.first().waitFor({ state: 'visible', timeout: 5000 }).then(() => true, () => false)) break;
    await page.keyboard.press('Escape');
    if (attempt === 3) await expectVisible(dialog, '"Roll Back" did not ask first', 1);
  }
  await dialog.locator('.monaco-button', { hasText: /^Roll Back$/ }).click();
  await expectVisible(page.locator('.notifications-toasts', { hasText: 'rolled note plan back to' }), 'no notification says the note was rolled back', 15000);
  const now = JSON.parse(arbor('harness', 'show', 'note', 'plan', '--scope', 'session', '--session', s.id, '--json'));
  assert.equal(now.body.trim(), 'first version');
  await until('the tree does not show the rollback as a third version', 15000, async () => (await versions.count()) === 3);
  await shot('harness-rolled-back');
});

test('the cost–progress chart of a session tree: drawn with uPlot, and redrawn when the goal adds points', async (t) => {
  assert.ok(turnSession, 'the first test did not run');
  const row = sessionsPane().locator('.monaco-list-row', { hasText: 'view a turn with a subagent' }).first();
  await contextMenu(row, 'Show Cost–Progress Chart');
  const f = await until('no chart webview opened', 30000, async () => {
    for (const fr of page.frames()) {
      const title = await fr.evaluate(() => document.getElementById('spend') ? document.getElementById('title').textContent : null).catch(() => null);
      if (title && title.includes('view a turn with a subagent')) return fr;
    }
    return null;
  }, 100);
  await f.waitForFunction(() => Number(document.body.dataset.points || 0) >= 1, null, { timeout: 20000 });
  assert.ok(await f.locator('#spend canvas').count() >= 1, 'uPlot drew no canvas');
  assert.ok(await f.locator('#progress canvas').count() >= 1, 'uPlot drew no progress canvas');
  const before = Number(await f.evaluate(() => document.body.dataset.points));
  const sum0 = await f.locator('#summary').innerText();
  t.diagnostic(`before the goal: ${sum0}`);
  assert.match(sum0, /^\d+ checkpoints?, 0 checks passed · /);
  // A goal with an end condition: its turns add goal, checkpoint and verified points.
  arbor('goal', turnSession.id, 'write done.txt', '--until', 'test -f done.txt');
  await f.waitForFunction(n => Number(document.body.dataset.points || 0) > n && /1 check passed/.test(document.getElementById('summary').textContent), before, { timeout: 60000 })
    .catch(async () => { throw new Error(`the chart was not redrawn with the goal's check: ${await f.locator('#summary').innerText()}`); });
  const sum1 = await f.locator('#summary').innerText();
  t.diagnostic(`after the goal: ${sum1}`);
  const rows = await f.locator('#points tbody tr').allInnerTexts();
  assert.ok(rows.some(r => /verified\s+passed/.test(r)), rows.join('\n'));
  assert.ok(await f.locator('.u-legend', { hasText: 'tokens' }).count() >= 1, 'the chart has no legend with tokens');
  await shot('chart');
});

test('a pending proposal\'s review document: Accept and Reject above its first line; Accept applies it', async (t) => {
  const TASK = 'write the team rules (views)';
  const s = await run(TASK);
  await until('the session never became idle', 90000, () => ['idle', 'inactive'].includes(sessionByTask(TASK)?.state));
  const header = pane('Harness Proposals').locator('.pane-header');
  if (await header.getAttribute('aria-expanded') !== 'true') await header.click();
  const row = pane('Harness Proposals').locator('.monaco-list-row', { hasText: 'create note team-rule' });
  await expectVisible(row, 'the Harness Proposals view does not list the kernel\'s note team-rule', 30000);
  await row.first().click();
  const editor = page.locator('.monaco-editor .view-lines', { hasText: '(pending)' });
  await expectVisible(editor, 'clicking the proposal did not open its review document', 20000);
  const id = /#\s+proposal:\s+(p[0-9a-f]+)\s+\(pending\)/.exec(await editor.first().innerText())?.[1];
  assert.ok(id, 'no proposal id in the document');
  const lens = page.locator('.codelens-decoration a', { hasText: `Accept harness proposal ${id}` });
  await expectVisible(lens, 'the review document offers no "Accept harness proposal" above its first line', 15000);
  await expectVisible(page.locator('.codelens-decoration a', { hasText: `Reject harness proposal ${id}` }), 'no "Reject" lens', 5000);
  await shot('proposal-lenses');
  await lens.first().click();
  const dialog = page.locator('.monaco-dialog-box', { hasText: 'accept create note team-rule' });
  await expectVisible(dialog, 'Accept did not ask to confirm', 10000);
  await dialog.locator('.monaco-button', { hasText: /^Accept$/ }).click();
  await expectVisible(page.locator('.notifications-toasts', { hasText: `applied ${id}` }), 'no notification says the proposal was applied', 15000);
  const all = JSON.parse(arbor('proposals', '--status', 'all', '--json', '--dir', WS));
  assert.equal(all.find(p => p.id === id)?.status, 'applied');
  assert.ok(s.id);
});

/** The seq of a session's last event (`arbor log ID --json`: one event a line). */
function lastSeq(id) {
  const lines = arbor('log', id, '--json').trim().split('\n');
  return JSON.parse(lines[lines.length - 1]).seq;
}

test('figure: attach → a 5,000-event session\'s transcript fully rendered', benchOnly, async (t) => {
  // The fixture's "many cells" task: 1,000 cells printing to stdout and stderr, 5 events each.
  const TASK = 'view many cells';
  const s = await run(TASK);
  await until('the 1,000-cell session did not finish', 900000, () => {
    const x = sessionByTask(TASK);
    return x && x.state !== 'running' && x.state !== 'admitted' && (x.usage?.modelCalls ?? 0) >= 1001 && x;
  }, 3000);
  const done = { lastSeq: lastSeq(s.id) };
  assert.ok(done.lastSeq >= 5000, `the session has ${done.lastSeq} events`);
  t.diagnostic(`${TASK}: ${done.lastSeq} events`);
  await page.keyboard.press('Escape');
  const t0 = Date.now();
  await clickRow(TASK);
  const f = await transcriptFrame(TASK, 60000);
  const page0 = Date.now() - t0; // the webview's page is up (its script ran)
  await f.waitForFunction(n => Number(document.body.dataset.lastSeq || 0) >= n, done.lastSeq, { timeout: 120000, polling: 50 });
  const ms = Date.now() - t0;
  const nodes = await f.evaluate(() => document.getElementById('entries').children.length);
  figure(`attach → transcript fully rendered: ${ms} ms for ${done.lastSeq} events (${nodes} entries in the webview; from the click on the session to the last event's entry in the DOM; the webview's page was up after ${page0} ms)`);
  t.diagnostic(figures.at(-1));
  assert.equal(await f.locator('.entry[data-seq="1"]').count(), 1, 'the first event is not in the transcript');
  assert.ok(s.id);
  await f.evaluate(() => window.scrollTo(0, document.body.scrollHeight));
  await shot('big-session');
});

/** Resident memory (kB) of this test's VS Code extension host: a descendant of the code-server it started. */
function extensionHostRSS() {
  const kids = new Map();
  for (const d of fs.readdirSync('/proc').filter(x => /^\d+$/.test(x))) {
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (!kids.has(ppid)) kids.set(ppid, []);
      kids.get(ppid).push(Number(d));
    } catch { /* gone */ }
  }
  const todo = [server.pid];
  while (todo.length) {
    const pid = todo.pop();
    for (const c of kids.get(pid) ?? []) {
      const cmd = fs.readFileSync(`/proc/${c}/cmdline`, 'utf8').replace(/\0/g, ' ');
      if (/extensionHost/.test(cmd)) return Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${c}/status`, 'utf8'))[1]);
      todo.push(c);
    }
  }
  throw new Error('no extension host process under the code-server this test started');
}

test('figure: the extension host\'s memory with 200 sessions in the tree', benchOnly, async (t) => {
  const TASK = 'view many subagents';
  const n0 = sessions().length;
  const before = extensionHostRSS();
  const root = await run(TASK);
  await until('the 199 subagents did not all finish their turn', 600000, () => {
    const all = sessions().filter(x => x.parent === root.id);
    return all.length === 199 && all.every(x => x.state === 'idle' || x.state === 'inactive') && all;
  }, 2000);
  const total = sessions().length;
  // The tree shows the root with its children (reveal the last one: the view holds them all).
  const rootRow = sessionsPane().locator('.monaco-list-row', { hasText: TASK });
  await expectVisible(rootRow, 'the root of the 199 subagents is not listed', 30000);
  await until('the tree did not take in the 200 sessions', 30000, async () => (await sessionsPane().locator('.monaco-list-row', { hasText: /leaf\d+/ }).count()) > 0);
  await new Promise(r => setTimeout(r, 3000));
  const after = extensionHostRSS();
  figure(`extension host RSS: ${(before / 1024).toFixed(0)} MB with ${n0} sessions → ${(after / 1024).toFixed(0)} MB with ${total} sessions in the tree (+${((after - before) / 1024).toFixed(1)} MB for ${total - n0} more)`);
  t.diagnostic(figures.at(-1));
  assert.ok(total >= 200, `${total} sessions`);
  await shot('many-sessions');
});
