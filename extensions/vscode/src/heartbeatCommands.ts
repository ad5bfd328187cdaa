// Heartbeats from the editor: Add Heartbeat… (an instruction and a schedule) on a session, and
// Heartbeats, a list of them (of one session or all) with their next due time, runs and
// pending count, from which one is deleted.
import * as vscode from 'vscode';
import * as P from './protocol';
import { ArborClient } from './client';
import { SessionStore, sessionTitle } from './sessions';
import { heartbeatState, parseSchedule, scheduleText } from './heartbeats';

export class HeartbeatCommands {
  static readonly ids = ['arbor.heartbeat.create', 'arbor.heartbeat.list', 'arbor.heartbeat.delete'];

  constructor(
    private readonly client: ArborClient,
    private readonly store: SessionStore,
    private readonly session: (arg: string | undefined, title: string) => Promise<P.Session | undefined>,
  ) {}

  register(showError: (e: unknown) => void): vscode.Disposable[] {
    const r = (id: string, fn: (arg: string | undefined) => Promise<unknown>) =>
      vscode.commands.registerCommand(id, (arg: string | undefined) => fn.call(this, arg).catch(showError));
    return [
      r('arbor.heartbeat.create', this.create),
      r('arbor.heartbeat.list', arg => this.list(arg, false)),
      r('arbor.heartbeat.delete', arg => this.list(arg, true)),
    ];
  }

  async create(arg: string | undefined): Promise<P.Heartbeat | undefined> {
    const s = await this.session(arg, 'Add a heartbeat to which session?');
    if (!s) return undefined;
    const title = `Arbor: heartbeat for ${sessionTitle(s, 40)}`;
    const instruction = await vscode.window.showInputBox({
      title, prompt: 'What should the session be told on each beat? It arrives as a message (coalesced while the session is busy).',
      placeHolder: 'e.g. check the CI and fix what broke', ignoreFocusOut: true,
    });
    if (!instruction) return undefined;
    const schedule = await vscode.window.showInputBox({
      title, prompt: 'When: "every 10m" (an interval) or a cron expression (minute hour day-of-month month day-of-week)',
      placeHolder: 'every 10m   or   */15 * * * *', ignoreFocusOut: true,
      validateInput: v => { try { parseSchedule(v); return undefined; } catch (e) { return (e as Error).message; } },
    });
    if (!schedule) return undefined;
    const hb = await this.client.heartbeatCreate({ session: s.id, instruction, ...parseSchedule(schedule) });
    vscode.window.showInformationMessage(`Arbor: heartbeat ${hb.id} on ${sessionTitle(s, 40)}, ${scheduleText(hb)}: ${heartbeatState(hb)}`);
    return hb;
  }

  /**
   * Lists the heartbeats of the session arg names (all sessions' without one) in a quick pick;
   * the trash button, or picking one with del, deletes it after asking.
   */
  async list(arg: string | undefined, del: boolean): Promise<void> {
    const s = arg ? await this.session(arg, '') : undefined;
    const res = await this.client.heartbeatList({ session: s?.id });
    const where = s ? sessionTitle(s, 40) : 'all sessions';
    if (!res.heartbeats?.length) {
      vscode.window.showInformationMessage(`Arbor: no heartbeats on ${where}.`);
      return;
    }
    type Item = vscode.QuickPickItem & { hb: P.Heartbeat };
    const trash = { iconPath: new vscode.ThemeIcon('trash'), tooltip: 'Delete this heartbeat' };
    const qp = vscode.window.createQuickPick<Item>();
    qp.title = `Arbor: heartbeats of ${where}${del ? ' — pick one to delete' : ''}`;
    qp.items = res.heartbeats.map(hb => {
      const owner = this.store.get(hb.session);
      return {
        label: `${hb.id} · ${scheduleText(hb)}`,
        description: heartbeatState(hb),
        detail: `${s ? '' : `${owner ? sessionTitle(owner, 30) : hb.session.slice(0, 8)}: `}${hb.instruction.split('\n')[0]}`,
        hb, buttons: [trash],
      };
    });
    const chosen = await new Promise<P.Heartbeat | undefined>(resolve => {
      qp.onDidAccept(() => resolve(del ? qp.selectedItems[0]?.hb : undefined));
      qp.onDidTriggerItemButton(e => resolve(e.item.hb));
      qp.onDidHide(() => resolve(undefined));
      qp.show();
    });
    qp.dispose();
    if (!chosen) return;
    const ok = await vscode.window.showWarningMessage(`Arbor: delete heartbeat ${chosen.id} (${scheduleText(chosen)}: ${chosen.instruction.split('\n')[0]})?`, { modal: true }, 'Delete');
    if (ok !== 'Delete') return;
    const gone = await this.client.heartbeatDelete({ id: chosen.id });
    vscode.window.showInformationMessage(`Arbor: deleted heartbeat ${gone.id} after ${gone.delivered} delivered runs.`);
  }
}
