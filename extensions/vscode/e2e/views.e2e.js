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
const path = require('node:path');
const { chromium } = require('playwright-core');

const RUN = process.env.E2E_RUN;
const PORT = Number(process.env.E2E_PORT || 18089);
const SHOTS = path.dirname(process.env.E2E_SHOT || path.join(RUN || '.', 'x.png'));
const WS = RUN && path.join(RUN, 'ws-views');
const BIN = process.env.ARBOR_BIN;
const figures = [];
let server, browser, page;

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
  const ff = await transcriptFrame(`fork of ${s.id.slice(0, 8)} at event ${seq}`);
  await ff.waitForSelector('.entry[data-type="forked"]', { timeout: 20000 });
  assert.match(await ff.locator('.entry[data-type="forked"] .line').innerText(), new RegExp(`^from ${s.id.slice(0, 8)} at event ${seq} `));
  await shot('fork');
});
test('streamed output: a cell\'s prints reach the webview while it runs (latency p50)', async (t) => {
  const TASK = 'view streamed output';
  await run(TASK);
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
  await f.waitForSelector('.s-cell.running span.stdout', { timeout: 40000 });
  await shot('streaming');
  await f.waitForSelector('.s-cell[data-finished]', { timeout: 40000 });
  const { seen, finished } = await f.evaluate(() => ({ seen: window.__seen, finished: window.__finished }));
  const before = seen.filter(c => c.t < finished);
  assert.ok(before.length >= 10, `only ${before.length} output chunks reached the webview before the cell ended`);
  const lat = [];
  for (const c of before) for (const m of c.text.matchAll(/tick (\d+\.\d+)/g)) lat.push(c.t - Number(m[1]) * 1000);
  lat.sort((a, b) => a - b);
  assert.ok(lat.length >= 20, `only ${lat.length} ticks were streamed`);
  const p = q => lat[Math.min(lat.length - 1, Math.floor(q * lat.length))].toFixed(0);
  figures.push(`streamed output latency, print → webview DOM: p50 ${p(0.5)} ms, p90 ${p(0.9)} ms, max ${p(1)} ms (${lat.length} prints, ${before.length} chunks; the daemon batches a cell's output per ~100 ms)`);
  t.diagnostic(figures.at(-1));
  // The finished cell's output is the whole of what it printed.
  const text = await f.locator('.s-cell').first().locator('details.output pre').innerText();
  assert.equal(text.trim().split('\n').length, 40, text);
});
