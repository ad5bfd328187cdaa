// The transcript webview's script (media/transcript.js) on a small fake DOM: the operations of
// src/transcriptModel.ts become entries, a cell's streamed output is appended chunk by chunk,
// tool_finished keeps the streamed text when it says the same and replaces it when not, and the
// buttons post fork and action messages back. Text is always set as text, never as HTML.
'use strict';
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const vm = require('node:vm');

class Node {
  constructor(tag) { this.tagName = tag; this.children = []; this.dataset = {}; this.className = ''; this._text = ''; this.listeners = {}; this.open = false; this.parent = null; }
  get classList() {
    const self = this;
    const list = () => self.className.split(' ').filter(Boolean);
    const cl = {
      add: c => { if (!list().includes(c)) self.className = [...list(), c].join(' '); },
      remove: c => { self.className = list().filter(x => x !== c).join(' '); },
      toggle: (c, on) => { if (on ?? !list().includes(c)) cl.add(c); else cl.remove(c); },
      contains: c => list().includes(c),
    };
    return cl;
  }
  append(...ns) { for (const n of ns) { if (n.tagName === '#fragment') { for (const c of n.children) { c.parent = this; this.children.push(c); } n.children = []; } else { n.parent = this; this.children.push(n); } } }
  insertBefore(n, ref) { n.parent = this; const i = this.children.indexOf(ref); this.children.splice(i < 0 ? this.children.length : i, 0, n); }
  set textContent(t) { this.children = []; this._text = t; }
  get textContent() { return this._text + this.children.map(c => c.textContent).join(''); }
  set innerHTML(_) { throw new Error('the webview must not set HTML'); }
  addEventListener(k, fn) { (this.listeners[k] ??= []).push(fn); }
  click() { for (const fn of this.listeners.click ?? []) fn({ stopPropagation() {} }); }
  all(pred, out = []) { for (const c of this.children) { if (pred(c)) out.push(c); c.all(pred, out); } return out; }
  byClass(c) { return this.all(n => n.classList.contains(c)); }
}

function load() {
  const ids = {};
  for (const id of ['entries', 'title', 'about', 'count', 'collapse']) { ids[id] = new Node('div'); ids[id].id = id; }
  const posted = [];
  const listeners = {};
  const body = new Node('body');
  const document = {
    body, getElementById: id => ids[id],
    createElement: tag => new Node(tag),
    createDocumentFragment: () => new Node('#fragment'),
    querySelectorAll: sel => ids.entries.all(n => sel.split(',').some(s => { const [tag, cls] = s.trim().split('.'); return n.tagName === tag && n.classList.contains(cls); })),
  };
  body.scrollHeight = 0;
  const window = { innerHeight: 100, scrollY: 0, scrollTo() {}, addEventListener: (k, fn) => { listeners[k] = fn; } };
  vm.runInNewContext(fs.readFileSync(path.join(__dirname, '..', 'media', 'transcript.js'), 'utf8'),
    { document, window, acquireVsCodeApi: () => ({ postMessage: m => posted.push(JSON.parse(JSON.stringify(m))) }) });
  const send = m => listeners.message({ data: m });
  return { ids, posted, send, body };
}

const cellEntry = { seq: 7, type: 'assistant_message', time: '10:00:07', style: 'cell', label: 'cell', code: 'print(1)', callId: 'c1' };

test('the script says it is ready; entries and the header come from the messages', () => {
  const w = load();
  assert.deepEqual(w.posted, [{ type: 'ready' }]);
  w.send({ type: 'reset', title: 'add one', about: 'idle · arbor/x' });
  w.send({ type: 'ops', ops: [{ op: 'entry', entry: { seq: 1, type: 'state_changed', time: '10:00:01', style: 'quiet', label: '→ running', text: '<b>not html</b>' } }] });
  assert.equal(w.ids.title.textContent, 'add one');
  assert.equal(w.ids.about.textContent, 'idle · arbor/x');
  const [e] = w.ids.entries.children;
  assert.equal(e.className, 'entry s-quiet');
  assert.equal(e.dataset.seq, '1');
  assert.match(e.textContent, /→ running<b>not html<\/b>/);
  assert.equal(w.ids.count.textContent, '1 entries');
  assert.equal(w.body.dataset.lastSeq, '1');
});

