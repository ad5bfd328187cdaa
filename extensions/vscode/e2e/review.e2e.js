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
  await page.keyboard.press('Escape');
  await page.keyboard.press('F1');
  await expectVisible(input(), 'F1 did not open the command palette', 10000);
  await input().fill('>' + command);
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

  // The listener the port scan must find: started after the workbench's first scan, like a kernel.
  control = await firstLine('python3', ['-c', "import socket,time\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen()\nprint(s.getsockname()[1],flush=True)\ntime.sleep(900)"], {});

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
  // The session's kernel is unsandboxed here, so ipykernel's IOPub pipe listens on loopback TCP.
  const state = path.join(R, 'state');
  const kernels = await until('no kernel of the test daemon listens on a TCP port', 20000, () => {
    const k = listening().filter(p => /arbor_(kernel|forkserver)\.py/.test(p.cmd) && p.cmd.includes(state));
    return k.length ? k : false;
  });
  t.diagnostic(`kernel ports: ${kernels.map(k => k.port).join(', ')}; control port ${control.line}`);

  await palette('Ports: Focus on Ports View');
  const ports = page.locator('.pane-body .monaco-list-row, .ports-view .monaco-list-row');
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
