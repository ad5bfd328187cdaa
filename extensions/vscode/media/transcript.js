// The live transcript webview. It only builds DOM from the operations the extension posts
// (src/transcriptModel.ts chooses every word): append entries, stream a cell's output, end a
// cell. Text goes in as text nodes, never as HTML. Loaded under a nonce CSP; no remote resources.
(function () {
  'use strict';
  const vscode = acquireVsCodeApi();
  const entries = document.getElementById('entries');
  const title = document.getElementById('title');
  const about = document.getElementById('about');
  const count = document.getElementById('count');
  /** callId → the parts of its cell entry. */
  let cells = new Map();
  let shown = 0;

  function el(tag, cls, text) {
    const n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text !== undefined && text !== '') n.textContent = text;
    return n;
  }

  function button(label, cls, msg, tip) {
    const b = el('button', cls, label);
    b.type = 'button';
    if (tip) b.title = tip;
    b.addEventListener('click', ev => { ev.stopPropagation(); vscode.postMessage(msg); });
    return b;
  }

  function block(cls, summary, text, open) {
    const d = el('details', cls);
    d.open = open;
    const s = el('summary', '', summary);
    const pre = el('pre', 'body');
    if (text) pre.textContent = text;
    d.append(s, pre);
    return { d, s, pre };
  }

  function entry(e) {
    const n = el('div', 'entry s-' + e.style);
    n.id = 'e' + e.seq;
    n.dataset.seq = String(e.seq);
    n.dataset.type = e.type;
    const head = el('div', 'head');
    head.append(el('span', 'label', e.label));
    if (e.text && e.style !== 'user' && e.style !== 'assistant') head.append(el('span', 'line', e.text));
    const acts = el('span', 'actions');
    for (const a of e.actions || []) {
      acts.append(button(a.label, 'act act-' + a.kind, { type: 'action', action: a }, a.kind === 'diff' ? 'Open the diff of this turn' : 'Open its transcript'));
    }
    acts.append(button('fork', 'fork', { type: 'fork', seq: e.seq }, 'Fork from here: a new session from the state at event #' + e.seq));
    head.append(acts, el('span', 'meta', '#' + e.seq + (e.time ? ' · ' + e.time : '')));
    n.append(head);
    if (e.text && (e.style === 'user' || e.style === 'assistant')) n.append(el('div', 'text', e.text));
    if (e.note) n.append(el('div', 'note', e.note));
    if (e.details) n.append(block('details', 'more', e.details, false).d);
    if (e.style === 'cell') {
      const code = block('code', 'code', e.code || '', true);
      if (!e.code) code.d.classList.add('empty');
      const out = block('output', 'output', '', true);
      out.d.classList.add('empty');
      n.append(code.d, out.d);
      cells.set(e.callId, { n, out, streamed: '', status: el('span', 'status', '') });
      head.insertBefore(cells.get(e.callId).status, acts);
    }
    return n;
  }

  function cellOf(id) {
    return cells.get(id);
  }

  function apply(ops) {
    const nearEnd = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
    const frag = document.createDocumentFragment();
    for (const o of ops) {
      if (o.op === 'entry') { frag.append(entry(o.entry)); shown++; continue; }
      const c = cellOf(o.callId);
      if (!c) continue;
      if (o.op === 'start') {
        c.n.classList.add('running');
        c.status.textContent = 'running…';
      } else if (o.op === 'output') {
        const span = el('span', o.stream === 'stderr' ? 'stderr' : 'stdout', o.text);
        span.dataset.seq = String(o.seq);
        c.out.pre.append(span);
        c.streamed += o.text;
        if (o.truncated) c.out.pre.append(el('span', 'truncated', '\n… (output cut: the log keeps the first part; the cell\'s result below is what the model saw)\n'));
        c.out.d.classList.remove('empty');
        c.out.s.textContent = 'output (streaming)';
      } else if (o.op === 'finish') {
        c.n.classList.remove('running');
        c.n.classList.add(o.status === 'ok' ? 'ok' : 'failed');
        c.n.dataset.finished = String(o.seq);
        c.status.textContent = o.status + (o.meta ? ' · ' + o.meta : '');
        // The result is the authoritative (bounded) output; streamed text that says the same stays.
        if (o.output !== c.streamed) c.out.pre.textContent = o.output;
        if (o.error) c.out.pre.append(el('span', 'stderr', (o.output ? '\n' : '') + o.error));
        if (o.extra) c.out.pre.append(el('span', 'extra', '\n' + o.extra));
        c.out.s.textContent = 'output';
        c.out.d.classList.toggle('empty', !o.output && !o.error && !o.extra);
        cells.delete(o.callId);
      }
    }
    entries.append(frag);
    count.textContent = shown + ' entries';
    document.body.dataset.lastSeq = String(lastSeq(ops));
    if (nearEnd) window.scrollTo(0, document.body.scrollHeight);
  }

  let last = 0;
  function lastSeq(ops) {
    for (const o of ops) if (o.seq !== undefined) last = Math.max(last, o.seq); else if (o.entry) last = Math.max(last, o.entry.seq);
    return last;
  }

  document.getElementById('collapse').addEventListener('click', () => {
    const open = document.getElementById('collapse').dataset.open !== 'true';
    document.querySelectorAll('details.code, details.output').forEach(d => { d.open = open; });
    document.getElementById('collapse').dataset.open = String(open);
    document.getElementById('collapse').textContent = open ? 'collapse cells' : 'expand cells';
  });

  window.addEventListener('message', ev => {
    const m = ev.data;
    if (m.type === 'reset') {
      entries.textContent = '';
      cells = new Map();
      shown = 0;
      last = 0;
      title.textContent = m.title;
      about.textContent = m.about || '';
    } else if (m.type === 'about') {
      title.textContent = m.title;
      about.textContent = m.about || '';
    } else if (m.type === 'ops') {
      apply(m.ops);
      if (m.done) document.body.dataset.complete = 'true';
    }
  });
  vscode.postMessage({ type: 'ready' });
}());
