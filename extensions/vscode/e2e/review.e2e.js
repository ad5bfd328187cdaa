// Real VS Code (code-server) + headless Chromium: the extension installed from the .vsix that
// `make vsix` builds (code-server --install-extension, as the README says) into a FRESH profile
// with NO arbor.path, the binary installed where the README puts it (~/.local/bin/arbor of the
// test's HOME, not on PATH); a session works; the port an unsandboxed kernel listens on is never
// auto-forwarded while a control listener started at the same time is. Then review by hunk in the
// Source Control view and the diff editor's CodeLenses, checked with the git CLI on the user's
// branch and on the session's branch, and the UX fixes. Run by scripts/e2e.sh (E2E_RUN, E2E_VSIX).
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const { chromium } = require('playwright-core');

const R = path.join(process.env.E2E_RUN || '', 'review');
const WS = path.join(R, 'ws');
const HOME = path.join(R, 'home');
const SHOTS = path.join(R, 'shots');
const BIN = process.env.ARBOR_BIN;
let server, browser, page, fake, control, env, port;

const POEM = Array.from({ length: 30 }, (_, i) => `line ${i + 1}`).join('\n') + '\n';
// Turn 1 of "edit the poem" changes three separate places of poem.txt (three hunks) and adds notes.txt.
const script = {
  rules: [
    { when: { task: 'edit the poem', turn: 1 },
      code: "p = open('poem.txt').read().split('\\n')\np[1] = 'LINE TWO'\np[14] = 'LINE FIFTEEN'\np[27] = 'LINE TWENTY-EIGHT'\n"
        + "open('poem.txt', 'w').write('\\n'.join(p))\nopen('notes.txt', 'w').write('notes\\n')\nprint('edited')" },
    // A parent and its child change conflict.txt apart: the parent writes base, the child (spawned
    // from the parent's branch) child, then the parent, told "now conflict", writes parent.
    // logo.bin, binary, conflicts the same way: it is settled by taking a side whole.
    { when: { task: 'parent work', turn: 1 }, code: "open('conflict.txt', 'w').write('base\\n')\nopen('logo.bin', 'wb').write(b'\\0base')\nprint('base')" },
    { when: { task: 'child work', turn: 1 }, code: "open('conflict.txt', 'w').write('child\\n')\nopen('logo.bin', 'wb').write(b'\\0child')\nprint('child')" },
    { when: { last: 'now conflict' }, code: "open('conflict.txt', 'w').write('parent\\n')\nopen('logo.bin', 'wb').write(b'\\0parent')\nprint('parent')" },
  ],
  default: { text: 'done' },
};

function shot(name) {
  return page.screenshot({ path: path.join(SHOTS, `review-${name}.png`) }).catch(e => console.log('screenshot failed:', e.message));
}

function git(...args) {
  return execFileSync('git', ['-C', WS, ...args], { encoding: 'utf8', env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' } }).trim();
}

function arbor(...args) {
  return execFileSync(BIN, args, { cwd: WS, env, encoding: 'utf8', timeout: 20000 });
}

function waitHttp(url, ms) {
  const end = Date.now() + ms;
  return new Promise((resolve, reject) => {
    const once = () => http.get(url, r => { r.resume(); resolve(); })
      .on('error', () => (Date.now() > end ? reject(new Error(`code-server did not answer ${url} within ${ms} ms`)) : setTimeout(once, 200)));
    once();
  });
}

function freePort() {
  return new Promise(resolve => { const s = require('node:net').createServer().listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); }); });
}

