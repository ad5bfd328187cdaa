// Starts `arbor lsp` through vscode-languageclient and wraps the arbor/* requests with their types.
import * as os from 'os';
import * as path from 'path';
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

/** arbor.path as a command: `~/…` from the home directory, `./…` from the first workspace folder. */
export function resolveBinary(p: string): string {
  if (p === '~' || p.startsWith('~/')) return path.join(os.homedir(), p.slice(1));
  if (!path.isAbsolute(p) && p.includes('/')) {
    const root = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    if (root) return path.resolve(root, p);
  }
  return p;
}

export interface Handlers {
  sessionTree(p: P.SessionTreeParams): void;
  event(e: P.Event): void;
  fellBehind(p: P.FellBehindParams): void;
  showDocument(p: P.ShowDocumentParams): void;
  /** After the languageclient restarted `arbor lsp` (a new connection has no subscriptions). */
  restarted(): void;
}

export class ArborClient implements vscode.Disposable {
  private client: ArborLanguageClient | undefined;

  constructor(private readonly output: vscode.LogOutputChannel, private readonly owned: ReadonlySet<string>) {}

  /** Starts `<arbor.path> lsp`; resolves once the LSP handshake is done. */
  async start(h: Handlers): Promise<void> {
    const cfg = vscode.workspace.getConfiguration('arbor');
    const command = resolveBinary(cfg.get<string>('path') || 'arbor');
    const server: ServerOptions = { command, args: ['lsp'], options: { env: { ...process.env } } };
    const options: LanguageClientOptions = {
      documentSelector: [{ scheme: 'file' }],
      outputChannel: this.output,
      initializationOptions: { client: 'vscode' },
    };
    const client = new ArborLanguageClient('Arbor', server, options, this.owned);
    client.onNotification(P.NotifySessionTree, (p: P.SessionTreeParams) => h.sessionTree(p));
    client.onNotification(P.NotifyEvent, (e: P.Event) => h.event(e));
    client.onNotification(P.NotifyFellBehind, (p: P.FellBehindParams) => h.fellBehind(p));
    client.onNotification(P.NotifyShowDocument, (p: P.ShowDocumentParams) => h.showDocument(p));
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

  private request<R>(method: string, params: unknown): Promise<R> {
    if (!this.client) return Promise.reject(new Error('the Arbor language client is not running (see the "Arbor" output)'));
    return this.client.sendRequest<R>(method, params);
  }

  create(p: P.SessionCreateParams) { return this.request<P.Session>(P.MethodSessionCreate, p); }
  sessions(p: P.SessionsParams) { return this.request<P.SessionsResult>(P.MethodSessions, p); }
  get(id: string) { return this.request<P.Session>(P.MethodSessionGet, { id } satisfies P.SessionRef); }
  attach(p: P.AttachParams) { return this.request<P.AttachResult>(P.MethodSessionAttach, p); }
  detach(id: string) { return this.request<unknown>(P.MethodSessionDetach, { id } satisfies P.SessionRef); }
  log(p: P.LogParams) { return this.request<P.LogResult>(P.MethodSessionLog, p); }
  send(p: P.SendParams) { return this.request<P.SendResult>(P.MethodSessionSend, p); }
  stopSession(id: string) { return this.request<unknown>(P.MethodSessionStop, { id } satisfies P.SessionRef); }
  fork(p: P.ForkParams) { return this.request<P.Session>(P.MethodSessionFork, p); }
  diff(p: P.DiffParams) { return this.request<P.DiffResult>(P.MethodSessionDiff, p); }
  fileAt(p: P.FileAtParams) { return this.request<P.FileAtResult>(P.MethodSessionFileAt, p); }
  accept(p: P.AcceptParams) { return this.request<P.AcceptResult>(P.MethodSessionAccept, p); }
  discard(p: P.DiscardParams) { return this.request<P.DiscardResult>(P.MethodSessionDiscard, p); }
  status() { return this.request<P.DaemonStatus>(P.MethodDaemonStatus, {}); }
}
