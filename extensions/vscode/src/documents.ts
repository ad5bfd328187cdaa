// Virtual documents: a session's live transcript (arbor-transcript:) and one side of a session's
// diff (arbor-file:), which vscode.diff shows side by side.
import * as vscode from 'vscode';
import * as P from './protocol';
import { ArborClient } from './client';
import { EventBuffer, renderTranscript } from './transcript';
import { SessionStore, sessionOrigin, sessionTitle } from './sessions';

export const transcriptScheme = 'arbor-transcript';
export const fileScheme = 'arbor-file';

/** The side of a session's diff that arbor/session.fileAt reads. */
export type Side = 'base' | 'head';

export function transcriptUri(s: P.Session): vscode.Uri {
  const name = sessionTitle(s, 40).replace(/[\/\\?#%]/g, ' ');
  return vscode.Uri.from({ scheme: transcriptScheme, path: `/${name}.md`, query: s.id });
}

/** One side of a file in a session's diff; absent (an added file's base) gives an empty document. */
export function fileUri(id: string, path: string, side: Side, absent = false): vscode.Uri {
  const q: Record<string, string> = { id, side };
  if (absent) q.absent = '1';
  return vscode.Uri.from({ scheme: fileScheme, path: '/' + path, query: new URLSearchParams(q).toString() });
}

/** Transcripts attach to their session on first open and follow its arbor/event notifications. */
export class TranscriptProvider implements vscode.TextDocumentContentProvider {
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  private readonly buffers = new Map<string, EventBuffer>();
  private readonly uris = new Map<string, vscode.Uri>();
  private timer: NodeJS.Timeout | undefined;
  private readonly dirty = new Set<string>();
  private readonly attaching = new Set<string>();

  constructor(private readonly client: ArborClient, private readonly store: SessionStore) {}

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const id = uri.query;
    this.uris.set(id, uri);
    if (!this.buffers.has(id)) await this.attach(id, 0);
    const s = this.store.get(id);
    const events = this.buffers.get(id)?.list() ?? [];
    if (!s) return renderTranscript(id, events);
    const about = [s.error ? `${s.state}: ${s.error}` : s.state, s.branch && `branch \`${s.branch}\``, sessionOrigin(s)];
    return renderTranscript(sessionTitle(s, 200), events, [about.filter(Boolean).join(' · ')]);
  }

  /**
   * (Re)attaches from sinceSeq; the daemon replays older events as arbor/event notifications.
   * A first attach that fails forgets the transcript, so opening it again tries again.
   */
  async attach(id: string, sinceSeq: number): Promise<void> {
    const first = !this.buffers.has(id);
    if (first) this.buffers.set(id, new EventBuffer());
    this.attaching.add(id);
    try {
      const res = await this.client.attach({ id, sinceSeq });
      this.store.upsert(res.session);
    } catch (e) {
      if (first) this.buffers.delete(id);
      throw e;
    } finally {
      this.attaching.delete(id);
    }
  }

  /** Re-attaches every open transcript, e.g. after the language client restarted. */
  async reattachAll(): Promise<void> {
    for (const [id, buf] of this.buffers) {
      if (this.attaching.has(id)) continue; // its first attach is still on its way
      await this.attach(id, buf.lastSeq + 1).catch(e => this.warn(id, e));
    }
  }

  private warn(id: string, e: unknown): void {
    const msg = e instanceof Error ? e.message : String(e);
    void vscode.window.showWarningMessage(`Arbor: the transcript of ${id.slice(0, 8)} stopped following the session: ${msg}`);
  }

  onEvent(e: P.Event): void {
    const buf = this.buffers.get(e.session);
    if (!buf || !buf.add(e)) return;
    this.dirty.add(e.session);
    // Events arrive in bursts (replay, streaming): re-render at most every 100 ms.
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      for (const id of this.dirty) {
        const uri = this.uris.get(id);
        if (uri) this.changed.fire(uri);
      }
      this.dirty.clear();
    }, 100);
  }

  /** Whether a Markdown transcript follows session id (then it stays attached). */
  follows(id: string): boolean {
    return this.buffers.has(id);
  }

  onFellBehind(p: P.FellBehindParams): void {
    const buf = this.buffers.get(p.session);
    if (buf) void this.attach(p.session, buf.lastSeq + 1).catch(e => this.warn(p.session, e));
  }

  onSessionChanged(id: string): void {
    const uri = this.uris.get(id);
    if (uri) this.changed.fire(uri);
  }
}

export class FileAtProvider implements vscode.TextDocumentContentProvider {
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;

  constructor(private readonly client: ArborClient) {}

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const q = new URLSearchParams(uri.query);
    if (q.get('absent')) return '';
    const res = await this.client.fileAt({ id: q.get('id') ?? '', path: uri.path.replace(/^\//, ''), side: (q.get('side') ?? 'head') as Side });
    return res.missing ? '' : res.content;
  }

  /** Reads both sides of a session's open files again (after an accept or reject moved them). */
  refresh(id: string): void {
    for (const d of vscode.workspace.textDocuments) {
      if (d.uri.scheme === fileScheme && new URLSearchParams(d.uri.query).get('id') === id) this.changed.fire(d.uri);
    }
  }
}