/** Starts a process and resolves to it and the first line it prints. */
function firstLine(cmd, args, opts) {
  const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...opts });
  let out = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${cmd} printed nothing in 10 s`)), 10000);
    p.stdout.on('data', d => {
      out += d;
      if (out.includes('\n')) { clearTimeout(timer); resolve({ proc: p, line: out.split('\n')[0].trim() }); }
    });
    p.on('exit', c => { clearTimeout(timer); reject(new Error(`${cmd} exited ${c}`)); });
  });
}

before(async () => {
  assert.ok(process.env.E2E_RUN && process.env.E2E_VSIX && BIN, 'run through scripts/e2e.sh (E2E_RUN, E2E_VSIX, ARBOR_BIN unset)');
  fs.rmSync(R, { recursive: true, force: true });
  for (const d of ['ext', 'data/User', 'home', 'state', 'sock', 'xdg/state', 'xdg/data', 'xdg/config/arbor', 'shots']) fs.mkdirSync(path.join(R, d), { recursive: true });
  fs.chmodSync(path.join(R, 'sock'), 0o700);
  // The README's install step for the binary, into the test's HOME: nothing puts it on PATH.
  execFileSync('install', ['-D', '-m', '0755', BIN, path.join(HOME, '.local', 'bin', 'arbor')]);
  // Unsandboxed kernels (the user's own config may say so) listen on loopback TCP: the port case.
  fs.writeFileSync(path.join(R, 'xdg/config/arbor/config.json'), JSON.stringify({ sandbox: 'off' }));
  // A fresh profile: no arbor.path.
  fs.writeFileSync(path.join(R, 'data/User/settings.json'), JSON.stringify({
    'workbench.startupEditor': 'none', 'security.workspace.trust.enabled': false, 'chat.disableAIFeatures': true,
    'telemetry.telemetryLevel': 'off', 'workbench.secondarySideBar.defaultVisibility': 'hidden', 'workbench.tips.enabled': false,
    'extensions.ignoreRecommendations': true,
  }, null, 2));
  fs.mkdirSync(WS, { recursive: true });
  git('init', '-q', '-b', 'main');
  git('config', 'user.email', 'test@example.invalid');
  git('config', 'user.name', 'arbor test');
  fs.writeFileSync(path.join(WS, 'poem.txt'), POEM);
  git('add', '.');
  git('commit', '-q', '-m', 'init');

  fs.writeFileSync(path.join(R, 'script.json'), JSON.stringify(script, null, 2));
  fake = await firstLine(BIN, ['fake-model', '--script', path.join(R, 'script.json'), '--addr', '127.0.0.1:0'], { env: process.env });
  // No arbor on the PATH code-server (and so the extension host) gets.
  const PATH = (process.env.PATH || '').split(':').filter(d => d && !fs.existsSync(path.join(d, 'arbor'))).join(':');
  env = {
    ...process.env, PATH, HOME,
    ARBOR_SOCKET: path.join(R, 'sock', 'arbor.sock'), ARBOR_STATE_DIR: path.join(R, 'state'),
    ARBOR_MODEL_BASE_URL: fake.line, ARBOR_MODEL: 'scripted',
    XDG_STATE_HOME: path.join(R, 'xdg/state'), XDG_DATA_HOME: path.join(R, 'xdg/data'), XDG_CONFIG_HOME: path.join(R, 'xdg/config'), XDG_RUNTIME_DIR: path.join(R, 'sock'),
  };
  // The README's install step for the extension.
  execFileSync('code-server', ['--install-extension', process.env.E2E_VSIX, '--extensions-dir', path.join(R, 'ext'), '--user-data-dir', path.join(R, 'data')],
    { env, stdio: 'pipe', timeout: 120000 });
  assert.ok(fs.readdirSync(path.join(R, 'ext')).some(d => d.startsWith('arbor.arbor-')), 'code-server --install-extension did not install the .vsix');

  port = await freePort();
  const log = fs.openSync(path.join(R, 'code-server.log'), 'w');
  server = spawn('code-server', [
    '--auth', 'none', '--bind-addr', `127.0.0.1:${port}`,
    '--disable-telemetry', '--disable-update-check', '--disable-workspace-trust', '--disable-getting-started-override',
    '--config', path.join(R, 'config.yaml'),
    '--extensions-dir', path.join(R, 'ext'), '--user-data-dir', path.join(R, 'data'),
    WS,
  ], { stdio: ['ignore', log, log], env, detached: true });
  await waitHttp(`http://127.0.0.1:${port}/healthz`, 60000);
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium', headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
  page = await browser.newPage({ viewport: { width: 1400, height: 850 } });
  page.on('pageerror', e => console.log('[pageerror]', e.message));
});

