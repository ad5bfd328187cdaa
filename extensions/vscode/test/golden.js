// The golden event logs recorded from real sessions (extensions/test/golden/*.jsonl: one arbor/event
// params object a line), and Session records built from them as the daemon builds its own.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const dir = path.join(__dirname, '..', '..', 'test', 'golden');

/** File name (without .jsonl) → its events. */
function loadGolden() {
  const out = {};
  for (const f of fs.readdirSync(dir).filter(f => f.endsWith('.jsonl')).sort()) {
    out[f.replace(/\.jsonl$/, '')] = fs.readFileSync(path.join(dir, f), 'utf8').split('\n').filter(Boolean).map(l => JSON.parse(l));
  }
  return out;
}

const zero = () => ({ modelCalls: 0, inputTokens: 0, cachedInputTokens: 0, outputTokens: 0, costUSD: 0, kernelExecs: 0, messages: 0, humanInterventions: 0, retries: 0,
  harnessEdits: 0, refineCalls: 0, refineInputTokens: 0, refineOutputTokens: 0, refineCostUSD: 0 });

/** The arbor/sessions record of a session whose log is events: what it is, its state, its usage. */
function sessionFromLog(events) {
  const c = events.find(e => e.type === 'session_created').data;
  const usage = zero();
  let state = 'unknown', reason;
  for (const e of events) {
    if (e.type === 'state_changed') { state = e.data.state; reason = e.data.reason; }
    if (e.type === 'assistant_message') {
      usage.modelCalls++;
      usage.inputTokens += e.data.usage.inputTokens;
      usage.cachedInputTokens += e.data.usage.cachedInputTokens || 0;
      usage.outputTokens += e.data.usage.outputTokens;
    }
    if (e.type === 'tool_finished') usage.kernelExecs++;
    if (e.type === 'harness_applied') usage.harnessEdits++;
    if (e.type === 'refined') {
      usage.refineCalls += e.data.calls;
      usage.refineInputTokens += e.data.usage.inputTokens;
      usage.refineOutputTokens += e.data.usage.outputTokens;
    }
  }
  const s = {
    id: c.id, task: c.task, state, model: c.model, branch: c.branch, worktree: c.worktree, baseCommit: c.baseCommit,
    workspace: c.workspace, created: c.created, lastSeq: events[events.length - 1].seq, usage, total: { ...usage },
  };
  for (const k of ['parent', 'name', 'forkOf', 'forkSeq']) if (c[k] !== undefined) s[k] = c[k];
  if (reason) s.error = reason;
  return s;
}

module.exports = { loadGolden, sessionFromLog };
