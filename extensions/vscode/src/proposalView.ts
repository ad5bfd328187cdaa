// The Harness Proposals view, the proposal review document (arbor-proposal:) and the commands
// that review proposals (show, accept, reject) and run /refine on a session. The daemon's policy
// and gate decide; these show its answers.
import * as vscode from 'vscode';
import * as P from './protocol';
import { ArborClient } from './client';
import { Decision, Pending, decisionMessage, documentStatus, proposalDescription, proposalDocument, proposalLabel, proposalTooltip, refineSummary, triggerRange } from './proposals';
import { sessionTitle } from './sessions';

export const proposalScheme = 'arbor-proposal';

/** The review document of proposal id of the repository containing dir. */
export function proposalUri(id: string, dir: string | undefined): vscode.Uri {
  return vscode.Uri.from({ scheme: proposalScheme, path: `/${id}.diff`, query: dir ? new URLSearchParams({ dir }).toString() : '' });
}

function parseUri(uri: vscode.Uri): P.ProposalRef {
  const dir = new URLSearchParams(uri.query).get('dir') || undefined;
  return { id: uri.path.replace(/^\//, '').replace(/\.diff$/, ''), dir };
}

const kindIcons: Record<string, string> = { note: 'note', memory: 'bookmark', skill: 'tools', subagent: 'hubot' };

/** The pending proposals of the workspace, as arbor/refine.proposals lists them (newest first). */
export class ProposalTreeProvider implements vscode.TreeDataProvider<P.Proposal> {
  private readonly changed = new vscode.EventEmitter<P.Proposal | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private list: P.Proposal[] = [];
  private running: Promise<void> | undefined;
  private again = false;
  private timer: NodeJS.Timeout | undefined;
  private view: vscode.TreeView<P.Proposal> | undefined;

  /** dir is the directory whose repository's proposals are listed (undefined: the client's root). */
  constructor(private readonly client: ArborClient, private readonly dir: () => string | undefined) {}

  /** The view whose message and badge follow the list. */
  bind(view: vscode.TreeView<P.Proposal>): void {
    this.view = view;
  }

  get pending(): readonly P.Proposal[] {
    return this.list;
  }

  /**
   * Lists the pending proposals again. Calls during a listing wait for one more listing after
   * it, so a caller that just decided a proposal sees the list without it.
   */
  refresh(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      try {
        do {
          this.again = false;
          await this.load();
        } while (this.again);
      } finally {
        this.running = undefined;
      }
    })();
    return this.running;
  }

  /** Refreshes soon: events come in bursts (a proposal, then its decision). */
  schedule(ms = 300): void {
    if (this.timer) return;
    this.timer = setTimeout(() => { this.timer = undefined; void this.refresh(); }, ms);
  }

  private async load(): Promise<void> {
    try {
      const res = await this.client.proposals({ dir: this.dir(), status: Pending });
      this.list = res.proposals ?? [];
      if (this.view) {
        this.view.message = undefined;
        this.view.badge = this.list.length ? { value: this.list.length, tooltip: `${this.list.length} harness proposal(s) waiting for review` } : undefined;
      }
    } catch (e) {
      if (this.view) this.view.message = `Could not list the harness proposals: ${e instanceof Error ? e.message : String(e)}`;
    }
    this.changed.fire(undefined);
  }

  getChildren(p?: P.Proposal): P.Proposal[] {
    return p ? [] : this.list;
  }

  getTreeItem(p: P.Proposal): vscode.TreeItem {
    const item = new vscode.TreeItem(proposalLabel(p), vscode.TreeItemCollapsibleState.None);
    item.id = p.id;
    item.description = proposalDescription(p);
    item.tooltip = new vscode.MarkdownString(proposalTooltip(p));
    item.iconPath = new vscode.ThemeIcon(kindIcons[p.edits?.[0]?.kind ?? ''] ?? 'git-pull-request');
    item.contextValue = p.status === Pending ? 'proposal.pending' : 'proposal.decided';
    item.command = { command: 'arbor.proposals.show', title: 'Show Proposal Diff', arguments: [p] };
    return item;
  }
}

/** arbor-proposal: documents: a proposal's facts and its diff, read again when it is decided. */
export class ProposalDocumentProvider implements vscode.TextDocumentContentProvider {
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  private readonly uris = new Map<string, vscode.Uri>();

