// Merge a child session into its parent from the Sessions view ("Merge into Parent"). When git
// stops on conflicts, the Merge Conflicts view lists the files (it stays until the merge is done
// or abandoned); each opens its result — an editable file prefilled with git's merge, conflict
// markers and all — and the three versions (base, ours = the parent's, theirs = the child's) as
// read-only documents beside it. "Retry Merge" sends the resolved results.
import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import * as P from './protocol';
import { ArborClient } from './client';
import { SessionStore, sessionTitle } from './sessions';
import { conflictOf, hasMarkers, refusalMessage } from './reviewModel';

export const conflictScheme = 'arbor-conflict';
type Side = 'base' | 'ours' | 'theirs';

interface Pending {
  child: string;
  res: P.ConflictsResult;
  /** path → the result file the user edits. */
  results: Map<string, vscode.Uri>;
  /** path → the side taken whole instead of an edited result (binary files, deletions, symlinks). */
  take: Map<string, 'ours' | 'theirs'>;
}

type Node = { kind: 'file'; path: string } | { kind: 'side'; path: string; side: Side | 'result' | 'ours-theirs' };

export class Merges implements vscode.TreeDataProvider<Node>, vscode.TextDocumentContentProvider {
  private pending: Pending | undefined;
  private readonly treeChanged = new vscode.EventEmitter<Node | undefined>();
  readonly onDidChangeTreeData = this.treeChanged.event;
  private readonly docChanged = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.docChanged.event;
  private view: vscode.TreeView<Node> | undefined;

  static readonly ids = ['arbor.merge', 'arbor.merge.retry', 'arbor.merge.abandon', 'arbor.merge.openFile', 'arbor.merge.takeOurs', 'arbor.merge.takeTheirs'];

  constructor(
    private readonly client: ArborClient,
    private readonly store: SessionStore,
    private readonly storage: vscode.Uri,
    private readonly pick: (arg: string | undefined, title: string) => Promise<P.Session | undefined>,
  ) {}

  register(showError: (e: unknown) => void): vscode.Disposable[] {
    const r = (id: string, fn: (...args: any[]) => Promise<unknown>) =>
      vscode.commands.registerCommand(id, (...args: any[]) => fn.apply(this, args).catch(showError));
    this.view = vscode.window.createTreeView('arbor.conflicts', { treeDataProvider: this });
    return [
      this.view,
      vscode.workspace.registerTextDocumentContentProvider(conflictScheme, this),
      r('arbor.merge', this.merge),
      r('arbor.merge.retry', this.retry),
      r('arbor.merge.abandon', this.abandon),
      r('arbor.merge.openFile', (n: Node | string) => this.openFile(typeof n === 'string' ? n : n.path)),
      r('arbor.merge.takeOurs', (n?: Node | string) => this.takeSide(this.fileArg(n), 'ours')),
      r('arbor.merge.takeTheirs', (n?: Node | string) => this.takeSide(this.fileArg(n), 'theirs')),
    ];
  }

  /** Merge into Parent: asks first, then merges; a conflict opens the Merge Conflicts view. */
  async merge(arg?: string | { id?: string }): Promise<void> {
    const s = await this.pick(typeof arg === 'string' ? arg : arg?.id, 'Merge which session into its parent?');
    if (!s) return;
    if (!s.parent) throw new Error(`${sessionTitle(s, 40)} has no parent session to merge into`);
    const parent = this.store.get(s.parent);
    const into = parent ? `${sessionTitle(parent, 40)} (${parent.branch})` : s.parent.slice(0, 8);
    const ok = await vscode.window.showWarningMessage(`Arbor: merge ${sessionTitle(s, 40)} (${s.branch}) into its parent ${into}?`, { modal: true }, 'Merge');
    if (ok !== 'Merge') return;
    await this.send(s.id, undefined);
  }

  private async send(id: string, resolutions: Record<string, string> | undefined, heads?: { parentHead?: string; childHead?: string }, take?: Record<string, string>): Promise<void> {
    const s = this.store.get(id);
    const title = s ? sessionTitle(s, 40) : id.slice(0, 8);
    try {
      // With resolutions, the heads they were made against: a branch that moved refuses them.
      const res = await this.client.merge(resolutions ? { id, resolutions, ...(take && Object.keys(take).length ? { take } : {}), ...heads } : { id });
      this.clear();
      void vscode.window.showInformationMessage(`Arbor: merged ${title} into its parent: ${res.files?.length ?? 0} file(s), ${res.commit?.slice(0, 8)}.`);
    } catch (err) {
      const c = conflictOf(err);
      if (c && c.kind !== 'dirty') {
        await this.show(id);
        void vscode.window.showWarningMessage(`Arbor: ${refusalMessage(`Merge of ${title}`, err)}`);
        return;
      }
      throw new Error(refusalMessage(`Merge of ${title}`, err));
    }
  }

