// The live transcript webview: one panel per session, attached to the session on open and fed
// only the new events' operations (postMessage batches; the webview appends to its DOM). Its
// entries link to subagents' transcripts, open a turn's diff and fork from any event.
import * as crypto from 'crypto';
import * as vscode from 'vscode';
import * as P from './protocol';
import { ArborClient } from './client';
import { EventBuffer } from './transcript';
import { Action, Op, TranscriptModel, aboutLine, batches, turnDiffText } from './transcriptModel';
import { SessionStore, sessionTitle } from './sessions';

export const transcriptViewType = 'arbor.transcript';
export const turnDiffScheme = 'arbor-turn-diff';
/** Events per arbor/session.log page when a transcript catches up. */
const historyPage = 1000;

/** What the webview's entries ask the extension to do. */
export interface TranscriptActions {
  fork(id: string, atSeq: number): Promise<void>;
  turnDiff(id: string, turn: number): Promise<void>;
  open(id: string): Promise<void>;
}

type FromWebview = { type: 'ready' } | { type: 'fork'; seq: number } | { type: 'action'; action: Action };

class Panel {
  readonly buffer = new EventBuffer();
  private model = new TranscriptModel();
  private pending: Op[] = [];
  private ready = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(readonly id: string, readonly panel: vscode.WebviewPanel, private readonly title: () => [string, string]) {}

  /** The webview (re)loaded: it gets the whole history once, then only what is new. */
  onReady(): void {
    this.ready = true;
    this.model = new TranscriptModel();
    this.pending = [];
    const [title, about] = this.title();
    void this.panel.webview.postMessage({ type: 'reset', title, about });
    for (const b of batches(this.model.all(this.buffer.list()))) void this.panel.webview.postMessage({ type: 'ops', ops: b });
  }

  onHidden(): void {
    // Without retainContextWhenHidden the webview's DOM is gone; it says ready when shown again.
    this.ready = false;
  }

  add(e: P.Event): void {
    if (!this.buffer.add(e) || !this.ready) return;
    this.pending.push(...this.model.ops(e));
    // Replays and streamed output come in bursts: one message per few milliseconds.
    this.timer ??= setTimeout(() => this.flush(), 8);
  }

  private flush(): void {
    this.timer = undefined;
    const ops = this.pending;
    this.pending = [];
    for (const b of batches(ops)) void this.panel.webview.postMessage({ type: 'ops', ops: b });
  }

  about(): void {
    if (!this.ready) return;
    const [title, about] = this.title();
    void this.panel.webview.postMessage({ type: 'about', title, about });
  }
}

export class TranscriptPanels implements vscode.Disposable {
  private readonly panels = new Map<string, Panel>();
  private readonly attaching = new Set<string>();

  constructor(
    private readonly client: ArborClient,
    private readonly store: SessionStore,
    private readonly media: vscode.Uri,
    private readonly actions: TranscriptActions,
    /** Whether another view (the Markdown transcript) still follows the session: then no detach. */
    private readonly followed: (id: string) => boolean = () => false,
  ) {}

  /** Opens (or shows) the transcript of session s; a first open attaches from the first event. */
  async open(s: P.Session): Promise<void> {
    const held = this.panels.get(s.id);
    if (held) { held.panel.reveal(undefined, false); return; }
    const panel = vscode.window.createWebviewPanel(transcriptViewType, `Transcript: ${sessionTitle(s, 30)}`, vscode.ViewColumn.Active, {
      enableScripts: true, localResourceRoots: [this.media],
    });
    const p = new Panel(s.id, panel, () => {
      const cur = this.store.get(s.id) ?? s;
      return [sessionTitle(cur, 200), aboutLine(cur)];
    });
    this.panels.set(s.id, p);
    panel.webview.html = html(panel.webview, this.media);
    panel.webview.onDidReceiveMessage((m: FromWebview) => this.onMessage(p, m));
    panel.onDidChangeViewState(e => { if (!e.webviewPanel.visible) p.onHidden(); });
    panel.onDidDispose(() => {
      this.panels.delete(s.id);
      if (!this.followed(s.id) && this.client.running) void this.client.detach(s.id).catch(() => undefined);
    });
    try {
      await this.follow(p);
    } catch (e) {
      panel.dispose();
      throw e;
    }
  }

