// Arbor for VS Code: starts `arbor lsp` (which starts the daemon when none runs) and shows the
// daemon's session tree, transcripts and diffs. All logic lives in the daemon; this is a view.
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import * as vscode from 'vscode';
import * as P from './protocol';
import { ArborClient } from './client';
import { findBinary, found, notFoundMessage } from './binary';
import { Commands, showError, workspaceDir } from './commands';
import { FileAtProvider, TranscriptProvider, fileScheme, transcriptScheme } from './documents';
import { SessionStore, sandboxWarning, statusText } from './sessions';
import { SessionTreeProvider } from './tree';
import { PatchProvider, patchScheme } from './patch';
import { Review } from './reviewView';
import { Merges } from './merge';
import { ProposalCommands, ProposalDocumentProvider, ProposalTreeProvider, proposalScheme } from './proposalView';
import { isHarnessEvent } from './proposals';
import { GoalCommands, GoalDocumentProvider, goalScheme } from './goalCommands';
import { HeartbeatCommands } from './heartbeatCommands';
import { TranscriptPanels, TurnDiffProvider, turnDiffScheme } from './transcriptPanel';
import { TranscriptCommands } from './transcriptCommands';
import { ProgressPanels } from './progressPanel';
import { HarnessCommands, HarnessDocumentProvider, HarnessTreeProvider, harnessScheme } from './harnessView';