after(async () => {
  if (page) await shot('final');
  if (browser) await browser.close().catch(() => undefined);
  if (server) {
    // The whole process group: an extension host that outlived code-server would start
    // `arbor lsp` (and so a daemon) again after the daemon is stopped below.
    try { process.kill(-server.pid, 'SIGTERM'); } catch { /* gone */ }
    await new Promise(r => { if (server.exitCode !== null) r(); else { server.once('exit', r); setTimeout(r, 5000); } });
    try { process.kill(-server.pid, 'SIGKILL'); } catch { /* gone */ }
  }
  try { execFileSync(BIN, ['daemon', 'stop'], { env, stdio: 'pipe', timeout: 15000 }); } catch { /* not running */ }
  for (const p of [fake?.proc, control?.proc]) if (p && p.exitCode === null) p.kill();
  console.log(`review e2e screenshots: ${SHOTS}/review-*.png`);
});

async function expectVisible(locator, what, timeout) {
  try {
    await locator.first().waitFor({ state: 'visible', timeout });
  } catch {
    await shot(`fail-${what.replace(/[^\w]+/g, '-').slice(0, 60)}`);
    throw new Error(`${what} (not visible after ${timeout} ms)`);
  }
}

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

const input = () => page.locator('.quick-input-widget input');

async function palette(command) {
  // F1 right after a dialog or a closing quick pick can land on a widget on its way out: try again.
  for (let i = 0; ; i++) {
    await page.keyboard.press('Escape');
    await page.keyboard.press('F1');
    try {
      await input().first().waitFor({ state: 'visible', timeout: 5000 });
      await input().fill('>' + command, { timeout: 5000 });
      break;
    } catch (e) {
      if (i === 2) { await shot('fail-palette'); throw new Error(`F1 did not open a usable command palette for "${command}": ${e.message.split('\n')[0]}`); }
      await page.locator('.monaco-workbench').click({ position: { x: 700, y: 300 } }).catch(() => undefined);
    }
  }
  await expectVisible(page.locator('.quick-input-list .monaco-list-row', { hasText: command }), `the command palette does not list "${command}"`, 10000);
  await page.keyboard.press('Enter');
}

async function newTask(task) {
  await palette('Arbor: New Task');
  await expectVisible(page.locator('.quick-input-widget', { hasText: 'What should the agent do?' }), '"Arbor: New Task" did not ask for the task', 10000);
  await input().fill(task);
  await page.keyboard.press('Enter');
}

function sessionsRow(task) {
  return page.locator('.pane', { has: page.locator('.pane-header', { hasText: 'Sessions' }) }).locator('.monaco-list-row', { hasText: task });
}

/** The daemon's record of the session with task, from `arbor ls --json`. */
function daemonSession(task) {
  const list = JSON.parse(arbor('ls', '--json'));
  const s = (Array.isArray(list) ? list : list.sessions ?? []).find(x => x.task === task);
  assert.ok(s, `arbor ls --json has no session "${task}"`);
  return s;
}

