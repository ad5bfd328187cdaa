// The Sessions view: the daemon's session tree by parent, with state, model, tokens and branch.
import * as vscode from 'vscode';
import * as P from './protocol';
import { SessionStore, sessionOrigin, sessionTitle, sessionDescription } from './sessions';

const stateIcons: Record<string, [string, string | undefined]> = {
  [P.StateAdmitted]: ['clock', 'charts.yellow'],
  [P.StateRunning]: ['sync~spin', 'charts.blue'],
  [P.StateIdle]: ['pass', 'charts.green'],
  [P.StateInactive]: ['circle-outline', undefined],
  [P.StateStopped]: ['debug-stop', undefined],
  [P.StateFailed]: ['error', 'charts.red'],
};

export class SessionTreeProvider implements vscode.TreeDataProvider<string> {
  private readonly changed = new vscode.EventEmitter<string | undefined>();
  readonly onDidChangeTreeData = this.changed.event;

  /** filter keeps the sessions of this window's workspace folders. */
  constructor(private readonly store: SessionStore, private readonly filter: (s: P.Session) => boolean) {
    store.onDidChange(() => this.changed.fire(undefined));
  }

  getChildren(id?: string): string[] {
    const list = id ? this.store.children(id) : this.store.roots().filter(this.filter);
    return list.map(s => s.id);
  }

  getParent(id: string): string | undefined {
    const p = this.store.get(id)?.parent;
    return p && this.store.get(p) ? p : undefined;
  }

  getTreeItem(id: string): vscode.TreeItem {
    const s = this.store.get(id);
    if (!s) return new vscode.TreeItem(id);
    const hasChildren = this.store.children(id).length > 0;
    const item = new vscode.TreeItem(sessionTitle(s), hasChildren ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.None);
    item.id = s.id;
    item.description = sessionDescription(s);
    const discarded = s.discarded;
    const [icon, color] = discarded ? ['trash', undefined] : stateIcons[s.state] ?? ['circle-outline', undefined];
    item.iconPath = new vscode.ThemeIcon(icon, color ? new vscode.ThemeColor(color) : undefined);
    // "session.live" / "session.done", then ".child" for a session with a parent (Merge into parent).
    item.contextValue = (P.liveStates.has(s.state) && !discarded ? 'session.live' : 'session.done') + (s.parent ? '.child' : '');
    item.tooltip = tooltip(s);
    item.command = { command: 'arbor.openTranscript', title: 'Open Transcript', arguments: [s.id] };
    return item;
  }
}

function tooltip(s: P.Session): vscode.MarkdownString {
  const t = s.total ?? s.usage;
  const md = new vscode.MarkdownString();
  md.appendMarkdown(`**${escape(sessionTitle(s, 200))}**\n\n`);
  md.appendMarkdown(`- id: \`${s.id}\`\n- state: ${s.state}${s.error ? ` — ${escape(s.error)}` : ''}\n`);
  if (s.model) md.appendMarkdown(`- model: \`${s.model}\`\n`);
  if (s.branch) md.appendMarkdown(`- branch: \`${s.branch}\`\n`);
  if (s.worktree) md.appendMarkdown(`- worktree: \`${s.worktree}\`\n`);
  const origin = sessionOrigin(s);
  if (origin) md.appendMarkdown(`- ${origin}\n`);
  if (s.discarded) md.appendMarkdown(`- discarded${s.archived ? `; its work is kept at \`${s.archived}\`` : ''}\n`);
  if (s.goal) md.appendMarkdown(`- goal (${s.goal.status.replace(/_/g, ' ')}${s.goal.waiting ? `, waiting on ${s.goal.waiting}` : ''}): ${escape(s.goal.objective)}${s.goal.until ? ` — until \`${s.goal.until}\`` : ''}\n`);
  if (t) md.appendMarkdown(`- tokens (with descendants): ${t.inputTokens} in / ${t.outputTokens} out, ${t.modelCalls} model calls${t.costUSD ? `, $${t.costUSD.toFixed(4)}` : ''}\n`);
  return md;
}

function escape(s: string): string {
  return s.replace(/[\\`*_{}[\]()#+\-.!|<>]/g, c => '\\' + c);
}
