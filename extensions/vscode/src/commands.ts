// The arbor.* commands. Each accepts what a tree row passes (a session id), what a code action
// from the daemon passes (the arbor/* params object), or nothing (it then asks).
import * as vscode from 'vscode';
import * as P from './protocol';
import { ArborClient } from './client';
import { SessionStore, canParent, sessionTitle, sessionDescription } from './sessions';
import { discardOutcome } from './reviewModel';
import { fileUri, transcriptUri } from './documents';
import { patchUri } from './patch';
import { TrustUI, trustPrompt, withTrust } from './trust';

type Arg = string | Partial<P.SessionCreateParams & P.SendParams & P.ForkParams> | undefined;

export class Commands {
  constructor(
    private readonly client: ArborClient,
    private readonly store: SessionStore,
    private readonly reveal: (id: string) => void,
  ) {}

  /** Called with a session whose diff the user opened (the Source Control view then lists it). */
  reviewed: (id: string) => void = () => undefined;

  /** Registers every command; the ids are also the ones the languageclient must not register. */
  static readonly ids = [P.CmdNewTask, P.CmdSpawnSubagent, P.CmdStop, P.CmdSend, P.CmdFork,
    'arbor.openTranscriptMarkdown', 'arbor.reviewDiff', P.CmdDiscard, 'arbor.refresh', 'arbor.daemonStatus', 'arbor.trust'];

  register(): vscode.Disposable[] {
    const r = (id: string, fn: (arg: Arg) => Promise<unknown>) =>
      vscode.commands.registerCommand(id, (arg: Arg) => fn.call(this, arg).catch(showError));
    return [
      r(P.CmdNewTask, this.newTask),
      r(P.CmdSpawnSubagent, this.spawnSubagent),
      r(P.CmdStop, this.stop),
      r(P.CmdSend, this.send),
      r(P.CmdFork, this.fork),
      r('arbor.openTranscriptMarkdown', this.openTranscript),
      r('arbor.reviewDiff', this.reviewDiff),
      r(P.CmdDiscard, this.discardCommand),
      r('arbor.refresh', this.refresh),
      r('arbor.daemonStatus', this.daemonStatus),
      r('arbor.trust', this.trust),
    ];
  }

  async newTask(arg: Arg, parent?: string): Promise<P.Session | undefined> {
    const given = typeof arg === 'object' ? arg : {};
    const up = given.parent || parent;
    const ps = up ? this.store.get(up) : undefined;
    if (ps && !canParent(ps)) throw new Error(`${sessionTitle(ps, 40)} is ${ps.discarded ? 'discarded' : ps.state}: it cannot take a subagent`);
    const dir = given.dir || workspaceDir();
    if (!dir) throw new Error('open a folder inside a git repository first: Arbor runs each task on a branch of that repository');
    const model = given.model || vscode.workspace.getConfiguration('arbor').get<string>('model') || undefined;
    // The editor's buffer, unsaved lines included, not the file on disk that the daemon read.
    const selection = given.selection && bufferSelection(given.selection);
    let task = given.task;
    let failure: string | undefined;
    for (;;) {
      if (!task || failure) {
        task = await vscode.window.showInputBox({
          title: up ? `Arbor: New subagent of ${sessionTitle(ps ?? { id: up, task: up } as P.Session, 40)}` : 'Arbor: New Task',
          prompt: failure ? `Not started: ${failure} — edit the task and press Enter to try again`
            : given.selection ? 'What should the agent do with the selection?' : 'What should the agent do?',
          placeHolder: 'e.g. rename Foo to Bar across the package and fix the tests',
          value: task,
          ignoreFocusOut: true,
        });
      }
      if (!task) return undefined;
      const params: P.SessionCreateParams = { task, dir, model, parent: up, name: given.name, selection };
      try {
        const s = await withTrust(() => this.client.create(params), this.trustUI);
        if (!s) return undefined;
        this.store.upsert(s);
        this.reveal(s.id);
        vscode.window.setStatusBarMessage(`Arbor: started ${sessionTitle(s, 40)} on ${s.branch}`, 5000);
        return s;
      } catch (e) {
        // The typed task is offered again, prefilled, with the reason.
        failure = e instanceof Error ? e.message : String(e);
        showError(e);
      }
    }
  }

  async spawnSubagent(arg: Arg): Promise<unknown> {
    const parent = typeof arg === 'string' ? arg : arg?.parent || (await this.pick('Spawn a subagent of which session?', canParent))?.id;
    if (!parent) return undefined;
    return this.newTask(typeof arg === 'object' ? arg : undefined, parent);
  }

  async stop(arg: Arg): Promise<void> {
    const s = await this.session(arg, 'Stop which session?', x => P.liveStates.has(x.state));
    if (s) await this.client.stopSession(s.id);
  }

