// Goals from the editor: Set Goal… (objective, budgets in the CLI's --budget grammar, an end
// condition), Pause / Resume / Clear Goal, Show Goal (a read-only markdown document that follows
// the session) and Show Progress (the cost–progress series as a table).
import * as vscode from 'vscode';
import * as P from './protocol';
import { ArborClient } from './client';
import { SessionStore, sessionTitle } from './sessions';
import { goalHolds, parseBudget, renderGoal, renderProgress } from './goals';

export const goalScheme = 'arbor-goal';
type Kind = 'goal' | 'progress';

export function goalUri(s: P.Session, kind: Kind): vscode.Uri {
  const name = sessionTitle(s, 40).replace(/[\/\\?#%]/g, ' ');
  return vscode.Uri.from({ scheme: goalScheme, path: `/${kind === 'goal' ? 'goal' : 'progress'} of ${name}.md`, query: new URLSearchParams({ id: s.id, kind }).toString() });
}

/** The goal and progress documents, fetched on open and again when their session changes. */
export class GoalDocumentProvider implements vscode.TextDocumentContentProvider {
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  private readonly open = new Map<string, vscode.Uri>();

  constructor(private readonly client: ArborClient, private readonly store: SessionStore) {}

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const q = new URLSearchParams(uri.query);
    const id = q.get('id') ?? '';
    this.open.set(uri.toString(), uri);
    const s = this.store.get(id);
    const title = s ? sessionTitle(s, 200) : id;
    try {
      if (q.get('kind') === 'progress') return renderProgress(title, await this.client.progress({ session: id }));
      return renderGoal(title, (await this.client.goalGet({ session: id })).goal ?? undefined);
    } catch (err) {
      return `# ${title}\n\n**Error:** ${err instanceof Error ? err.message : String(err)}\n`;
    }
  }

  /** A session changed (its tree record): its open documents are read again. */
  onSessionChanged(id: string): void {
    for (const uri of this.open.values()) {
      if (new URLSearchParams(uri.query).get('id') === id) this.changed.fire(uri);
    }
  }

  forget(uri: vscode.Uri): void {
    this.open.delete(uri.toString());
  }
}

export class GoalCommands {
  static readonly ids = ['arbor.goal.set', 'arbor.goal.pause', 'arbor.goal.resume', 'arbor.goal.clear', 'arbor.goal.show', 'arbor.progress'];

  constructor(
    private readonly client: ArborClient,
    private readonly store: SessionStore,
    private readonly docs: GoalDocumentProvider,
    private readonly session: (arg: string | undefined, title: string, filter?: (s: P.Session) => boolean) => Promise<P.Session | undefined>,
  ) {}

  register(showError: (e: unknown) => void): vscode.Disposable[] {
    const r = (id: string, fn: (arg: string | undefined) => Promise<unknown>) =>
      vscode.commands.registerCommand(id, (arg: string | undefined) => fn.call(this, arg).catch(showError));
    return [
      r('arbor.goal.set', this.set),
      r('arbor.goal.pause', arg => this.control(arg, 'pause')),
      r('arbor.goal.resume', arg => this.control(arg, 'resume')),
      r('arbor.goal.clear', arg => this.control(arg, 'clear')),
      r('arbor.goal.show', arg => this.show(arg, 'goal')),
      r('arbor.progress', arg => this.show(arg, 'progress')),
      vscode.workspace.onDidCloseTextDocument(d => { if (d.uri.scheme === goalScheme) this.docs.forget(d.uri); }),
    ];
  }

  /** Arbor: Set Goal… — asks for the objective, the budgets and an end condition. */
  async set(arg: string | undefined): Promise<P.Goal | undefined> {
    const s = await this.session(arg, 'Set a goal on which session?');
    if (!s) return undefined;
    const title = `Arbor: goal for ${sessionTitle(s, 40)}`;
    const objective = await vscode.window.showInputBox({
      title, prompt: 'What should the goal achieve? The session keeps taking turns until it is met, a budget runs out or it stalls.',
      placeHolder: 'e.g. make the test suite pass', ignoreFocusOut: true,
    });
    if (!objective) return undefined;
    const budgetText = await vscode.window.showInputBox({
      title, prompt: 'Budgets over the session and all its subagents (optional; empty for no limit)',
      placeHolder: 'tokens=50000,turns=20,wall=2h,cost=5', ignoreFocusOut: true,
      validateInput: v => { try { parseBudget(v); return undefined; } catch (e) { return (e as Error).message; } },
    });
    if (budgetText === undefined) return undefined;
    const budget = parseBudget(budgetText);
    const until = await vscode.window.showInputBox({
      title, prompt: 'End condition (optional): a command run in the worktree after each turn; only its pass completes the goal',
      placeHolder: 'e.g. make test', ignoreFocusOut: true,
    });
    if (until === undefined) return undefined;
    const params: P.GoalSetParams = { session: s.id, objective, ...budget, until: until.trim() || undefined };
    const held = (await this.client.goalGet({ session: s.id })).goal;
    if (held && goalHolds(held)) {
      const ok = await vscode.window.showWarningMessage(
        `Arbor: ${sessionTitle(s, 40)} already has a goal (${held.status}): "${held.objective}". Replace it?`, { modal: true }, 'Replace');
      if (ok !== 'Replace') return undefined;
      params.replace = true;
    }
    const g = await this.client.goalSet(params);
    vscode.window.showInformationMessage(`Arbor: goal ${g.status} on ${sessionTitle(s, 40)}: ${g.objective}`);
    return g;
  }

  async control(arg: string | undefined, action: 'pause' | 'resume' | 'clear'): Promise<void> {
    const can: Record<string, (s: P.Session) => boolean> = {
      pause: s => s.goal?.status === 'active',
      resume: s => !!s.goal && ['paused', 'stalled', 'budget_limited'].includes(s.goal.status),
      clear: s => !!s.goal,
    };
    const s = await this.session(arg, `${action[0].toUpperCase()}${action.slice(1)} the goal of which session?`, can[action]);
    if (!s) return;
    const g = await this.client.goalControl({ session: s.id, action });
    const what = action === 'clear' ? 'cleared' : g.status.replace(/_/g, ' ');
    vscode.window.showInformationMessage(`Arbor: goal of ${sessionTitle(s, 40)} ${what}: ${g.objective}`);
  }

  async show(arg: string | undefined, kind: Kind): Promise<void> {
    const s = await this.session(arg, kind === 'goal' ? 'Show the goal of which session?' : 'Show the progress of which session?');
    if (!s) return;
    const doc = await vscode.workspace.openTextDocument(goalUri(s, kind));
    await vscode.languages.setTextDocumentLanguage(doc, 'markdown');
    await vscode.window.showTextDocument(doc, { preview: true });
  }
}
