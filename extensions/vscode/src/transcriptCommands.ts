// Commands of the live transcript: open it, fork a session from one of its events (then open the
// fork's transcript), and open the diff of one turn as a read-only patch document.
import * as vscode from 'vscode';
import * as P from './protocol';
import { SessionStore } from './sessions';
import { TranscriptPanels, TurnDiffProvider } from './transcriptPanel';
import { parseSeq } from './transcriptModel';

/** A session id, {id, atSeq} / {id, turn} from a caller, or [id, n] as a command link passes. */
type Arg = string | { id?: string; atSeq?: number; seq?: number; turn?: number } | undefined;

export class TranscriptCommands {
  static readonly ids = ['arbor.openTranscript', 'arbor.forkFromEvent', 'arbor.turnDiff'];

  constructor(
    private readonly store: SessionStore,
    private readonly panels: () => TranscriptPanels,
    private readonly session: (arg: string | undefined, title: string) => Promise<P.Session | undefined>,
    private readonly fork: (p: { id: string; atSeq: number }) => Promise<P.Session | undefined>,
  ) {}

  register(showError: (e: unknown) => void): vscode.Disposable[] {
    const r = (id: string, fn: (arg: Arg, n?: number) => Promise<unknown>) =>
      vscode.commands.registerCommand(id, (arg: Arg, n?: number) => fn.call(this, arg, n).catch(showError));
    return [
      r('arbor.openTranscript', this.open),
      r('arbor.forkFromEvent', this.forkFromEvent),
      r('arbor.turnDiff', this.turnDiff),
    ];
  }

  async open(arg: Arg): Promise<void> {
    const s = await this.session(typeof arg === 'string' ? arg : arg?.id, 'Open the transcript of which session?');
    if (s) await this.panels().open(s);
  }

  /** Arbor: Fork from Event… — a new session from the state at one event; its transcript opens. */
  async forkFromEvent(arg: Arg, n?: number): Promise<void> {
    const s = await this.session(typeof arg === 'string' ? arg : arg?.id, 'Fork which session?');
    if (!s) return;
    let seq = typeof arg === 'object' ? arg.atSeq ?? arg.seq : n;
    if (seq === undefined) {
      const last = s.lastSeq ?? 0;
      const typed = await vscode.window.showInputBox({
        title: 'Arbor: fork from event',
        prompt: `The event to fork at (1–${last}; the transcript shows each event's #); the fork starts from the session as it was then`,
        value: String(last),
        validateInput: v => { const r = parseSeq(v, last); return typeof r === 'string' ? r : undefined; },
        ignoreFocusOut: true,
      });
      if (typed === undefined) return;
      const r = parseSeq(typed, last);
      if (typeof r === 'string') throw new Error(r);
      seq = r;
    }
    const f = await this.fork({ id: s.id, atSeq: seq });
    if (!f?.id) return;
    vscode.window.setStatusBarMessage(`Arbor: forked ${s.id.slice(0, 8)} at event ${seq} as ${f.id.slice(0, 8)}`, 5000);
    await this.panels().open(this.store.get(f.id) ?? f);
  }

  /** The diff one turn made (arbor/session.diff {id, turn}), as a read-only patch document. */
  async turnDiff(arg: Arg, n?: number): Promise<void> {
    const s = await this.session(typeof arg === 'string' ? arg : arg?.id, 'The diff of a turn of which session?');
    if (!s) return;
    let turn = typeof arg === 'object' ? arg.turn : n;
    if (turn === undefined) {
      const typed = await vscode.window.showInputBox({ title: 'Arbor: diff of a turn', prompt: 'Which turn (1, 2, …)?', ignoreFocusOut: true,
        validateInput: v => /^[1-9]\d*$/.test(v.trim()) ? undefined : 'a turn number: 1, 2, …' });
      if (!typed) return;
      turn = Number(typed.trim());
    }
    const doc = await vscode.workspace.openTextDocument(TurnDiffProvider.uri(s, s.id, turn));
    await vscode.languages.setTextDocumentLanguage(doc, 'diff');
    await vscode.window.showTextDocument(doc, { preview: true });
  }
}