  private onMessage(p: Panel, m: FromWebview): void {
    const fail = (e: unknown) => void vscode.window.showErrorMessage(`Arbor: ${e instanceof Error ? e.message : String(e)}`);
    if (m.type === 'ready') p.onReady();
    else if (m.type === 'fork') void this.actions.fork(p.id, m.seq).catch(fail);
    else if (m.type === 'action' && m.action.kind === 'diff') void this.actions.turnDiff(p.id, m.action.turn).catch(fail);
    else if (m.type === 'action' && m.action.kind === 'open') void this.actions.open(m.action.session).catch(fail);
  }

  /**
   * Brings the panel up to date, then follows the session: the events after the last one it
   * holds are read in pages of arbor/session.log (one reply per page), then arbor/session.attach
   * from the next seq replays what came meanwhile and streams the rest. A long history replayed
   * by attach alone would be one notification per event, and more than the daemon queues for a
   * client (4,096) overflows it.
   */
  private async follow(p: Panel): Promise<void> {
    const id = p.id;
    this.attaching.add(id);
    try {
      for (;;) {
        const res = await this.client.log({ id, sinceSeq: p.buffer.lastSeq + 1, limit: historyPage });
        const events = res.events ?? [];
        for (const e of events) p.add(e);
        if (events.length < historyPage) break;
      }
      const res = await this.client.attach({ id, sinceSeq: p.buffer.lastSeq + 1 });
      this.store.upsert(res.session);
    } finally {
      this.attaching.delete(id);
    }
  }

  has(id: string): boolean {
    return this.panels.has(id);
  }

  onEvent(e: P.Event): void {
    this.panels.get(e.session)?.add(e);
  }

  onFellBehind(p: P.FellBehindParams): void {
    const panel = this.panels.get(p.session);
    if (panel && !this.attaching.has(p.session)) void this.follow(panel).catch(() => undefined);
  }

  async reattachAll(): Promise<void> {
    for (const [id, p] of this.panels) {
      if (this.attaching.has(id)) continue;
      await this.follow(p).catch(e =>
        void vscode.window.showWarningMessage(`Arbor: the transcript of ${id.slice(0, 8)} stopped following the session: ${e instanceof Error ? e.message : String(e)}`));
    }
  }

  onSessionChanged(id: string): void {
    this.panels.get(id)?.about();
  }

  dispose(): void {
    for (const p of this.panels.values()) p.panel.dispose();
  }
}

/** The webview's page: its own script and stylesheet from media/, a nonce CSP, nothing remote. */
export function html(webview: vscode.Webview, media: vscode.Uri): string {
  const nonce = crypto.randomBytes(16).toString('base64');
  const css = webview.asWebviewUri(vscode.Uri.joinPath(media, 'transcript.css'));
  const js = webview.asWebviewUri(vscode.Uri.joinPath(media, 'transcript.js'));
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src ${webview.cspSource}; font-src ${webview.cspSource}; script-src 'nonce-${nonce}';">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="${css}">
<title>Transcript</title></head>
<body>
<header><h1 id="title">Transcript</h1><span class="about" id="about"></span><span class="count" id="count"></span><button id="collapse" type="button" title="Collapse or expand every cell's code and output">collapse cells</button></header>
<main id="entries" aria-live="polite"></main>
<script nonce="${nonce}" src="${js}"></script>
</body></html>`;
}

/** arbor-turn-diff: read-only documents holding one turn's patch (arbor/session.diff {id, turn}). */
export class TurnDiffProvider implements vscode.TextDocumentContentProvider {
  constructor(private readonly client: ArborClient, private readonly store: SessionStore) {}

  static uri(s: P.Session | undefined, id: string, turn: number): vscode.Uri {
    const name = (s ? sessionTitle(s, 40) : id.slice(0, 8)).replace(/[\/\\?#%]/g, ' ');
    return vscode.Uri.from({ scheme: turnDiffScheme, path: `/turn ${turn} of ${name}.diff`, query: new URLSearchParams({ id, turn: String(turn) }).toString() });
  }

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const q = new URLSearchParams(uri.query);
    const id = q.get('id') ?? '';
    const turn = Number(q.get('turn'));
    const d = await this.client.diff({ id, turn });
    const s = this.store.get(id);
    return turnDiffText(s ? sessionTitle(s, 200) : id, turn, d);
  }
}