/** TCP ports in LISTEN state on this machine, with the command line of the process holding each. */
function listening() {
  const out = execFileSync('ss', ['-ltnpH'], { encoding: 'utf8' });
  const ports = [];
  for (const line of out.split('\n')) {
    const m = /:(\d+)\s+\S+\s+users:\(\("[^"]*",pid=(\d+)/.exec(line);
    if (!m) continue;
    let cmd = '';
    try { cmd = fs.readFileSync(`/proc/${m[2]}/cmdline`, 'utf8').replace(/\0/g, ' '); } catch { /* gone */ }
    ports.push({ port: Number(m[1]), pid: Number(m[2]), cmd });
  }
  return ports;
}

test('a fresh profile with no arbor.path finds ~/.local/bin/arbor and a session works', async (t) => {
  const t0 = Date.now();
  await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(WS)}`);
  await expectVisible(page.locator('.monaco-workbench'), 'the VS Code workbench did not load', 90000);
  await expectVisible(page.locator('.statusbar-item', { hasText: 'Arbor:' }),
    'the Arbor status bar item never appeared: the extension did not find the binary or `arbor lsp` did not connect', 90000);
  t.diagnostic(`workbench + extension + daemon ready after ${Date.now() - t0} ms`);
  assert.equal(await page.locator('.notifications-toasts', { hasText: 'cannot find the arbor binary' }).count(), 0);


  await page.locator('.activitybar [aria-label^="Arbor"]').first().click();
  await newTask('edit the poem');
  const row = sessionsRow('edit the poem');
  await expectVisible(row.filter({ hasText: 'idle' }).filter({ hasText: 'arbor/' }), 'the session "edit the poem" never showed as idle on its branch', 60000);
  await expectVisible(page.locator('.statusbar-item', { hasText: 'Arbor: none running' }), 'the status bar does not say that nothing runs once the session is idle', 10000);
  await shot('started');

  // The extension host's log says where the binary came from.
  const logs = [];
  const walk = d => { for (const e of fs.readdirSync(d, { withFileTypes: true })) { const p = path.join(d, e.name); if (e.isDirectory()) walk(p); else if (e.name === 'Arbor.log') logs.push(p); } };
  walk(path.join(R, 'data', 'logs'));
  const text = logs.map(f => fs.readFileSync(f, 'utf8')).join('\n');
  assert.match(text, new RegExp(`arbor binary: ${HOME.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/\\.local/bin/arbor \\(found at an install location\\)`), text.slice(0, 2000));
});

test('no port of an Arbor kernel is auto-forwarded; a control listener started with it is', async (t) => {
  // The workbench forwards ports that appear after its first scan; those listening before it
  // are taken as the machine's own. So the Ports view is open and scanning first, then the
  // control listener and a new kernel start.
  await palette('Ports: Focus on Ports View');
  const ports = page.locator('.pane-body .monaco-list-row, .ports-view .monaco-list-row');
  await page.waitForTimeout(6000);
  const state = path.join(R, 'state');
  const isKernel = p => /arbor_(kernel|forkserver)\.py/.test(p.cmd) && p.cmd.includes(state);
  const before = new Set(listening().filter(isKernel).map(p => p.pid));
  control = await firstLine('python3', ['-c', "import socket,time\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen()\nprint(s.getsockname()[1],flush=True)\ntime.sleep(900)"], {});
  // A new session: its kernel is unsandboxed here, so ipykernel's IOPub pipe listens on loopback TCP.
  await newTask(`arbor-test-py ${Buffer.from("print('a kernel for the port scan')").toString('hex')}`);
  // Every kernel port counts (all started after the workbench's first scan); one at least is
  // the new session's, unless it took a kernel the pool had warmed before.
  await expectVisible(sessionsRow('arbor-test-py').filter({ hasText: 'idle' }), 'the port-scan session never went idle', 60000);
  const kernels = await until('no kernel of the test daemon listens on a TCP port', 20000, () => {
    const k = listening().filter(isKernel);
    return k.length ? k : false;
  });
  t.diagnostic(`kernel ports: ${kernels.map(k => `${k.port}${before.has(k.pid) ? "" : " (new)"}`).join(", ")}; control port ${control.line}`);
  // The workbench scans every 2 s or more; the control port shows up, so the scan runs and sees new listeners.
  await expectVisible(page.locator('.monaco-list-row', { hasText: control.line }), `the control listener on port ${control.line} was never auto-forwarded: the scan did not run`, 60000);
  // Two more scans after that.
  await page.waitForTimeout(6000);
  await shot('ports');
  const rows = (await ports.allInnerTexts()).map(s => s.replace(/\s+/g, ' '));
  t.diagnostic(`Ports view: ${rows.join(' | ')}`);
  for (const k of kernels) {
    assert.equal(await page.locator('.monaco-list-row', { hasText: new RegExp(`\\b${k.port}\\b`) }).count(), 0, `the kernel's port ${k.port} was forwarded: ${rows.join(' | ')}`);
  }
  assert.equal(await page.locator('.notifications-toasts', { hasText: /ports have been automatically forwarded/ }).count(), 0);
});

/** Right-click on the session row, then the context menu item called label. */
async function rowAction(task, label) {
  const row = sessionsRow(task);
  await expectVisible(row, `the session "${task}" is not listed`, 10000);
  await row.first().click({ button: 'right' });
  const item = page.locator('.monaco-menu .action-item', { hasText: label });
  await expectVisible(item, `the session's context menu has no "${label}"`, 10000);
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
    await menu.first().waitFor({ state: 'detached', timeout: 5000 }).catch(() => { throw new Error(`the context menu stayed open after choosing "${label}"`); });
  }
}

