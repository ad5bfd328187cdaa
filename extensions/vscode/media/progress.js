// The cost–progress webview: draws the series the extension posts (src/progressModel.ts) with
// uPlot — spend (tokens, cost) above, verified progress (checkpoints, checks) below, one cursor.
(function () {
  'use strict';
  const vscode = acquireVsCodeApi();
  const css = name => getComputedStyle(document.body).getPropertyValue(name).trim();
  const colour = (name, fallback) => css(name) || fallback;
  const fg = colour('--vscode-foreground', '#ccc');
  const grid = colour('--vscode-panel-border', 'rgba(128,128,128,.3)');
  const axis = (label, scale, side, fmt) => ({
    scale, side, label, stroke: fg, grid: { stroke: grid, width: 1, show: side === 3 }, ticks: { stroke: grid },
    values: fmt ? (u, vals) => vals.map(fmt) : undefined, size: 60,
  });
  const sync = uPlot.sync('arbor-progress');
  const width = () => Math.max(320, document.body.clientWidth - 32);
  let spend, progress;

  function make() {
    const common = { width: width(), height: 240, cursor: { sync: { key: sync.key } }, legend: { live: true } };
    spend = new uPlot({
      ...common,
      scales: { x: { time: true }, tok: { auto: true, range: (u, min, max) => [0, Math.max(100, max * 1.1)] }, usd: { auto: true, range: (u, min, max) => [0, Math.max(0.01, max * 1.1)] } },
      axes: [{ stroke: fg, grid: { stroke: grid }, ticks: { stroke: grid } },
        axis('tokens', 'tok', 3, v => v >= 1000 ? (v / 1000).toFixed(v >= 10000 ? 0 : 1) + 'k' : String(v)),
        axis('cost (USD)', 'usd', 1, v => '$' + v.toFixed(v < 0.01 ? 4 : 2))],
      series: [{}, { label: 'tokens', scale: 'tok', stroke: colour('--vscode-charts-blue', '#3794ff'), width: 2, points: { show: true } },
        { label: 'cost', scale: 'usd', stroke: colour('--vscode-charts-orange', '#d18616'), width: 2, dash: [6, 4], points: { show: true },
          value: (u, v) => v == null ? '' : '$' + v.toFixed(4) }],
    }, [[], [], []], document.getElementById('spend'));
    const step = uPlot.paths.stepped({ align: 1 });
    progress = new uPlot({
      ...common,
      scales: { x: { time: true }, n: { auto: true, range: (u, min, max) => [0, Math.max(1, max + 1)] } },
      axes: [{ stroke: fg, grid: { stroke: grid }, ticks: { stroke: grid } }, axis('count', 'n', 3, v => Number.isInteger(v) ? String(v) : '')],
      series: [{},
        { label: 'checkpoints', scale: 'n', stroke: colour('--vscode-charts-green', '#89d185'), width: 2, paths: step, points: { show: true } },
        { label: 'checks passed', scale: 'n', stroke: colour('--vscode-charts-purple', '#b180d7'), width: 2, paths: step, points: { show: true } },
        { label: 'checks failed', scale: 'n', stroke: colour('--vscode-charts-red', '#f14c4c'), width: 1, dash: [4, 4], paths: step, points: { show: true } }],
    }, [[], [], [], []], document.getElementById('progress'));
  }

  function table(rows) {
    const body = document.querySelector('#points tbody');
    body.textContent = '';
    for (const r of rows) {
      const tr = document.createElement('tr');
      const td = (text, cls) => { const c = document.createElement('td'); c.textContent = String(text); if (cls) c.className = cls; tr.append(c); };
      td(r.time); td(r.session); td(r.kind); td(r.status, r.status ? 'status-' + r.status : ''); td(r.tokens, 'num'); td(r.cost, 'num'); td(r.detail, 'detail');
      body.append(tr);
    }
  }

  window.addEventListener('message', ev => {
    const m = ev.data;
    if (m.type !== 'data') return;
    document.getElementById('title').textContent = 'Progress of ' + m.title;
    document.getElementById('summary').textContent = m.summary;
    if (!spend) make();
    const s = m.series;
    spend.setData([s.x, s.tokens, s.cost]);
    progress.setData([s.x, s.checkpoints, s.passed, s.failed]);
    document.body.dataset.points = String(s.x.length);
    table(m.rows);
  });
  window.addEventListener('resize', () => { if (spend) { spend.setSize({ width: width(), height: 240 }); progress.setSize({ width: width(), height: 240 }); } });
  vscode.postMessage({ type: 'ready' });
}());