  /** Lists the conflicted files of the child's merge and writes each result file from git's merge. */
  private async show(child: string): Promise<void> {
    const res = await this.client.conflicts({ id: child });
    const keep = this.pending?.child === child ? this.pending.results : new Map<string, vscode.Uri>();
    const results = new Map<string, vscode.Uri>();
    const take = this.pending?.child === child ? this.pending.take : new Map<string, 'ours' | 'theirs'>();
    for (const f of res.files ?? []) {
      if (f.binary) continue; // no text to edit: Take Ours or Take Theirs
      const uri = keep.get(f.path) ?? vscode.Uri.file(path.join(this.storage.fsPath, 'merge', child, f.path));
      if (!keep.has(f.path)) {
        fs.mkdirSync(path.dirname(uri.fsPath), { recursive: true });
        fs.writeFileSync(uri.fsPath, f.merged ?? '');
      }
      results.set(f.path, uri);
    }
    this.pending = { child, res, results, take };
    for (const f of res.files ?? []) for (const side of ['base', 'ours', 'theirs'] as Side[]) this.docChanged.fire(this.sideUri(child, f.path, side));
    await vscode.commands.executeCommand('setContext', 'arbor.conflicts', true);
    this.treeChanged.fire(undefined);
    if (this.view) {
      this.view.title = `Merge Conflicts: ${sessionTitle(this.store.get(child) ?? { id: child, task: child } as P.Session, 30)}`;
      const name = (id: string) => { const x = this.store.get(id); return x ? `${sessionTitle(x, 30)} (${x.branch})` : id.slice(0, 8); };
      this.view.message = `${res.files?.length ?? 0} file(s) in conflict merging ${name(res.child)} into ${name(res.parent)}. Edit each result (it starts from git's merge), then Retry Merge.`;
    }
    await vscode.commands.executeCommand('arbor.conflicts.focus');
  }

  /** Retry Merge: sends every result that has no conflict markers left; the daemon says what is still open. */
  async retry(): Promise<void> {
    const p = this.pending;
    if (!p) throw new Error('no merge is waiting for conflicts to be resolved');
    const resolutions: Record<string, string> = {};
    const marked: string[] = [];
    for (const [file, uri] of p.results) {
      if (p.take.has(file)) continue;
      const open = vscode.workspace.textDocuments.find(d => d.uri.toString() === uri.toString());
      const text = open ? open.getText() : fs.readFileSync(uri.fsPath, 'utf8');
      if (hasMarkers(text)) marked.push(file);
      else resolutions[file] = text;
    }
    const take = Object.fromEntries(p.take);
    if (!Object.keys(resolutions).length && !Object.keys(take).length) throw new Error(`every result still has conflict markers: ${marked.join(', ')}`);
    await this.send(p.child, resolutions, { parentHead: p.res.parentHead, childHead: p.res.childHead }, take);
  }

  async abandon(): Promise<void> {
    this.clear();
  }

  private clear(): void {
    const p = this.pending;
    this.pending = undefined;
    if (p) fs.rmSync(path.join(this.storage.fsPath, 'merge', p.child), { recursive: true, force: true });
    void vscode.commands.executeCommand('setContext', 'arbor.conflicts', false);
    if (this.view) { this.view.message = undefined; this.view.title = 'Merge Conflicts'; }
    this.treeChanged.fire(undefined);
  }

  /** The file a row command is for: its argument, else the row selected (a menu opened on a row
   *  the view has redrawn since passes none). */
  private fileArg(n?: Node | string): string {
    if (typeof n === 'string') return n;
    const f = n?.path ?? this.view?.selection[0]?.path;
    if (!f) throw new Error('which file? Use the file\'s row in the Merge Conflicts view');
    return f;
  }

  /** Settles a file by taking the parent's (ours) or the child's (theirs) version whole; a side
   *  without the file deletes it. For binary files, and for a deletion against an edit. */
  async takeSide(file: string, side: 'ours' | 'theirs'): Promise<void> {
    const p = this.pending;
    if (!p || !(p.res.files ?? []).some(f => f.path === file)) throw new Error(`${file} is not in conflict`);
    p.take.set(file, side);
    this.treeChanged.fire(undefined);
  }

