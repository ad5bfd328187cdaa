// Review by hunk with VS Code's own gestures: a SourceControl per session in the Source Control
// view lists the files of its remaining diff (click: the diff editor against the base); in the
// diff editor each hunk carries "Accept hunk" / "Reject hunk" CodeLenses; a file's row (and the
// diff editor's title) accepts or rejects the file, the provider's title the whole session.
// Every decision is one arbor/session.accept or .reject with the head the user was shown, and the
// view is read again from the remaining diff afterwards.
import * as vscode from 'vscode';
import * as P from './protocol';
import { ArborClient } from './client';
import { FileAtProvider, fileScheme, fileUri } from './documents';
import { SessionStore, sessionTitle } from './sessions';
import { PatchProvider } from './patch';
import { diffSummary, fileOf, hunkAt, hunkLenses, isStale, refusalMessage } from './reviewModel';

/** What a review command is given: a row of the Source Control view, a provider, a diff editor's URI, or ids. */
type ReviewArg = vscode.SourceControl | vscode.SourceControlResourceGroup | vscode.SourceControlResourceState | vscode.Uri | string
  | { id: string; path?: string; hunk?: string; head?: string } | undefined;

interface Entry {
  id: string;
  sc: vscode.SourceControl;
  group: vscode.SourceControlResourceGroup;
  diff?: P.DiffResult;
}

export class Review implements vscode.CodeLensProvider, vscode.Disposable {
  private readonly entries = new Map<string, Entry>();
  private readonly lensesChanged = new vscode.EventEmitter<void>();
  readonly onDidChangeCodeLenses = this.lensesChanged.event;

  static readonly ids = ['arbor.review', 'arbor.review.refresh', 'arbor.review.acceptHunk', 'arbor.review.rejectHunk',
    'arbor.review.acceptFile', 'arbor.review.rejectFile', 'arbor.review.acceptAll', 'arbor.review.rejectAll',
    'arbor.review.acceptHunkAtCursor', 'arbor.review.rejectHunkAtCursor'];

  constructor(
    private readonly client: ArborClient,
    private readonly store: SessionStore,
    private readonly files: FileAtProvider,
    private readonly patches: PatchProvider,
    private readonly pick: (arg: string | undefined, title: string) => Promise<P.Session | undefined>,
  ) {}

  register(showError: (e: unknown) => void): vscode.Disposable[] {
    const r = (id: string, fn: (...args: any[]) => Promise<unknown>) =>
      vscode.commands.registerCommand(id, (...args: any[]) => fn.apply(this, args).catch(showError));
    return [
      r('arbor.review', this.reviewCommand),
      r('arbor.review.refresh', async (a: ReviewArg) => { const id = this.idOf(a); if (id) await this.refresh(id); }),
      r('arbor.review.acceptHunk', (a: ReviewArg) => this.decide('accept', a, 'hunk')),
      r('arbor.review.rejectHunk', (a: ReviewArg) => this.decide('reject', a, 'hunk')),
      r('arbor.review.acceptHunkAtCursor', () => this.decide('accept', this.atCursor(), 'hunk')),
      r('arbor.review.rejectHunkAtCursor', () => this.decide('reject', this.atCursor(), 'hunk')),
      r('arbor.review.acceptFile', (a: ReviewArg, many?: vscode.SourceControlResourceState[]) => this.decideFiles('accept', a, many)),
      r('arbor.review.rejectFile', (a: ReviewArg, many?: vscode.SourceControlResourceState[]) => this.decideFiles('reject', a, many)),
      r('arbor.review.acceptAll', (a: ReviewArg) => this.decide('accept', a, 'all')),
      r('arbor.review.rejectAll', (a: ReviewArg) => this.decide('reject', a, 'all')),
      vscode.languages.registerCodeLensProvider({ scheme: fileScheme }, this),
      this,
    ];
  }

  dispose(): void {
    for (const e of this.entries.values()) e.sc.dispose();
    this.entries.clear();
  }

  /** Arbor: Review Changes — the session's remaining diff in the Source Control view. */
  async reviewCommand(arg?: string | { id?: string }): Promise<void> {
    const s = await this.pick(typeof arg === 'string' ? arg : arg?.id, 'Review the changes of which session?');
    if (!s) return;
    const d = await this.open(s.id);
    await vscode.commands.executeCommand('workbench.view.scm');
    if (!d.files?.length) vscode.window.showInformationMessage(`Arbor: ${sessionTitle(s, 40)} has no remaining changes (${diffSummary(d)}).`);
  }