function show(rev, file) {
  try { return execFileSync('git', ['-C', WS, 'show', `${rev}:${file}`], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }); } catch { return null; }
}

const lens = text => page.locator('.monaco-diff-editor .codelens-decoration a', { hasText: text });
const scmRow = name => page.locator('.scm-view .monaco-list-row', { hasText: name });
const toast = text => page.locator('.notifications-toasts', { hasText: text });

async function closeToasts() {
  for (const b of await page.locator('.notifications-toasts .codicon-notifications-clear, .notifications-toasts .codicon-close').all()) await b.click().catch(() => undefined);
}

test('Review Changes: hunks accepted and rejected from the diff editor\'s CodeLenses, a file and the rest from Source Control; a dirty user file is named', async (t) => {
  const s = daemonSession('edit the poem');
  const line = (text, n) => text.split('\n')[n - 1];
  assert.equal(line(show(s.branch, 'poem.txt'), 2), 'LINE TWO');

  await rowAction('edit the poem', 'Review Changes');
  await expectVisible(page.locator('.scm-view', { hasText: 'Arbor: edit the poem' }), 'the Source Control view does not show the session', 15000);
  await expectVisible(scmRow('poem.txt'), 'Source Control does not list poem.txt', 10000);
  await expectVisible(scmRow('notes.txt'), 'Source Control does not list notes.txt', 10000);
  await shot('scm');

  await scmRow('poem.txt').first().click();
  await expectVisible(page.locator('.monaco-diff-editor .view-lines', { hasText: 'LINE FIFTEEN' }), 'clicking poem.txt did not open its diff', 15000);
  await expectVisible(lens('Accept hunk'), 'the diff editor shows no "Accept hunk" CodeLens', 15000);
  assert.equal(await lens('Accept hunk').count(), 3, 'poem.txt has three hunks, each with its lens');
  assert.equal(await lens('Reject hunk').count(), 3);
  await shot('diff-lenses');

  // The user's own uncommitted edit of poem.txt: the accept is refused and names the file.
  fs.writeFileSync(path.join(WS, 'poem.txt'), POEM.replace('line 30', 'my own line 30'));
  await lens('Accept hunk').first().click();
  await expectVisible(toast('refused: uncommitted changes in poem.txt'), 'an accept over the user\'s dirty poem.txt does not name it', 15000);
  await shot('dirty');
  assert.equal(git('rev-list', '--count', 'main'), '1', 'the refused accept moved main');
  git('checkout', '--', 'poem.txt');
  await closeToasts();

  // Accept the first hunk: main gets LINE TWO only.
  await lens('Accept hunk').first().click();
  await until('main did not get the accepted hunk', 15000, () => line(show('main', 'poem.txt'), 2) === 'LINE TWO');
  let main = show('main', 'poem.txt');
  assert.equal(line(main, 15), 'line 15');
  assert.equal(line(main, 28), 'line 28');
  assert.equal(show('main', 'notes.txt'), null);
  await until('the lenses did not follow the remaining diff (two hunks left)', 15000, async () => await lens('Accept hunk').count() === 2);

  // Reject the next one (line 15): reverted on the session's branch as a checkpoint; main untouched.
  const before = git('rev-parse', s.branch);
  await lens('Reject hunk').first().click();
  await until('the session\'s branch did not take line 15 back', 15000, () => line(show(s.branch, 'poem.txt'), 15) === 'line 15');
  assert.notEqual(git('rev-parse', s.branch), before, 'no new checkpoint on the session\'s branch');
  assert.equal(line(show(s.branch, 'poem.txt'), 28), 'LINE TWENTY-EIGHT', 'the reject took more than its hunk');
  assert.equal(show('main', 'poem.txt'), main, 'the reject changed the user\'s branch');
  await until('one hunk should be left', 15000, async () => await lens('Accept hunk').count() === 1);
  await shot('after-hunks');

  // Reject notes.txt from its Source Control row.
  await scmRow('notes.txt').first().hover();
  await scmRow('notes.txt').first().locator('.action-label[aria-label="Reject File"]').click();
  await until('the session\'s branch still has notes.txt', 15000, () => show(s.branch, 'notes.txt') === null);
  await scmRow('notes.txt').first().waitFor({ state: 'detached', timeout: 15000 }).catch(() => { throw new Error('notes.txt is still listed after its reject'); });

  // The whole patch is a read-only document: no dirty tab.
  await palette('Arbor: Review Diff');
  await page.locator('.quick-input-list .monaco-list-row', { hasText: 'edit the poem' }).first().click();
  await expectVisible(page.locator('.quick-input-list .monaco-list-row', { hasText: 'Whole patch' }), 'the diff review offers no whole patch', 10000);
  await page.locator('.quick-input-list .monaco-list-row', { hasText: 'Whole patch' }).first().click();
  await expectVisible(page.locator('.monaco-editor .view-lines', { hasText: '+LINE TWENTY-EIGHT' }), 'the whole patch does not show the remaining hunk', 15000);
  await expectVisible(page.locator('.tab.active', { hasText: 'edit the poem.diff' }), 'the patch tab is not named after the session', 5000);
  assert.equal(await page.locator('.tab.active.dirty').count(), 0, 'the whole patch opened as a dirty document');
  assert.ok(!(await page.locator('.monaco-editor .view-lines', { hasText: 'LINE TWO' }).count()), 'the accepted hunk is still in the remaining patch');
  await shot('patch');

  // Accept the rest from the provider's title: confirmed in the modal.
  if (!(await page.locator('.scm-view').first().isVisible())) await page.locator('.activitybar [aria-label^="Source Control"]').first().click();
  const provider = page.locator('.scm-view .monaco-list-row', { hasText: 'Arbor: edit the poem' });
  await provider.first().hover();
  await provider.first().locator('.action-label[aria-label="Accept All Remaining Changes"]').click();
  const dialog = page.locator('.monaco-dialog-box', { hasText: 'accept all remaining changes of edit the poem' });
  await expectVisible(dialog, 'Accept All did not ask first', 10000);
  await dialog.locator('.monaco-button', { hasText: /^Accept all$/ }).click();
  await until('main did not get the rest', 15000, () => line(show('main', 'poem.txt'), 28) === 'LINE TWENTY-EIGHT');
  main = show('main', 'poem.txt');
  assert.deepEqual([line(main, 2), line(main, 15), line(main, 28)], ['LINE TWO', 'line 15', 'LINE TWENTY-EIGHT']);
  assert.equal(show('main', 'notes.txt'), null, 'the rejected notes.txt reached main');
  await scmRow('poem.txt').first().waitFor({ state: 'detached', timeout: 15000 }).catch(() => { throw new Error('poem.txt is still listed after Accept All'); });
  await shot('accepted-all');
  t.diagnostic(`main: ${git('log', '--oneline', 'main').split('\n').join(' | ')}`);
});