let client: ArborClient | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel('Arbor', { log: true });
  const store = new SessionStore();
  client = new ArborClient(output, new Set([...Commands.ids, ...ProposalCommands.ids, ...GoalCommands.ids, ...HeartbeatCommands.ids, ...TranscriptCommands.ids, ...Review.ids, ...Merges.ids, ...HarnessCommands.ids, 'arbor.progressChart']));
  const transcripts = new TranscriptProvider(client, store);
  const files = new FileAtProvider(client);
  const patches = new PatchProvider(client);

  const tree = new SessionTreeProvider(store, inWorkspace);
  const view = vscode.window.createTreeView('arbor.sessions', { treeDataProvider: tree, showCollapseAll: true });
  const reveal = (id: string) => { if (view.visible) void view.reveal(id, { select: true, focus: false }).then(undefined, () => undefined); };
  const commands = new Commands(client, store, reveal);
  const panels: TranscriptPanels = new TranscriptPanels(client, store, vscode.Uri.joinPath(context.extensionUri, 'media'), {
    fork: async (id, atSeq) => { await vscode.commands.executeCommand('arbor.forkFromEvent', { id, atSeq }); },
    turnDiff: async (id, turn) => { await vscode.commands.executeCommand('arbor.turnDiff', { id, turn }); },
    open: async id => { await vscode.commands.executeCommand('arbor.openTranscript', id); },
  }, id => transcripts.follows(id));
  const charts = new ProgressPanels(client, store, context.extensionUri);
  const harness = new HarnessTreeProvider(client, store, workspaceDir, inWorkspace);
  const harnessView = vscode.window.createTreeView('arbor.harness', { treeDataProvider: harness, showCollapseAll: true });
  const harnessDocs = new HarnessDocumentProvider(client);
  const harnessCommands = new HarnessCommands(client, harness, harnessDocs);
  const transcriptCommands = new TranscriptCommands(store, () => panels, (arg, title) => commands.session(arg, title), p => commands.fork(p));

  const pickSession = (id: string | undefined, title: string) => commands.session(id, title);
  const review = new Review(client, store, files, patches, pickSession);
  commands.reviewed = id => void review.open(id).catch(showError);
  const merges = new Merges(client, store, context.globalStorageUri, pickSession);

  const goalDocs = new GoalDocumentProvider(client, store);
  const goalCommands = new GoalCommands(client, store, goalDocs, (arg, title, filter) => commands.session(arg, title, filter));

  const heartbeatCommands = new HeartbeatCommands(client, store, (arg, title) => commands.session(arg, title));

  const proposals = new ProposalTreeProvider(client, workspaceDir);
  const proposalView = vscode.window.createTreeView('arbor.proposals', { treeDataProvider: proposals });
  proposals.bind(proposalView);
  const proposalDocs = new ProposalDocumentProvider(client);
  const proposalCommands = new ProposalCommands(client, proposals, proposalDocs, workspaceDir, (arg, title) => commands.session(arg, title));
  proposalView.onDidChangeVisibility(e => { if (e.visible) proposals.schedule(0); });
  // Proposals are made and decided inside sessions' turns: list them again when a session of
  // this window changes state (a turn ended), besides on the harness events of attached ones.
  const states = new Map<string, string>();
  store.onDidChange(() => {
    let changed = false;
    for (const s of store.all().filter(inWorkspace)) {
      if (states.get(s.id) !== s.state) { states.set(s.id, s.state); changed = true; }
    }
    if (changed && client?.running) { proposals.schedule(); harness.schedule(); }
  });

  const status = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 50);
  status.command = 'workbench.view.extension.arbor';
  const updateStatus = () => {
    const mine = store.all().filter(inWorkspace);
    status.text = statusText(mine);
    status.tooltip = `Arbor sessions of this workspace running or waiting for a slot (${mine.length} in all)`;
    status.show();
  };
  store.onDidChange(updateStatus);
  // VS Code keeps a row's collapsed state from when it first showed it, childless: reveal new
  // subagents so the user sees the tree grow.
  const known = new Set<string>();
  const unrevealed = new Set<string>();
  const revealNew = () => {
    if (!view.visible) return;
    for (const id of unrevealed) void view.reveal(id, { select: false, focus: false }).then(undefined, () => undefined);
    unrevealed.clear();
  };
  store.onDidChange(() => {
    for (const s of store.all()) {
      if (known.has(s.id)) continue;
      known.add(s.id);
      if (s.parent && store.get(s.parent)) unrevealed.add(s.id);
    }
    revealNew();
  });
  view.onDidChangeVisibility(revealNew);

  context.subscriptions.push(
    output, view, proposalView, status, client,
    vscode.workspace.registerTextDocumentContentProvider(transcriptScheme, transcripts),
    vscode.workspace.registerTextDocumentContentProvider(fileScheme, files),
    vscode.workspace.registerTextDocumentContentProvider(patchScheme, patches),
    vscode.workspace.registerTextDocumentContentProvider(proposalScheme, proposalDocs),
    vscode.workspace.registerTextDocumentContentProvider(goalScheme, goalDocs),
    ...proposalCommands.register(showError),
    ...goalCommands.register(showError),
    ...heartbeatCommands.register(showError),
    ...commands.register(),
    panels,
    vscode.workspace.registerTextDocumentContentProvider(turnDiffScheme, new TurnDiffProvider(client, store)),
    ...transcriptCommands.register(showError),
    ...review.register(showError),
    ...merges.register(showError),
    vscode.workspace.onDidChangeTextDocument(e => merges.onEdited(e.document)),
    harnessView,
    charts,
    ...charts.register((arg, title) => commands.session(arg, title), showError),
    vscode.workspace.registerTextDocumentContentProvider(harnessScheme, harnessDocs),
    ...harnessCommands.register(showError),
  );

  const handlers = {
    sessionTree: (p: P.SessionTreeParams) => {
      store.apply(p);
      for (const s of p.sessions ?? []) { transcripts.onSessionChanged(s.id); goalDocs.onSessionChanged(s.id); panels.onSessionChanged(s.id); review.onSessionChanged(s); }
    },
    event: (e: P.Event) => {
      transcripts.onEvent(e);
      panels.onEvent(e);
      charts.onEvent(e);
      if (isHarnessEvent(e)) { proposals.schedule(); harness.schedule(); }
    },
    fellBehind: (p: P.FellBehindParams) => { transcripts.onFellBehind(p); panels.onFellBehind(p); },
    restarted: () => { void transcripts.reattachAll(); void panels.reattachAll(); void proposals.refresh(); },
  };

  context.subscriptions.push(vscode.workspace.onDidChangeConfiguration(async e => {
    if (!e.affectsConfiguration('arbor.path') || !client) return;
    await client.stop();
    await startClient(client, handlers, view, store, transcripts, output);
    if (client.running) void proposals.refresh();
  }));

  view.message = 'Connecting to the Arbor daemon…';
  await startClient(client, handlers, view, store, transcripts, output);
  if (client.running) void proposals.refresh();
}