  constructor(private readonly client: ArborClient) {}

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const ref = parseUri(uri);
    this.uris.set(ref.id, uri);
    const p = await this.client.proposal(ref);
    // The evidence: the events of the proposing session that its trigger cites.
    const range = triggerRange(p);
    let evidence: P.Event[] = [];
    if (range && p.session) {
      const want = new Set(p.trigger);
      evidence = ((await this.client.log({ id: p.session, ...range }).catch(() => undefined))?.events ?? []).filter(e => want.has(e.seq));
    }
    return proposalDocument(p, evidence);
  }

  /** Re-reads the document of proposal id, if one is open. */
  decided(id: string): void {
    const uri = this.uris.get(id);
    if (uri) this.changed.fire(uri);
  }
}

/** What a proposal command is given: a tree row's proposal, an id, or nothing (it then asks). */
type ProposalArg = P.Proposal | { id?: string; dir?: string; reason?: string } | string | undefined;
/** What arbor.refine is given: a session row's id, RefineRunParams, or nothing (it then asks). */
type RefineArg = string | Partial<P.RefineRunParams> | undefined;

export class ProposalCommands {
  static readonly ids = ['arbor.proposals.refresh', 'arbor.proposals.show', 'arbor.proposals.accept', 'arbor.proposals.reject', 'arbor.refine'];

  constructor(
    private readonly client: ArborClient,
    private readonly tree: ProposalTreeProvider,
    private readonly docs: ProposalDocumentProvider,
    private readonly dir: () => string | undefined,
    private readonly session: (arg: string | undefined, title: string) => Promise<P.Session | undefined>,
  ) {}

  register(showError: (e: unknown) => void): vscode.Disposable[] {
    const r = <A>(id: string, fn: (arg: A) => Promise<unknown>) =>
      vscode.commands.registerCommand(id, (arg: A) => fn.call(this, arg).catch(showError));
    return [
      r('arbor.proposals.refresh', () => this.tree.refresh()),
      r('arbor.proposals.show', this.show),
      r('arbor.proposals.accept', this.accept),
      r('arbor.proposals.reject', this.reject),
      r('arbor.refine', this.refine),
      vscode.languages.registerCodeLensProvider({ scheme: proposalScheme }, new ProposalCodeLenses(this.dir, this.docs)),
    ];
  }

  async show(arg: ProposalArg): Promise<void> {
    const ref = await this.proposal(arg, 'Show which harness proposal?');
    if (!ref) return;
    const doc = await vscode.workspace.openTextDocument(proposalUri(ref.id, ref.dir));
    await vscode.languages.setTextDocumentLanguage(doc, 'diff');
    await vscode.window.showTextDocument(doc, { preview: true });
  }

  async accept(arg: ProposalArg): Promise<void> {
    const ref = await this.proposal(arg, 'Accept which harness proposal?');
    if (!ref) return;
    const known = this.known(ref.id);
    const what = known ? `${proposalLabel(known)} (${ref.id}) into the ${known.scope} harness` : ref.id;
    const ok = await vscode.window.showWarningMessage(`Arbor: accept ${what}?`, {
      modal: true,
      detail: 'The scope\'s gate, when it has one, still checks the change first: a failing gate rejects it.',
    }, 'Accept');
    if (ok !== 'Accept') return;
    const p = await this.client.acceptProposal({ dir: ref.dir, id: ref.id });
    await this.decided(p, decisionMessage(p, 'accept'));
  }

  async reject(arg: ProposalArg): Promise<void> {
    const ref = await this.proposal(arg, 'Reject which harness proposal?');
    if (!ref) return;
    // A reason given by a caller ({id, reason}); a listed Proposal's own reason field is not one.
    let reason = typeof arg === 'object' && !('status' in arg) ? arg.reason : undefined;
    if (reason === undefined) {
      const known = this.known(ref.id);
      reason = await vscode.window.showInputBox({
        title: `Arbor: reject ${known ? proposalLabel(known) : ref.id}`,
        prompt: 'Why? (optional: recorded with the proposal; Enter to reject without a reason, Escape to keep it pending)',
        ignoreFocusOut: true,
      });
      if (reason === undefined) return;
    }
    const p = await this.client.rejectProposal({ dir: ref.dir, id: ref.id, reason: reason.trim() || undefined });
    await this.decided(p, decisionMessage(p, 'reject'));
  }