  /** Opens a file's result to edit, with the parent's and the child's versions side by side below. */
  async openFile(file: string): Promise<void> {
    const p = this.pending;
    const uri = p?.results.get(file);
    if (p && !uri && (p.res.files ?? []).some(f => f.path === file && f.binary)) {
      throw new Error(`${file} is binary: settle it with Take Ours (the parent's) or Take Theirs (the child's) on its row`);
    }
    if (!p || !uri) throw new Error(`${file} is not in conflict`);
    const doc = await vscode.workspace.openTextDocument(uri);
    await vscode.window.showTextDocument(doc, { preview: false, viewColumn: vscode.ViewColumn.One });
    await vscode.commands.executeCommand('vscode.diff', this.sideUri(p.child, file, 'ours'), this.sideUri(p.child, file, 'theirs'),
      `${file}: ours (parent) ↔ theirs (child)`, { viewColumn: vscode.ViewColumn.Two, preview: true, preserveFocus: true });
  }

  private sideUri(child: string, file: string, side: Side): vscode.Uri {
    return vscode.Uri.from({ scheme: conflictScheme, path: `/${side}/${file}`, query: new URLSearchParams({ id: child, side, path: file }).toString() });
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    const q = new URLSearchParams(uri.query);
    const f = this.pending?.child === q.get('id') ? this.pending.res.files?.find(x => x.path === q.get('path')) : undefined;
    if (!f) return '(this merge is no longer waiting for a resolution)\n';
    const side = q.get('side') as Side;
    const missing = side === 'base' ? f.baseMissing : side === 'ours' ? f.oursMissing : f.theirsMissing;
    return missing ? '' : (f[side] ?? '');
  }

  getChildren(n?: Node): Node[] {
    const p = this.pending;
    if (!p) return [];
    if (!n) return (p.res.files ?? []).map(f => ({ kind: 'file', path: f.path }));
    if (n.kind !== 'file') return [];
    return (['result', 'ours-theirs', 'base', 'ours', 'theirs'] as const).map(side => ({ kind: 'side', path: n.path, side }));
  }

  getTreeItem(n: Node): vscode.TreeItem {
    const p = this.pending!;
    if (n.kind === 'file') {
      const taken = p.take.get(n.path);
      const binary = (p.res.files ?? []).some(f => f.path === n.path && f.binary);
      if (taken || binary) {
        const item = new vscode.TreeItem(n.path, vscode.TreeItemCollapsibleState.None);
        item.id = `file:${n.path}`;
        item.description = taken ? `taking ${taken === 'ours' ? 'ours (the parent\'s)' : 'theirs (the child\'s)'} whole` : 'binary: Take Ours or Take Theirs';
        item.iconPath = new vscode.ThemeIcon(taken ? 'check' : 'warning');
        item.contextValue = 'conflictFile';
        return item;
      }
      const item = new vscode.TreeItem(n.path, vscode.TreeItemCollapsibleState.Collapsed);
      item.id = `file:${n.path}`;
      const uri = p.results.get(n.path);
      const open = uri && vscode.workspace.textDocuments.find(d => d.uri.toString() === uri.toString());
      const text = open ? open.getText() : uri && fs.existsSync(uri.fsPath) ? fs.readFileSync(uri.fsPath, 'utf8') : '';
      item.description = hasMarkers(text) ? 'conflict markers left' : 'resolved';
      item.iconPath = new vscode.ThemeIcon(hasMarkers(text) ? 'warning' : 'check');
      item.contextValue = 'conflictFile';
      item.command = { command: 'arbor.merge.openFile', title: 'Open result', arguments: [n.path] };
      return item;
    }
    const labels = { result: 'result (edit this)', 'ours-theirs': 'ours ↔ theirs', base: 'base', ours: 'ours (parent)', theirs: 'theirs (child)' };
    const item = new vscode.TreeItem(labels[n.side]);
    const f = (s: Side) => this.sideUri(p.child, n.path, s);
    item.command = n.side === 'result' ? { command: 'arbor.merge.openFile', title: 'Open result', arguments: [n.path] }
      : n.side === 'ours-theirs' ? { command: 'vscode.diff', title: 'Compare', arguments: [f('ours'), f('theirs'), `${n.path}: ours (parent) ↔ theirs (child)`] }
        : { command: 'vscode.open', title: 'Open', arguments: [f(n.side)] };
    return item;
  }

  /** Redraws the rows (resolved or not) as the user edits the results. */
  onEdited(doc: vscode.TextDocument): void {
    const p = this.pending;
    if (p && [...p.results.values()].some(u => u.toString() === doc.uri.toString())) this.treeChanged.fire(undefined);
  }
}
