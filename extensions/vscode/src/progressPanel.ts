// The cost–progress chart: a webview per session tree drawing what the subtree spent (tokens,
// cost) against its verified progress (checkpoints, checks passed) over time, from arbor/progress
// of the session and its descendants. Drawn with uPlot, loaded from the extension's own
// node_modules under a nonce CSP (no CDN); redrawn when the tree's sessions record new points.
import * as crypto from 'crypto';
import * as vscode from 'vscode';
import * as P from './protocol';
import { ArborClient } from './client';
import { SessionStore, sessionTitle } from './sessions';
import { mergeProgress, progressEvents, subtree } from './progressModel';

export const progressViewType = 'arbor.progressChart';

class Chart {
  private ready = false;
  private timer: NodeJS.Timeout | undefined;
  private loading: Promise<void> | undefined;
  private again = false;
  ids: string[] = [];
  private lastSeqs = '';

  constructor(readonly root: string, readonly panel: vscode.WebviewPanel, private readonly client: ArborClient, private readonly store: SessionStore) {}

  onReady(): void {
    this.ready = true;
    void this.load();
  }

  /** Loads again soon (events and tree updates come in bursts). */
  schedule(ms = 400): void {
    this.timer ??= setTimeout(() => { this.timer = undefined; void this.load(); }, ms);
  }

  /** The tree's sessions changed: reload when one of them has new events. */
  onTree(): void {
    const ids = subtree(this.root, id => this.store.children(id).map(c => c.id));
    const seqs = ids.map(id => `${id}:${this.store.get(id)?.lastSeq ?? 0}`).join(',');
    if (seqs !== this.lastSeqs) { this.lastSeqs = seqs; this.schedule(); }
  }

  private load(): Promise<void> {
    if (this.loading) { this.again = true; return this.loading; }
    this.loading = (async () => {
      try {
        do {
          this.again = false;
          await this.fetch();
        } while (this.again);
      } finally {
        this.loading = undefined;
      }
    })();
    return this.loading;
  }

  private async fetch(): Promise<void> {
    if (!this.ready) return;
    this.ids = subtree(this.root, id => this.store.children(id).map(c => c.id));
    const results = await Promise.all(this.ids.map(async id => {
      const s = this.store.get(id);
      const title = s ? sessionTitle(s, 30) : id.slice(0, 8);
      try {
        return { session: id, title, points: (await this.client.progress({ session: id })).points ?? [] };
      } catch {
        return { session: id, title, points: [] };
      }
    }));
    const s = this.store.get(this.root);
    const chart = mergeProgress(results);
    void this.panel.webview.postMessage({ type: 'data', title: s ? sessionTitle(s, 200) : this.root, ...chart });
  }

  onHidden(): void {
    this.ready = false;
  }
}

export class ProgressPanels implements vscode.Disposable {
  private readonly charts = new Map<string, Chart>();

  constructor(private readonly client: ArborClient, private readonly store: SessionStore, private readonly root: vscode.Uri) {
    store.onDidChange(() => { for (const c of this.charts.values()) c.onTree(); });
  }

  open(s: P.Session): void {
    const held = this.charts.get(s.id);
    if (held) { held.panel.reveal(undefined, false); return; }
    const media = vscode.Uri.joinPath(this.root, 'media');
    const uplot = vscode.Uri.joinPath(this.root, 'node_modules', 'uplot', 'dist');
    const panel = vscode.window.createWebviewPanel(progressViewType, `Progress: ${sessionTitle(s, 30)}`, vscode.ViewColumn.Active, {
      enableScripts: true, localResourceRoots: [media, uplot],
    });
    const c = new Chart(s.id, panel, this.client, this.store);
    this.charts.set(s.id, c);
    panel.webview.html = html(panel.webview, media, uplot);
    panel.webview.onDidReceiveMessage((m: { type: string }) => { if (m.type === 'ready') c.onReady(); });
    panel.onDidChangeViewState(e => { if (!e.webviewPanel.visible) c.onHidden(); });
    panel.onDidDispose(() => this.charts.delete(s.id));
    c.onTree();
  }

  /** Arbor: Show Cost–Progress Chart, on a session row (its id) or asking for the session. */
  register(session: (arg: string | undefined, title: string) => Promise<P.Session | undefined>, showError: (e: unknown) => void): vscode.Disposable[] {
    const r = (id: string, fn: (arg: string | undefined) => Promise<unknown>) =>
      vscode.commands.registerCommand(id, (arg: string | undefined) => fn(arg).catch(showError));
    return [
      r('arbor.progressChart', async arg => { const s = await session(arg, 'Chart the progress of which session tree?'); if (s) this.open(s); }),
    ];
  }

  /** An event of a session: the charts holding it reload when it may have added a point. */
  onEvent(e: P.Event): void {
    if (!progressEvents.has(e.type)) return;
    for (const c of this.charts.values()) if (c.ids.includes(e.session)) c.schedule();
  }

  dispose(): void {
    for (const c of this.charts.values()) c.panel.dispose();
  }
}

function html(webview: vscode.Webview, media: vscode.Uri, uplot: vscode.Uri): string {
  const nonce = crypto.randomBytes(16).toString('base64');
  const u = (base: vscode.Uri, f: string) => webview.asWebviewUri(vscode.Uri.joinPath(base, f));
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src ${webview.cspSource}; font-src ${webview.cspSource}; img-src ${webview.cspSource} data:; script-src 'nonce-${nonce}';">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="${u(uplot, 'uPlot.min.css')}">
<link rel="stylesheet" href="${u(media, 'progress.css')}">
<title>Progress</title></head>
<body>
<header><h1 id="title">Progress</h1><span id="summary" class="summary"></span></header>
<section><h2>Spend of the session tree</h2><div id="spend" class="chart"></div></section>
<section><h2>Verified progress</h2><div id="progress" class="chart"></div></section>
<section><h2>Points</h2><table id="points"><thead><tr><th>time</th><th>session</th><th>kind</th><th>status</th><th class="num">tokens</th><th class="num">cost</th><th>detail</th></tr></thead><tbody></tbody></table></section>
<script nonce="${nonce}" src="${u(uplot, 'uPlot.iife.min.js')}"></script>
<script nonce="${nonce}" src="${u(media, 'progress.js')}"></script>
</body></html>`;
}
