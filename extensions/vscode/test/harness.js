// Test fixtures shared by the Node tests: a temporary git repository, the scripted model
// (`arbor fake-model`) and an environment that keeps the daemon's files inside a temp dir.
'use strict';
const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

/** A fresh temp dir with a git repo, XDG dirs and the ARBOR_* variables for an isolated daemon. */
function makeEnv() {
  // Short path: the daemon's unix socket lives here (sun_path holds 107 bytes).
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'arbor-vsc-'));
  const dirs = {};
  for (const d of ['config', 'data', 'state', 'cache', 'run', 'arbor-state', 'repo']) {
    dirs[d] = path.join(root, d);
    fs.mkdirSync(dirs[d], { recursive: true, mode: 0o700 });
  }
  const repo = dirs.repo;
  const git = (...args) => execFileSync('git', ['-C', repo, ...args], { stdio: 'pipe' });
  git('init', '-q', '-b', 'main');
  git('config', 'user.email', 'test@example.invalid');
  git('config', 'user.name', 'arbor test');
  fs.writeFileSync(path.join(repo, 'calc.py'), 'def add(a, b):\n    return a + b\n');
  git('add', '.');
  git('commit', '-q', '-m', 'init');
  const env = {
    ...process.env,
    XDG_CONFIG_HOME: dirs.config, XDG_DATA_HOME: dirs.data, XDG_STATE_HOME: dirs.state,
    XDG_CACHE_HOME: dirs.cache, XDG_RUNTIME_DIR: dirs.run,
    ARBOR_SOCKET: path.join(dirs.run, 'arbor.sock'), ARBOR_STATE_DIR: dirs['arbor-state'],
    ARBOR_KERNEL_PYTHON: process.env.ARBOR_KERNEL_PYTHON || '/usr/bin/python3',
  };
  return { root, repo, env };
}

/** Starts `arbor fake-model` on a script; resolves to { url, stop() }. */
function startFakeModel(bin, script, dir, env) {
  const file = path.join(dir, 'script.json');
  fs.writeFileSync(file, JSON.stringify(script, null, 2));
  const proc = spawn(bin, ['fake-model', '--script', file, '--addr', '127.0.0.1:0'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  proc.stderr.on('data', d => { err += d; });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { proc.kill(); reject(new Error(`arbor fake-model printed no URL in 10s: ${out}${err}`)); }, 10000);
    proc.on('exit', code => { clearTimeout(timer); reject(new Error(`arbor fake-model exited ${code}: ${out}${err}`)); });
    proc.stdout.on('data', d => {
      out += d;
      const line = out.split('\n')[0].trim();
      if (out.includes('\n') && /^https?:\/\//.test(line)) {
        clearTimeout(timer);
        proc.removeAllListeners('exit');
        resolve({ url: line, stop: () => new Promise(r => { proc.once('exit', r); proc.kill(); }) });
      }
    });
  });
}

/** Stops the isolated daemon (`arbor daemon stop` with the same ARBOR_SOCKET). */
function stopDaemon(bin, env) {
  try {
    execFileSync(bin, ['daemon', 'stop'], { env, stdio: 'pipe', timeout: 15000 });
  } catch { /* not running */ }
}

/**
 * The scripted model used by the tests: one kernel cell, then a final answer. "write team rules"
 * writes two notes to the workspace scope (proposals under its default review policy), then
 * fails its cell so that /refine has an event to cite; the refiner (its prompt starts "Propose
 * harness edits") proposes a workspace note citing the first event it was shown.
 */
const script = {
  rules: [
    { when: { task: '^Propose harness edits for the workspace scope', last: '\\[seq (\\d+) ' },
      text: '{"edits": [{"op": "create", "entry": {"kind": "note", "id": "fix-build", "title": "Fix the build first", "body": "Fix a broken build before anything else."}, '
        + '"trigger": [{{last.1}}], "rationale": "The cell failed on a broken build.", "intended": "No work on a broken build."}], "summary": "one note"}' },
    { when: { task: 'write team rules', turn: 1 },
      code: "await harness.notes.create('team-rule', 'Team rule', body='Run the tests.', scope='workspace')\n"
        + "await harness.notes.create('style-rule', 'Style rule', body='Use tabs.', scope='workspace')\n"
        + "raise RuntimeError('the build is broken')" },
    { when: { task: 'write team rules', turn: 2 }, text: 'proposed two team rules' },
    { when: { task: 'add one and one', turn: 1 }, code: "open('sum.txt', 'w').write(str(1+1) + '\\n')\nprint(1+1)" },
    { when: { task: 'add one and one', turn: 2 }, text: 'the sum is two' },
  ],
  default: { text: 'nothing scripted for this' },
};

/** Polls fn until it returns a truthy value or ms pass. */
async function waitFor(what, ms, fn) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise(r => setTimeout(r, 50));
  }
}

module.exports = { makeEnv, startFakeModel, stopDaemon, script, waitFor };
