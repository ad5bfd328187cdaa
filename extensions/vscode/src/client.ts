// Starts `arbor lsp` through vscode-languageclient and wraps the arbor/* requests with their types.
import * as vscode from 'vscode';
import { LanguageClient, LanguageClientOptions, ServerOptions, StaticFeature, DynamicFeature, State } from 'vscode-languageclient/node';
import * as P from './protocol';

/**
 * The daemon advertises its arbor.* command ids (for code actions) through executeCommandProvider,
 * and vscode-languageclient registers a VS Code command for each. The extension registers some of
 * the same ids itself (it asks for a task, picks a session, shows the result), and VS Code refuses
 * a second registration of an id. So the languageclient only registers the ids we do not own;
 * ours still reach the daemon through their own arbor/* requests.
 */
class ArborLanguageClient extends LanguageClient {
  constructor(name: string, server: ServerOptions, client: LanguageClientOptions, private readonly owned: ReadonlySet<string>) {
    super('arbor', name, server, client);
  }

  override registerFeature(feature: StaticFeature | DynamicFeature<unknown>): void {
    const f = feature as unknown as { registrationType?: { method: string }; register?: (data: { registerOptions: { commands?: string[] } }) => void };
    if (f.registrationType?.method === 'workspace/executeCommand' && f.register) {
      const register = f.register.bind(feature);
      f.register = (data) => register({ ...data, registerOptions: { ...data.registerOptions, commands: (data.registerOptions.commands ?? []).filter(c => !this.owned.has(c)) } });
    }
    super.registerFeature(feature);
  }
}

export interface Handlers {
  sessionTree(p: P.SessionTreeParams): void;
  event(e: P.Event): void;
  fellBehind(p: P.FellBehindParams): void;
  /** After the languageclient restarted `arbor lsp` (a new connection has no subscriptions). */
  restarted(): void;
}

export class ArborClient implements vscode.Disposable {
  private client: ArborLanguageClient | undefined;

  constructor(private readonly output: vscode.LogOutputChannel, private readonly owned: ReadonlySet<string>) {}

  /** Starts `<command> lsp` (command: the binary findBinary chose); resolves once the LSP handshake is done. */
  async start(h: Handlers, command: string): Promise<void> {
    const server: ServerOptions = { command, args: ['lsp'], options: { env: { ...process.env } } };
    const options: LanguageClientOptions = {
      documentSelector: [{ scheme: 'file' }],
      outputChannel: this.output,
      initializationOptions: { client: 'vscode' },
    };
    const client = new ArborLanguageClient('Arbor', server, options, this.owned);
    const on = <N extends keyof P.Notifications>(method: N, fn: (p: P.Notifications[N]) => void) => client.onNotification(method, fn);
    on(P.NotifySessionTree, p => h.sessionTree(p));
    on(P.NotifyEvent, e => h.event(e));
    on(P.NotifyFellBehind, p => h.fellBehind(p));
    this.client = client;
    let started = false;
    client.onDidChangeState(e => {
      if (e.newState !== State.Running) return;
      if (started) h.restarted();
      started = true;
    });
    await client.start();
  }

  async stop(): Promise<void> {
    const c = this.client;
    this.client = undefined;
    if (c) await c.stop().catch(() => undefined);
  }

  dispose(): void {
    void this.stop();
  }

  get running(): boolean {
    return this.client?.isRunning() ?? false;
  }

  /** Sends an arbor/* request; its params and result are the generated types of that method. */
  private request<M extends keyof P.Requests>(method: M, params: P.Requests[M]['params']): Promise<P.Requests[M]['result']> {
    if (!this.client) return Promise.reject(new Error('the Arbor language client is not running (see the "Arbor" output)'));
    return this.client.sendRequest<P.Requests[M]['result']>(method, params);
  }

  create(p: P.SessionCreateParams) { return this.request(P.MethodSessionCreate, p); }
  sessions(p: P.SessionsParams) { return this.request(P.MethodSessions, p); }
  get(id: string) { return this.request(P.MethodSessionGet, { id }); }
  attach(p: P.AttachParams) { return this.request(P.MethodSessionAttach, p); }
  detach(id: string) { return this.request(P.MethodSessionDetach, { id }); }
  log(p: P.LogParams) { return this.request(P.MethodSessionLog, p); }
  send(p: P.SendParams) { return this.request(P.MethodSessionSend, p); }
  stopSession(id: string) { return this.request(P.MethodSessionStop, { id }); }
  fork(p: P.ForkParams) { return this.request(P.MethodSessionFork, p); }
  diff(p: P.DiffParams) { return this.request(P.MethodSessionDiff, p); }
  fileAt(p: P.FileAtParams) { return this.request(P.MethodSessionFileAt, p); }
  accept(p: P.AcceptParams) { return this.request(P.MethodSessionAccept, p); }
  reject(p: P.RejectParams) { return this.request(P.MethodSessionReject, p); }
  merge(p: P.MergeParams) { return this.request(P.MethodSessionMerge, p); }
  conflicts(p: P.SessionRef) { return this.request(P.MethodSessionConflicts, p); }
  discard(p: P.DiscardParams) { return this.request(P.MethodSessionDiscard, p); }
  status() { return this.request(P.MethodDaemonStatus, {}); }
  trustGet(p: P.TrustParams) { return this.request(P.MethodTrustGet, p); }
  trustGrant(p: P.TrustGrantParams) { return this.request(P.MethodTrustGrant, p); }
  proposals(p: P.ProposalsParams) { return this.request(P.MethodRefineProposals, p); }
  proposal(p: P.ProposalRef) { return this.request(P.MethodRefineProposal, p); }
  acceptProposal(p: P.ProposalDecideParams) { return this.request(P.MethodRefineAccept, p); }
  rejectProposal(p: P.ProposalDecideParams) { return this.request(P.MethodRefineReject, p); }
  refine(p: P.RefineRunParams) { return this.request(P.MethodRefineRun, p); }
  goalSet(p: P.GoalSetParams) { return this.request(P.MethodGoalSet, p); }
  goalGet(p: P.GoalRef) { return this.request(P.MethodGoalGet, p); }
  goalControl(p: P.GoalControlParams) { return this.request(P.MethodGoalControl, p); }
  progress(p: P.ProgressParams) { return this.request(P.MethodProgress, p); }
  heartbeatCreate(p: P.HeartbeatCreateParams) { return this.request(P.MethodHeartbeatCreate, p); }
  heartbeatList(p: P.HeartbeatListParams) { return this.request(P.MethodHeartbeatList, p); }
  heartbeatDelete(p: P.HeartbeatID) { return this.request(P.MethodHeartbeatDelete, p); }
  harnessList(p: P.HarnessListParams) { return this.request(P.MethodHarnessList, p); }
  harnessGet(p: P.HarnessGetParams) { return this.request(P.MethodHarnessGet, p); }
  harnessHistory(p: P.HarnessHistoryParams) { return this.request(P.MethodHarnessHistory, p); }
  harnessDiff(p: P.HarnessDiffParams) { return this.request(P.MethodHarnessDiff, p); }
  harnessRollback(p: P.HarnessRollbackParams) { return this.request(P.MethodHarnessRollback, p); }
}