test('a cell streams its output, then tool_finished ends it (keeping the streamed text when it matches)', () => {
  const w = load();
  w.send({ type: 'ops', ops: [{ op: 'entry', entry: cellEntry }, { op: 'start', callId: 'c1', seq: 8 }] });
  const cell = w.ids.entries.children[0];
  assert.ok(cell.classList.contains('running'));
  const out = cell.byClass('output')[0];
  assert.ok(out.classList.contains('empty'), 'an empty output block is shown');
  w.send({ type: 'ops', ops: [{ op: 'output', callId: 'c1', seq: 9, stream: 'stdout', text: '1\n' }, { op: 'output', callId: 'c1', seq: 10, stream: 'stderr', text: 'warn\n' }] });
  const pre = out.children[1];
  assert.deepEqual(pre.children.map(c => [c.className, c.textContent, c.dataset.seq]), [['stdout', '1\n', '9'], ['stderr', 'warn\n', '10']]);
  assert.ok(!out.classList.contains('empty'));
  assert.equal(out.children[0].textContent, 'output (streaming)');
  assert.equal(w.body.dataset.lastSeq, '10');
  w.send({ type: 'ops', ops: [{ op: 'finish', callId: 'c1', seq: 11, status: 'ok', meta: '[1] · 5 ms', output: '1\nwarn\n' }] });
  assert.ok(cell.classList.contains('ok') && !cell.classList.contains('running'));
  assert.equal(cell.dataset.finished, '11');
  assert.equal(pre.children.length, 2, 'the streamed chunks were replaced by the same text');
  assert.equal(cell.byClass('status')[0].textContent, 'ok · [1] · 5 ms');
});

test('a result that differs from the stream (bounded, cut) replaces it; an error and a truncation show', () => {
  const w = load();
  w.send({ type: 'ops', ops: [{ op: 'entry', entry: cellEntry }, { op: 'output', callId: 'c1', seq: 8, stream: 'stdout', text: 'a\n', truncated: true }] });
  const cell = w.ids.entries.children[0];
  const pre = cell.byClass('output')[0].children[1];
  assert.match(pre.textContent, /a\n\n… \(output cut/);
  w.send({ type: 'ops', ops: [{ op: 'finish', callId: 'c1', seq: 9, status: 'error', meta: '', output: 'a\n[… 3 lines …]\nz\n', error: 'ValueError: x', extra: 'full output: /tmp/o' }] });
  assert.ok(cell.classList.contains('failed'));
  assert.equal(pre.textContent, 'a\n[… 3 lines …]\nz\n\nValueError: x\nfull output: /tmp/o');
  // Output for a finished cell goes nowhere (its callId is done).
  w.send({ type: 'ops', ops: [{ op: 'output', callId: 'c1', seq: 10, stream: 'stdout', text: 'late' }] });
  assert.ok(!pre.textContent.includes('late'));
});

test('buttons post back: fork at the entry\'s seq, a turn\'s diff, a child\'s transcript; reset empties the page', () => {
  const w = load();
  w.send({ type: 'ops', ops: [{ op: 'entry', entry: { seq: 12, type: 'checkpoint', time: '', style: 'checkpoint', label: 'checkpoint', text: 'abc after turn 1',
    actions: [{ kind: 'diff', label: 'diff of turn 1', turn: 1 }, { kind: 'open', label: 'open kid', session: 'k1' }] } }] });
  const e = w.ids.entries.children[0];
  e.byClass('fork')[0].click();
  e.byClass('act-diff')[0].click();
  e.byClass('act-open')[0].click();
  assert.deepEqual(w.posted.slice(1), [{ type: 'fork', seq: 12 }, { type: 'action', action: { kind: 'diff', label: 'diff of turn 1', turn: 1 } },
    { type: 'action', action: { kind: 'open', label: 'open kid', session: 'k1' } }]);
  w.send({ type: 'reset', title: 't', about: '' });
  assert.equal(w.ids.entries.children.length, 0);
});