  /** Shows (or updates) the session's SourceControl; resolves to the remaining diff. */
  async open(id: string): Promise<P.DiffResult> {
    let e = this.entries.get(id);
    if (!e) {
      const s = this.store.get(id) ?? await this.client.get(id);
      // No rootUri: the Source Control view would name the row after the worktree's folder (the session id).
      const sc = vscode.scm.createSourceControl('arbor', `Arbor: ${sessionTitle(s, 40)}`);
      sc.inputBox.visible = false;
      sc.quickDiffProvider = {
        // The session's version of a file, shown in an editor, is compared with the review's base.
        provideOriginalResource: (uri: vscode.Uri) => {
          if (uri.scheme !== fileScheme) return undefined;
          const q = new URLSearchParams(uri.query);
          return q.get('id') === id && q.get('side') === 'head' ? fileUri(id, uri.path.replace(/^\//, ''), 'base') : undefined;
        },
      };
      const group = sc.createResourceGroup('remaining', 'Not yet accepted');
      group.hideWhenEmpty = false;
      e = { id, sc, group };
      this.entries.set(id, e);
    }
    return this.refresh(id);
  }

  /** Reads the remaining diff again and redraws the rows, the lenses and the open documents. */
  async refresh(id: string): Promise<P.DiffResult> {
    const d = await this.client.diff({ id });
    const e = this.entries.get(id);
    const s = this.store.get(id);
    if (e) {
      e.diff = d;
      e.group.label = `Not yet accepted — ${diffSummary(d)}`;
      e.group.resourceStates = (d.files ?? []).map(f => this.row(id, s, f));
      e.sc.count = d.files?.length ?? 0;
    } else {
      this.cache.set(id, d);
    }
    this.files.refresh(id);
    this.patches.refresh(id);
    this.lensesChanged.fire();
    return d;
  }

  /** A session that ran a turn has a new remaining diff: read it again once it stops running. */
  onSessionChanged(s: P.Session): void {
    const seen = this.seen.get(s.id);
    this.seen.set(s.id, s.lastSeq);
    if (seen === undefined || seen === s.lastSeq || s.state === P.StateRunning) return;
    if (!this.entries.has(s.id) && !this.cache.has(s.id)) return;
    this.cache.delete(s.id);
    void this.refresh(s.id).catch(() => undefined);
  }

  private readonly seen = new Map<string, number>();

  /** Diffs read for the lenses of a session that has no SourceControl open. */
  private readonly cache = new Map<string, P.DiffResult>();

  private diffOf(id: string): P.DiffResult | undefined {
    return this.entries.get(id)?.diff ?? this.cache.get(id);
  }

  private row(id: string, s: P.Session | undefined, f: P.FileDiff): vscode.SourceControlResourceState & { arbor: { id: string; path: string } } {
    const deleted = f.status === 'deleted';
    const base = fileUri(id, f.oldPath || f.path, 'base', f.status === 'added');
    const head = fileUri(id, f.path, 'head', deleted);
    return {
      resourceUri: head,
      arbor: { id, path: f.path },
      contextValue: 'arborFile',
      decorations: {
        strikeThrough: deleted,
        tooltip: `${f.status} +${f.additions} −${f.deletions}${f.hunks?.length ? `, ${f.hunks.length} hunk${f.hunks.length === 1 ? '' : 's'}` : ''}`,
        iconPath: new vscode.ThemeIcon(f.status === 'added' ? 'diff-added' : deleted ? 'diff-removed' : f.status === 'renamed' ? 'diff-renamed' : 'diff-modified'),
      },
      command: { command: 'vscode.diff', title: 'Open diff', arguments: [base, head, `${f.path} (${s?.branch ?? id.slice(0, 8)})`] },
    };
  }

  provideCodeLenses(doc: vscode.TextDocument): vscode.CodeLens[] | Thenable<vscode.CodeLens[]> {
    const q = new URLSearchParams(doc.uri.query);
    const id = q.get('id');
    if (!id || q.get('side') !== 'head') return [];
    const path = doc.uri.path.replace(/^\//, '');
    const build = (d: P.DiffResult | undefined) => {
      const f = fileOf(d, path);
      if (!f || !d) return [];
      const out: vscode.CodeLens[] = [];
      const top = new vscode.Range(0, 0, 0, 0);
      out.push(new vscode.CodeLens(top, { title: '$(check-all) Accept file', command: 'arbor.review.acceptFile', arguments: [{ id, path, head: d.head }] }));
      out.push(new vscode.CodeLens(top, { title: '$(discard) Reject file', command: 'arbor.review.rejectFile', arguments: [{ id, path, head: d.head }] }));
      for (const l of hunkLenses(f)) {
        const line = Math.min(l.line, Math.max(doc.lineCount - 1, 0));
        const at = new vscode.Range(line, 0, line, 0);
        out.push(new vscode.CodeLens(at, { title: `$(check) Accept hunk ${l.summary}`, command: 'arbor.review.acceptHunk', arguments: [{ id, hunk: l.id, head: d.head }] }));
        out.push(new vscode.CodeLens(at, { title: '$(discard) Reject hunk', command: 'arbor.review.rejectHunk', arguments: [{ id, hunk: l.id, head: d.head }] }));
      }
      return out;
    };
    const known = this.diffOf(id);
    if (known) return build(known);
    return this.client.diff({ id }).then(d => { this.cache.set(id, d); return build(d); });
  }

  /** The hunk under the cursor of the active diff editor (or session file), for the keyboard commands. */
  private atCursor(): ReviewArg {
    const ed = vscode.window.activeTextEditor;
    if (!ed || ed.document.uri.scheme !== fileScheme) throw new Error('put the cursor on a hunk of a session\'s file (Arbor: Review Changes opens them)');
    const q = new URLSearchParams(ed.document.uri.query);
    const id = q.get('id') ?? '';
    const d = this.diffOf(id);
    const f = fileOf(d, ed.document.uri.path.replace(/^\//, ''));
    const hunk = f && hunkAt(f, ed.selection.active.line);
    if (!d || !hunk) throw new Error('no hunk of the remaining diff here');
    return { id, hunk, head: d.head };
  }

  /** The session a command argument names. */
  private idOf(a: ReviewArg): string | undefined {
    if (!a) return undefined;
    if (typeof a === 'string') return a;
    if (a instanceof vscode.Uri) return a.scheme === fileScheme ? new URLSearchParams(a.query).get('id') ?? undefined : undefined;
    if ('arbor' in a) return (a as { arbor: { id: string } }).arbor.id;
    if ('resourceUri' in a) return this.idOf((a as vscode.SourceControlResourceState).resourceUri);
    for (const e of this.entries.values()) if (e.sc === a || e.group === a) return e.id;
    if ('id' in a && typeof a.id === 'string' && this.entries.has(a.id)) return a.id;
    return 'id' in a && typeof (a as { id: unknown }).id === 'string' && !('resourceStates' in a) ? (a as { id: string }).id : undefined;
  }

  private pathOf(a: ReviewArg): string | undefined {
    if (!a || typeof a === 'string') return undefined;
    if (a instanceof vscode.Uri) return a.scheme === fileScheme ? a.path.replace(/^\//, '') : undefined;
    if ('arbor' in a) return (a as { arbor: { path: string } }).arbor.path;
    if ('path' in a && typeof a.path === 'string') return a.path;
    return undefined;
  }

  private async decideFiles(what: 'accept' | 'reject', a: ReviewArg, many?: vscode.SourceControlResourceState[]): Promise<void> {
    const rows = many?.length ? many : [a];
    const id = this.idOf(rows[0] as ReviewArg);
    const paths = rows.map(r => this.pathOf(r as ReviewArg)).filter((p): p is string => !!p);
    if (!id || !paths.length) throw new Error(`${what} which file? Use a file's row in Source Control or its diff editor`);
    const head = (a && typeof a === 'object' && 'head' in a && typeof a.head === 'string' ? a.head : undefined) ?? this.diffOf(id)?.head;
    await this.send(what, id, { files: paths, head }, paths.join(', '));
  }

  private async decide(what: 'accept' | 'reject', a: ReviewArg, scope: 'hunk' | 'all'): Promise<void> {
    const id = this.idOf(a) ?? (await this.pick(undefined, `${what === 'accept' ? 'Accept' : 'Reject'} the changes of which session?`))?.id;
    if (!id) return;
    const given = a && typeof a === 'object' && !(a instanceof vscode.Uri) ? a as { hunk?: string; head?: string } : {};
    if (!this.diffOf(id)) await this.open(id);
    const head = given.head ?? this.diffOf(id)?.head;
    if (scope === 'hunk') {
      if (!given.hunk) throw new Error('which hunk? Use the hunk\'s CodeLens in the diff editor');
      await this.send(what, id, { hunks: [given.hunk], head }, `hunk ${given.hunk}`);
      return;
    }
    const s = this.store.get(id);
    const title = s ? sessionTitle(s, 40) : id.slice(0, 8);
    const d = this.diffOf(id);
    const ok = await vscode.window.showWarningMessage(what === 'accept'
      ? `Arbor: accept all remaining changes of ${title} (${d ? diffSummary(d) : ''}) onto your current branch?`
      : `Arbor: reject all remaining changes of ${title} (${d ? diffSummary(d) : ''})? They are reverted on the session's branch as a new checkpoint; your branch is untouched.`,
    { modal: true }, what === 'accept' ? 'Accept all' : 'Reject all');
    if (!ok) return;
    await this.send(what, id, { head }, `all of ${title}`);
  }

  private async send(what: 'accept' | 'reject', id: string, p: { files?: string[]; hunks?: string[]; head?: string }, label: string): Promise<void> {
    const action = `${what === 'accept' ? 'Accept' : 'Reject'} of ${label}`;
    try {
      // The accepted point of the diff reviewed: the daemon refuses if part was accepted since
      // (by another editor, the CLI), as the hunk ids would then point at other hunks.
      const shown = this.diffOf(id);
      const reviewed = shown && (!p.head || shown.head === p.head) ? { accepted: shown.accepted ?? '' } : {};
      const res = what === 'accept' ? await this.client.accept({ id, ...p, ...reviewed }) : await this.client.reject({ id, ...p, ...reviewed });
      vscode.window.setStatusBarMessage(`Arbor: ${what === 'accept' ? 'accepted' : 'rejected'} ${label} (${res.files?.length ?? 0} file(s), ${res.commit?.slice(0, 8)})`, 6000);
    } catch (err) {
      const msg = refusalMessage(action, err);
      if (isStale(err)) await this.refresh(id).catch(() => undefined);
      void vscode.window.showErrorMessage(`Arbor: ${msg}`);
      return;
    }
    await this.refresh(id);
  }
}