  /** Asks for an optional focus, runs /refine on the session and says what it proposed. */
  async refine(arg: RefineArg): Promise<void> {
    const s = await this.session(typeof arg === 'string' ? arg : arg?.session, 'Refine the harness from which session?');
    if (!s) return;
    let focus = typeof arg === 'object' ? arg.focus : undefined;
    if (focus === undefined) {
      focus = await vscode.window.showInputBox({
        title: `Arbor: refine the harness from ${sessionTitle(s, 40)}`,
        prompt: 'What to look at (optional; Enter for the costliest habits since the last refine)',
        placeHolder: 'e.g. the failing import',
        ignoreFocusOut: true,
      });
      if (focus === undefined) return;
    }
    const params: P.RefineRunParams = { session: s.id, focus: focus.trim() || undefined, scope: typeof arg === 'object' ? arg.scope : undefined };
    const res = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Arbor: refining the harness from ${sessionTitle(s, 40)}…` },
      () => this.client.refine(params));
    void this.tree.refresh();
    const ps = res.proposals ?? [];
    const text = refineSummary(res);
    const choice = ps.length
      ? await vscode.window.showInformationMessage(text, ps.length === 1 ? 'Show Diff' : 'Show Proposals')
      : await vscode.window.showInformationMessage(text);
    if (!choice) return;
    const pick = ps.length === 1 ? ps[0] : (await vscode.window.showQuickPick(
      ps.map(p => ({ label: proposalLabel(p), description: `${p.id} · ${p.status}`, detail: p.rationale, p })),
      { title: 'Arbor: proposals of this refine' }))?.p;
    if (pick) await this.show(pick);
  }

  private known(id: string): P.Proposal | undefined {
    return this.tree.pending.find(p => p.id === id);
  }

  private async decided(p: P.Proposal, m: Decision): Promise<void> {
    this.docs.decided(p.id);
    await this.tree.refresh();
    if (m.severity === 'warning') void vscode.window.showWarningMessage(m.text);
    else void vscode.window.showInformationMessage(m.text);
  }

  /** The proposal an argument names, or one the user picks from the pending ones. */
  private async proposal(arg: ProposalArg, title: string): Promise<P.ProposalRef | undefined> {
    const id = typeof arg === 'string' ? arg : arg?.id;
    const dir = (typeof arg === 'object' && 'dir' in arg ? arg.dir : undefined) || this.dir();
    if (id) return { id, dir };
    await this.tree.refresh();
    const list = this.tree.pending;
    if (list.length === 0) {
      vscode.window.showInformationMessage('Arbor: no harness proposals are waiting for review.');
      return undefined;
    }
    const pick = await vscode.window.showQuickPick(
      list.map(p => ({ label: proposalLabel(p), description: proposalDescription(p), detail: p.rationale, id: p.id })), { title });
    return pick ? { id: pick.id, dir } : undefined;
  }
}

/**
 * Accept and Reject on a pending proposal's open review document, as code lenses above its first
 * line (a read-only document gets no quick fixes: VS Code offers them only where one can edit).
 */
export class ProposalCodeLenses implements vscode.CodeLensProvider {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChangeCodeLenses = this.changed.event;

  constructor(private readonly dir: () => string | undefined, docs: ProposalDocumentProvider) {
    // A decided proposal's document is read again; its lenses go with its pending status.
    docs.onDidChange(() => this.changed.fire());
  }

  provideCodeLenses(doc: vscode.TextDocument): vscode.CodeLens[] {
    const st = documentStatus(doc.lineAt(0).text);
    if (!st || st.status !== Pending) return [];
    const ref = { ...parseUri(doc.uri) };
    ref.dir ??= this.dir();
    const top = new vscode.Range(0, 0, 0, 0);
    const lens = (title: string, command: string) => new vscode.CodeLens(top, { command, title, arguments: [{ id: ref.id, dir: ref.dir }] });
    return [lens(`$(check) Accept harness proposal ${ref.id}`, 'arbor.proposals.accept'), lens(`$(close) Reject harness proposal ${ref.id}…`, 'arbor.proposals.reject')];
  }
}