test('Merge into Parent: a conflict lists its files, each opens its versions and an editable result; Retry Merge merges the resolution', async (t) => {
  await page.locator('.activitybar [aria-label^="Arbor"]').first().click();
  await newTask('parent work');
  await expectVisible(sessionsRow('parent work').filter({ hasText: 'idle' }), 'the session "parent work" never showed as idle', 60000);
  const parent = daemonSession('parent work');
  await until('the parent\'s branch has no conflict.txt', 15000, () => show(parent.branch, 'conflict.txt') === 'base\n');

  await rowAction('parent work', 'Spawn Subagent');
  await expectVisible(page.locator('.quick-input-widget', { hasText: 'New subagent of parent work' }), 'Spawn Subagent did not ask for the task', 10000);
  await input().fill('child work');
  await page.keyboard.press('Enter');
  await until('the child did not go idle', 60000, () => { try { return daemonSession('child work').state === 'idle'; } catch { return false; } });
  const child = daemonSession('child work');
  const name = child.name || child.task; // the row's title: a subagent's name when the daemon gave one
  // The parent's row shows its child (expand it when the view kept it collapsed).
  const prow = sessionsRow('parent work').first();
  if (await prow.getAttribute('aria-expanded') === 'false') await prow.locator('.monaco-tl-twistie').click();
  await expectVisible(page.locator('.monaco-list-row[aria-level="2"]', { hasText: name }).filter({ hasText: 'idle' }), 'the child is not shown idle under its parent', 15000);
  await until('the child\'s branch has no conflict.txt = child', 15000, () => show(child.branch, 'conflict.txt') === 'child\n');

  await rowAction('parent work', 'Send Message');
  await input().fill('now conflict');
  await page.keyboard.press('Enter');
  await until('the parent did not write conflict.txt = parent', 60000, () => show(parent.branch, 'conflict.txt') === 'parent\n' && daemonSession('parent work').state === 'idle');
  const parentHead = git('rev-parse', parent.branch);

  await rowAction(name, 'Merge into Parent');
  const dialog = page.locator('.monaco-dialog-box', { hasText: `merge ${name} (${child.branch}) into its parent parent work` });
  await expectVisible(dialog, 'Merge into Parent did not ask first', 10000);
  await dialog.locator('.monaco-button', { hasText: /^Merge$/ }).click();
  await expectVisible(toast('stopped on conflicts in conflict.txt'), 'the conflict toast does not name conflict.txt first', 15000);
  const view = page.locator('.pane', { has: page.locator('.pane-header', { hasText: 'Merge Conflicts' }) });
  await expectVisible(view.locator('.monaco-list-row', { hasText: 'conflict.txt' }), 'the Merge Conflicts view does not list conflict.txt', 15000);
  assert.equal(git('rev-parse', parent.branch), parentHead, 'the conflicted merge moved the parent');
  // Room for both rows: the panes below and above are folded (a small pane renders only the rows it shows).
  for (const name of ['Harness Proposals', 'Harness']) {
    const header = page.locator('.pane', { has: page.locator('.pane-header .title', { hasText: new RegExp(`^${name}$`) }) }).locator('.pane-header').first();
    if (await header.getAttribute('aria-expanded', { timeout: 2000 }).catch(() => null) === 'true') await header.click();
  }
  // The binary file has no text to edit: its row says so, and Take Theirs settles it.
  const logo = view.locator('.monaco-list-row', { hasText: 'logo.bin' });
  await expectVisible(logo.filter({ hasText: 'binary' }), 'the Merge Conflicts view does not list logo.bin as binary', 15000);
  await logo.first().click({ button: 'right' });
  const takeTheirs = page.locator('.monaco-menu .action-item', { hasText: 'Take Theirs' });
  await expectVisible(takeTheirs, 'a conflicted file\'s context menu has no "Take Theirs"', 10000);
  await chooseMenuItem(takeTheirs, 'Take Theirs');
  await expectVisible(logo.filter({ hasText: 'taking theirs' }), 'logo.bin does not say the child\'s version is taken', 10000);
  await shot('conflicts');

  await view.locator('.monaco-list-row', { hasText: 'conflict.txt' }).first().click();
  const result = page.locator('.editor-group-container').first();
  await expectVisible(result.locator('.view-lines', { hasText: '<<<<<<<' }), 'the result does not start from git\'s merge with markers', 15000);
  await expectVisible(page.locator('.monaco-diff-editor .view-lines', { hasText: 'parent' }), 'the parent\'s version is not shown beside the result', 15000);
  await expectVisible(page.locator('.monaco-diff-editor .view-lines', { hasText: 'child' }), 'the child\'s version is not shown beside the result', 15000);
  await shot('merge-result');

  // The user resolves it in the result (unsaved is fine) and retries.
  await result.locator('.view-lines').first().click();
  await page.keyboard.press('Control+A');
  await page.keyboard.type('resolved\n');
  await expectVisible(view.locator('.monaco-list-row', { hasText: 'resolved' }), 'the conflict row does not say the file is resolved', 10000);
  await view.hover();
  await view.locator('.action-label[aria-label="Retry Merge"]').click();
  await expectVisible(toast(`merged ${name} into its parent`), 'no notification says the merge was done', 20000);
  await until('the parent\'s branch does not hold the resolution', 15000, () => show(parent.branch, 'conflict.txt') === 'resolved\n');
  assert.equal(show(parent.branch, 'logo.bin'), '\0child', 'logo.bin on the parent\'s branch is not the child\'s version taken');
  await shot('merged');
  t.diagnostic(`parent ${parent.branch}: ${git('log', '--oneline', '-3', parent.branch).split('\n').join(' | ')}`);
});
