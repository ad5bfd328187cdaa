// The Harness view: each scope's entries by kind (Workspace, Global, and the session scopes of
// this window's sessions), each entry's versions with their diff and trailers, and rollback of an
// entry to a version. Reads arbor/harness.list, .get, .history, .diff; writes .rollback.
import * as vscode from 'vscode';
import * as P from './protocol';
import { ArborClient } from './client';
import { SessionStore, sessionTitle } from './sessions';
import { byKind, changeBy, entryDocument, scopeLabel, trailers, versionDescription, versionDocument } from './harness';

export const harnessScheme = 'arbor-harness';

interface Scope { scope: string; session?: string }
/** The scope fields every arbor/harness.* request carries (server.HarnessScope, embedded). */
type HarnessScopeParams = Pick<P.HarnessListParams, 'dir' | 'scope' | 'session'>;
export type Node =
  | { t: 'scope'; s: Scope }
  | { t: 'sessions' }
  | { t: 'kind'; s: Scope; kind: string; title: string; entries: P.HarnessEntry[] }
  | { t: 'entry'; s: Scope; entry: P.HarnessEntry }
  | { t: 'version'; s: Scope; entry: P.HarnessEntry; v: P.HarnessVersion; previous?: string; current: boolean }
  | { t: 'empty'; text: string };

const kindIcons: Record<string, string> = { note: 'note', memory: 'bookmark', skill: 'tools', subagent: 'hubot' };

function scopeKey(s: Scope): string {
  return s.scope === 'session' ? `session:${s.session}` : s.scope;
}