  async send(arg: Arg): Promise<void> {
    const s = await this.session(arg, 'Send a message to which session?');
    if (!s) return;
    const text = (typeof arg === 'object' && arg.text) || await vscode.window.showInputBox({
      title: `Arbor: message to ${sessionTitle(s, 40)}`, prompt: 'Delivered to a running turn, or queued for the next one', ignoreFocusOut: true,
    });
    if (!text) return;
    const res = await this.client.send({ id: s.id, text, mode: (typeof arg === 'object' && arg.mode) || 'auto' });
    vscode.window.setStatusBarMessage(`Arbor: message ${res.status}`, 4000);
  }

  async fork(arg: Arg): Promise<P.Session | undefined> {
    const s = await this.session(arg, 'Fork which session?');
    if (!s) return undefined;
    const f = await withTrust(() => this.client.fork({ id: s.id, atSeq: typeof arg === 'object' ? arg.atSeq : undefined }), this.trustUI);
    if (f?.id) { this.store.upsert(f); this.reveal(f.id); }
    return f;
  }

  async openTranscript(arg: Arg): Promise<void> {
    const s = await this.session(arg, 'Open the Markdown transcript of which session?');
    if (!s) return;
    const doc = await vscode.workspace.openTextDocument(transcriptUri(s));
    await vscode.languages.setTextDocumentLanguage(doc, 'markdown');
    await vscode.window.showTextDocument(doc, { preview: true, preserveFocus: false });
  }

  async reviewDiff(arg: Arg): Promise<void> {
    const s = await this.session(arg, 'Review the diff of which session?');
    if (!s) return;
    const d = await this.client.diff({ id: s.id });
    this.reviewed(s.id);
    if (!d.files?.length) {
      vscode.window.showInformationMessage(`Arbor: ${sessionTitle(s, 40)} has no changes against ${d.base?.slice(0, 8) ?? 'its base'}.`);
      return;
    }
    type Item = vscode.QuickPickItem & { file?: P.FileDiff; action?: 'patch' | 'accept' | 'discard' };
    const acceptButton = { iconPath: new vscode.ThemeIcon('check'), tooltip: 'Accept this file onto your branch' };
    const items: Item[] = [
      ...d.files.map(f => ({ label: f.path, description: `${f.status} +${f.additions} −${f.deletions}`, file: f, buttons: [acceptButton] })),
      { label: '', kind: vscode.QuickPickItemKind.Separator },
      { label: '$(diff) Whole patch', description: `${d.files.length} files`, action: 'patch' },
      { label: '$(check-all) Accept all', description: 'squash the session\'s change onto your current branch', action: 'accept' },
      { label: '$(trash) Discard session', description: 'remove its worktree (asks first)', action: 'discard' },
    ];
    const qp = vscode.window.createQuickPick<Item>();
    qp.title = `Arbor: diff of ${sessionTitle(s, 40)} (${s.branch})`;
    qp.items = items;
    const pick = await new Promise<Item | undefined>(resolve => {
      qp.onDidAccept(() => resolve(qp.selectedItems[0]));
      qp.onDidTriggerItemButton(e => { resolve(undefined); void this.accept(s, [e.item.file!.path], d.head).catch(showError); });
      qp.onDidHide(() => resolve(undefined));
      qp.show();
    });
    qp.dispose();
    if (!pick) return;
    if (pick.action === 'accept') return void await this.accept(s, undefined, d.head);
    if (pick.action === 'discard') return void await this.discard(s);
    if (!pick.file) {
      // A read-only virtual document: closing it asks nothing, and it is never saved by mistake.
      const doc = await vscode.workspace.openTextDocument(patchUri(s));
      await vscode.languages.setTextDocumentLanguage(doc, 'diff');
      await vscode.window.showTextDocument(doc, { preview: true });
      return;
    }
    const f = pick.file;
    await vscode.commands.executeCommand('vscode.diff',
      fileUri(s.id, f.oldPath || f.path, 'base', f.status === 'added'), fileUri(s.id, f.path, 'head', f.status === 'deleted'),
      `${f.path} (${s.branch})`);
  }

  /**
   * Brings the session's change (or some files of it) onto the user's branch: up to head, the
   * commit of the diff the user reviewed, when given.
   */
  private async accept(s: P.Session, files?: string[], head?: string): Promise<void> {
    const what = files ? files.join(', ') : `all of ${sessionTitle(s, 40)}`;
    const ok = await vscode.window.showWarningMessage(`Arbor: accept ${what} onto your current branch?`, { modal: true }, 'Accept');
    if (ok !== 'Accept') return;
    const res = await this.client.accept({ id: s.id, files, head });
    vscode.window.showInformationMessage(`Arbor: accepted ${res.files?.length ?? 0} file(s) as ${res.commit?.slice(0, 8)}.`);
  }

