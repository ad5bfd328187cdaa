// Real VS Code (code-server) + headless Debian Chromium (playwright-core): the Arbor extension
// starts `arbor lsp`, "Arbor: New Task" starts a session, and the Sessions view shows it idle on
// its arbor/… branch. Run by scripts/e2e.sh, which sets E2E_* and the daemon's environment.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
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