export class HarnessTreeProvider implements vscode.TreeDataProvider<Node> {
  private readonly changed = new vscode.EventEmitter<Node | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly client: ArborClient,
    private readonly store: SessionStore,
    private readonly dir: () => string | undefined,
    private readonly mine: (s: P.Session) => boolean,
  ) {}

  refresh(): void {
    this.changed.fire(undefined);
  }

  /** Lists again soon: harness events come in bursts. */
  schedule(ms = 500): void {
    if (this.timer) return;
    this.timer = setTimeout(() => { this.timer = undefined; this.refresh(); }, ms);
  }

  params(s: Scope): HarnessScopeParams {
    return { dir: this.dir(), scope: s.scope, session: s.session };
  }

  async getChildren(n?: Node): Promise<Node[]> {
    if (!this.client.running) return [];
    if (!n) return [{ t: 'scope', s: { scope: 'workspace' } }, { t: 'scope', s: { scope: 'global' } }, { t: 'sessions' }];
    try {
      switch (n.t) {
        case 'sessions': {
          const list = this.store.all().filter(this.mine).sort((a, b) => (b.created ?? '').localeCompare(a.created ?? ''));
          return list.length ? list.map(s => ({ t: 'scope', s: { scope: 'session', session: s.id } })) : [{ t: 'empty', text: 'no sessions in this workspace' }];
        }
        case 'scope': {
          const res = await this.client.harnessList(this.params(n.s));
          const groups = byKind(res.entries ?? []);
          return groups.length ? groups.map(g => ({ t: 'kind', s: n.s, ...g })) : [{ t: 'empty', text: 'no entries' }];
        }
        case 'kind':
          return n.entries.map(entry => ({ t: 'entry', s: n.s, entry }));
        case 'entry': {
          const res = await this.client.harnessHistory({ ...this.params(n.s), kind: n.entry.kind, id: n.entry.id });
          const vs = res.versions ?? [];
          return vs.map((v, i) => ({ t: 'version', s: n.s, entry: n.entry, v, previous: vs[i + 1]?.commit, current: i === 0 }));
        }
        default:
          return [];
      }
    } catch (e) {
      return [{ t: 'empty', text: `could not list: ${e instanceof Error ? e.message : String(e)}` }];
    }
  }

  getTreeItem(n: Node): vscode.TreeItem {
    const None = vscode.TreeItemCollapsibleState.None;
    const Collapsed = vscode.TreeItemCollapsibleState.Collapsed;
    switch (n.t) {
      case 'sessions': {
        const item = new vscode.TreeItem('Sessions', Collapsed);
        item.id = 'sessions';
        item.iconPath = new vscode.ThemeIcon('type-hierarchy');
        item.tooltip = 'The session scopes of this window\'s sessions';
        return item;
      }
      case 'scope': {
        const s = n.s.session ? this.store.get(n.s.session) : undefined;
        const item = new vscode.TreeItem(scopeLabel(n.s.scope, n.s.session, s && sessionTitle(s, 40)), n.s.scope === 'session' ? Collapsed : vscode.TreeItemCollapsibleState.Expanded);
        item.id = scopeKey(n.s);
        item.iconPath = new vscode.ThemeIcon(n.s.scope === 'global' ? 'globe' : n.s.scope === 'session' ? 'comment-discussion' : 'repo');
        item.contextValue = n.s.scope === 'session' ? 'harness.sessionScope' : 'harness.scope';
        if (s) item.description = s.state;
        return item;
      }
      case 'kind': {
        const item = new vscode.TreeItem(n.title, vscode.TreeItemCollapsibleState.Expanded);
        item.id = `${scopeKey(n.s)}/${n.kind}`;
        item.description = String(n.entries.length);
        item.iconPath = new vscode.ThemeIcon(kindIcons[n.kind] ?? 'symbol-misc');
        return item;
      }
      case 'entry': {
        const item = new vscode.TreeItem(n.entry.id, Collapsed);
        item.id = `${scopeKey(n.s)}/${n.entry.kind}/${n.entry.id}`;
        item.description = n.entry.title;
        item.iconPath = new vscode.ThemeIcon(kindIcons[n.entry.kind] ?? 'symbol-misc');
        item.contextValue = 'harness.entry';
        item.tooltip = `${n.entry.kind} ${n.entry.id}: ${n.entry.title}${n.entry.version ? ` (version ${n.entry.version.slice(0, 10)})` : ''}`;
        item.command = { command: 'arbor.harness.show', title: 'Show Entry', arguments: [n] };
        return item;
      }
      case 'version': {
        const item = new vscode.TreeItem(n.v.subject || n.v.commit.slice(0, 10), None);
        item.id = `${scopeKey(n.s)}/${n.entry.kind}/${n.entry.id}@${n.v.commit}`;
        item.description = (n.current ? 'current · ' : '') + versionDescription(n.v);
        item.iconPath = new vscode.ThemeIcon(n.current ? 'git-commit' : 'history');
        item.contextValue = n.current ? 'harness.version.current' : 'harness.version';
        const md = new vscode.MarkdownString();
        for (const [k, v] of trailers(n.v)) md.appendMarkdown(`- ${k}: ${v.replace(/[\\`*_{}[\]()#+\-.!|<>]/g, c => '\\' + c)}\n`);
        item.tooltip = md;
        item.command = { command: 'arbor.harness.showVersion', title: 'Show Version Diff', arguments: [n] };
        return item;
      }
      default: {
        const item = new vscode.TreeItem(n.text, None);
        item.iconPath = new vscode.ThemeIcon('info');
        return item;
      }
    }
  }
}

/** arbor-harness: read-only documents of an entry (Markdown) or of one version's diff. */
export class HarnessDocumentProvider implements vscode.TextDocumentContentProvider {
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  private readonly open = new Set<string>();

  constructor(private readonly client: ArborClient) {}

  static entryUri(p: HarnessScopeParams, e: P.HarnessEntry): vscode.Uri {
    const q = new URLSearchParams({ what: 'entry', kind: e.kind, id: e.id, scope: p.scope ?? '', session: p.session ?? '', dir: p.dir ?? '' });
    return vscode.Uri.from({ scheme: harnessScheme, path: `/${p.scope} ${e.kind} ${e.id}.md`, query: q.toString() });
  }