async function startClient(c: ArborClient, handlers: Parameters<ArborClient['start']>[0], view: vscode.TreeView<string>,
  store: SessionStore, transcripts: TranscriptProvider, output: vscode.LogOutputChannel): Promise<void> {
  const setting = vscode.workspace.getConfiguration('arbor').get<string>('path') ?? '';
  const bin = findBinary({ setting, envPath: process.env.PATH ?? '', home: os.homedir(), folders: (vscode.workspace.workspaceFolders ?? []).map(f => f.uri.fsPath) });
  if (!found(bin)) {
    view.message = 'Arbor cannot find the arbor binary.';
    void offerChooseBinary(notFoundMessage(bin));
    return;
  }
  output.info(`arbor binary: ${bin.path} (${bin.source === 'setting' ? 'arbor.path' : bin.source === 'PATH' ? 'found on PATH' : 'found at an install location'})`);
  try {
    await c.start(handlers, bin.path);
    view.message = undefined;
    void warnUnsandboxed(c);
    // The daemon sends arbor/sessionTree after initialized; ask too, so an older daemon also works.
    const res = await c.sessions({});
    store.apply({ full: false, sessions: res.sessions ?? [] });
    await transcripts.reattachAll();
  } catch (err) {
    const msg = err instanceof Error ? err.message : String(err);
    view.message = `Arbor is not running: ${msg}`;
    void offerChooseBinary(`Arbor: could not start \`${bin.path} lsp\`: ${msg}.`);
  }
}

/** One message with one button: the user picks the binary, which becomes arbor.path (and restarts the client). */
async function offerChooseBinary(message: string): Promise<void> {
  const choose = 'Choose arbor binary…';
  if (await vscode.window.showErrorMessage(message, choose) !== choose) return;
  const picked = await vscode.window.showOpenDialog({ canSelectFiles: true, canSelectFolders: false, canSelectMany: false, openLabel: 'Use this arbor', title: 'Arbor: the arbor binary' });
  if (picked?.[0]) await vscode.workspace.getConfiguration('arbor').update('path', picked[0].fsPath, vscode.ConfigurationTarget.Global);
}

/** Says so, once per connection, when the daemon's kernels cannot be sandboxed here. */
async function warnUnsandboxed(c: ArborClient): Promise<void> {
  try {
    const note = sandboxWarning(await c.status());
    if (note) void vscode.window.showWarningMessage(note);
  } catch {
    // an older daemon, or one going away: the status command still reports it
  }
}

/** Whether a session belongs to a repository of this window (all sessions when no folder is open). */
function inWorkspace(s: P.Session): boolean {
  const folders = vscode.workspace.workspaceFolders ?? [];
  if (folders.length === 0 || !s.workspace) return true;
  const ws = real(s.workspace);
  return folders.some(f => {
    const dir = real(f.uri.fsPath);
    return within(dir, ws) || within(ws, dir);
  });
}

function real(p: string): string {
  try { return fs.realpathSync(p); } catch { return path.resolve(p); }
}

function within(child: string, parent: string): boolean {
  const rel = path.relative(parent, child);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

export async function deactivate(): Promise<void> {
  await client?.stop();
}