  private async discard(s: P.Session): Promise<void> {
    const ok = await vscode.window.showWarningMessage(
      `Arbor: discard ${sessionTitle(s, 40)}? Its worktree is removed; unmerged work on ${s.branch} is dropped only with "Discard anyway".`,
      { modal: true }, 'Discard', 'Discard anyway');
    if (!ok) return;
    const res = await this.client.discard({ id: s.id, force: ok === 'Discard anyway' });
    if (res?.session) this.store.upsert(res.session);
    const where = discardOutcome(s.branch, res);
    vscode.window.showInformationMessage(`Arbor: discarded ${sessionTitle(s, 40)}; ${where}.`);
  }

  async discardCommand(arg: Arg): Promise<void> {
    const s = await this.session(arg, 'Discard which session?');
    if (s) await this.discard(s);
  }

  async refresh(): Promise<void> {
    const res = await this.client.sessions({});
    // Upserted, not replaced: a session created after the list was read may already be in the
    // store (its tree delta can overtake this reply), and sessions are never deleted.
    this.store.apply({ full: false, sessions: res.sessions ?? [] });
  }

  async daemonStatus(): Promise<void> {
    const st = await this.client.status();
    const sandbox = st.sandbox?.available ? 'kernels sandboxed (bwrap)' : `kernels UNSANDBOXED: ${st.sandbox?.reason ?? 'unknown'}`;
    vscode.window.showInformationMessage(`Arbor daemon ${st.version} (pid ${st.pid}): ${st.live} live of ${st.sessions} sessions, ${st.clients} clients, socket ${st.socket}; ${sandbox}`);
  }

  /** Asks with a modal warning listing the settings; grants exactly what it showed. */
  private readonly trustUI: TrustUI = {
    ask: async st => {
      const { message, detail } = trustPrompt(st);
      return await vscode.window.showWarningMessage(message, { modal: true, detail }, 'Trust and continue') === 'Trust and continue';
    },
    grant: st => this.client.trustGrant({ dir: st.repo, hash: st.hash ?? '' }),
  };

  /** Arbor: Trust Repository — reviews the workspace's guarded settings and trusts them. */
  async trust(): Promise<void> {
    const dir = workspaceDir();
    if (!dir) throw new Error('open a folder inside a git repository first');
    const st = await this.client.trustGet({ dir });
    if (!st.settings.length) {
      vscode.window.showInformationMessage(`Arbor: ${st.file} sets nothing that needs trust.`);
      return;
    }
    if (st.trusted) {
      vscode.window.showInformationMessage(`Arbor: ${st.repo} is trusted with its current settings.`);
      return;
    }
    if (await this.trustUI.ask(st)) {
      await this.trustUI.grant(st);
      vscode.window.showInformationMessage(`Arbor: trusted ${st.repo}.`);
    }
  }

  /** The session an argument names, or one the user picks. */
  async session(arg: Arg, title: string, filter?: (s: P.Session) => boolean): Promise<P.Session | undefined> {
    const id = typeof arg === 'string' ? arg : arg?.id;
    if (id) return this.store.get(id) ?? await this.client.get(id);
    return this.pick(title, filter);
  }

  private async pick(title: string, filter: (s: P.Session) => boolean = () => true): Promise<P.Session | undefined> {
    const list = this.store.all().filter(filter);
    if (list.length === 0) {
      vscode.window.showInformationMessage('Arbor: no sessions to choose from.');
      return undefined;
    }
    const pick = await vscode.window.showQuickPick(
      list.map(s => ({ label: sessionTitle(s), description: sessionDescription(s), id: s.id })), { title });
    return pick ? this.store.get(pick.id) : undefined;
  }
}

/**
 * The selection with its text from the editor's buffer when the document is open (unsaved lines
 * included): the daemon's code action read the file on disk.
 */
function bufferSelection(sel: P.Selection): P.Selection {
  const doc = vscode.workspace.textDocuments.find(d => d.uri.toString() === sel.uri || d.uri.toString() === vscode.Uri.parse(sel.uri).toString());
  if (!doc) return sel;
  const end = Math.min(sel.endLine, doc.lineCount - 1);
  const start = Math.min(sel.startLine, end);
  return { ...sel, text: doc.getText(new vscode.Range(start, 0, end, doc.lineAt(end).text.length)) };
}

/** The folder of the active editor, else the first workspace folder. */
export function workspaceDir(): string | undefined {
  const active = vscode.window.activeTextEditor?.document.uri;
  const folder = (active && vscode.workspace.getWorkspaceFolder(active)) || vscode.workspace.workspaceFolders?.[0];
  return folder?.uri.fsPath;
}

export function showError(err: unknown): void {
  const msg = err instanceof Error ? err.message : String(err);
  void vscode.window.showErrorMessage(`Arbor: ${msg}`);
}