  static versionUri(p: HarnessScopeParams, e: P.HarnessEntry, v: P.HarnessVersion, previous?: string): vscode.Uri {
    const q = new URLSearchParams({ what: 'version', kind: e.kind, id: e.id, scope: p.scope ?? '', session: p.session ?? '', dir: p.dir ?? '',
      version: v.commit, previous: previous ?? '' });
    return vscode.Uri.from({ scheme: harnessScheme, path: `/${e.kind} ${e.id} @${v.commit.slice(0, 8)}.diff`, query: q.toString() });
  }

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    this.open.add(uri.toString());
    const q = new URLSearchParams(uri.query);
    const scope: HarnessScopeParams = { dir: q.get('dir') || undefined, scope: q.get('scope') || undefined, session: q.get('session') || undefined };
    const kind = q.get('kind') ?? '', id = q.get('id') ?? '';
    if (q.get('what') === 'entry') return entryDocument(scope.scope ?? 'workspace', await this.client.harnessGet({ ...scope, kind, id }));
    const version = q.get('version') ?? '';
    const previous = q.get('previous') || undefined;
    const hist = await this.client.harnessHistory({ ...scope, kind, id });
    const v = (hist.versions ?? []).find(x => x.commit === version) ?? { commit: version, time: '', subject: '', change: { author: '' } };
    const d = await this.client.harnessDiff({ ...scope, kind, id, from: previous ?? '', to: version });
    return versionDocument(`${scope.scope ?? 'workspace'} ${kind} ${id}`, v, d, previous);
  }

  /** After a write: open entry documents are read again. */
  reload(): void {
    for (const u of this.open) this.changed.fire(vscode.Uri.parse(u));
  }
}

export class HarnessCommands {
  static readonly ids = ['arbor.harness.refresh', 'arbor.harness.show', 'arbor.harness.showVersion', 'arbor.harness.rollback', 'arbor.harness.refineNow'];

  constructor(
    private readonly client: ArborClient,
    private readonly tree: HarnessTreeProvider,
    private readonly docs: HarnessDocumentProvider,
  ) {}

  register(showError: (e: unknown) => void): vscode.Disposable[] {
    const r = (id: string, fn: (n: Node) => Promise<unknown>) => vscode.commands.registerCommand(id, (n: Node) => fn.call(this, n).catch(showError));
    return [
      r('arbor.harness.refresh', async () => this.tree.refresh()),
      r('arbor.harness.show', this.show),
      r('arbor.harness.showVersion', this.showVersion),
      r('arbor.harness.rollback', this.rollback),
      r('arbor.harness.refineNow', async n => {
        if (n?.t !== 'scope' || !n.s.session) throw new Error('Refine Now works on a session (a session scope of the Harness view)');
        await vscode.commands.executeCommand('arbor.refine', n.s.session);
        this.tree.refresh();
      }),
    ];
  }

  async show(n: Node): Promise<void> {
    if (n?.t !== 'entry') return;
    const doc = await vscode.workspace.openTextDocument(HarnessDocumentProvider.entryUri(this.tree.params(n.s), n.entry));
    await vscode.languages.setTextDocumentLanguage(doc, 'markdown');
    await vscode.window.showTextDocument(doc, { preview: true });
  }

  async showVersion(n: Node): Promise<void> {
    if (n?.t !== 'version') return;
    const doc = await vscode.workspace.openTextDocument(HarnessDocumentProvider.versionUri(this.tree.params(n.s), n.entry, n.v, n.previous));
    await vscode.languages.setTextDocumentLanguage(doc, 'diff');
    await vscode.window.showTextDocument(doc, { preview: true });
  }

  async rollback(n: Node): Promise<void> {
    if (n?.t !== 'version') throw new Error('pick a version of an entry in the Harness view to roll back to');
    const what = `${n.entry.kind} ${n.entry.id}`;
    const ok = await vscode.window.showWarningMessage(`Arbor: roll ${what} back to version ${n.v.commit.slice(0, 10)}?`, {
      modal: true, detail: `"${n.v.subject}" by ${changeBy(n.v.change)}. The entry is restored as it was then, as a new commit: its history is kept.`,
    }, 'Roll Back');
    if (ok !== 'Roll Back') return;
    const res = await this.client.harnessRollback({ ...this.tree.params(n.s), kind: n.entry.kind, id: n.entry.id, version: n.v.commit });
    this.tree.refresh();
    this.docs.reload();
    void vscode.window.showInformationMessage(res.unchanged
      ? `Arbor: ${what} is already as it was at ${n.v.commit.slice(0, 10)}.`
      : `Arbor: rolled ${what} back to ${n.v.commit.slice(0, 10)} as ${res.version.slice(0, 10)}.`);
  }
}
