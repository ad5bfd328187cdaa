// Workspace trust for repositories: a create or fork in a repository whose arbor.json sets
// guarded settings (commands, interpreter, sandbox, key routing) not trusted yet fails with
// CodeUntrusted and the TrustState as data. The user is shown exactly those settings; a grant
// names the hash of what was shown, so a file changed meanwhile is asked about again. No
// vscode import here, so plain Node (the tests) can load it.
import * as P from './protocol';

/** The TrustState of a CodeUntrusted error (a vscode-languageclient ResponseError), else undefined. */
export function untrustedState(err: unknown): P.TrustState | undefined {
  const e = err as { code?: unknown; data?: unknown } | undefined;
  if (!e || e.code !== P.CodeUntrusted) return undefined;
  const d = e.data as Partial<P.TrustState> | undefined;
  if (!d || typeof d.repo !== 'string' || !Array.isArray(d.settings)) return undefined;
  return d as P.TrustState;
}

/** The prompt for st: a title line and a detail listing every setting, its value and what it can do. */
export function trustPrompt(st: P.TrustState): { message: string; detail: string } {
  const message = st.changed
    ? `Arbor: ${st.file} changed settings you trusted. Trust the new values?`
    : `Arbor: trust the repository ${st.repo}?`;
  const lines = [`${st.file} sets what can run commands on your machine or send your keys elsewhere:`, ''];
  for (const s of st.settings) lines.push(`${s.name} = ${s.value}`, `    ${s.why}`, '');
  lines.push(`Only trust a repository whose arbor.json you have read. From a terminal: ${st.command}`);
  return { message, detail: lines.join('\n') };
}

/** How withTrust asks and grants; the extension uses a modal warning and arbor/trust.grant. */
export interface TrustUI {
  /** Shows st; true when the user chose to trust it. */
  ask(st: P.TrustState): Promise<boolean>;
  /** Grants exactly st (its repo and hash). */
  grant(st: P.TrustState): Promise<P.TrustState>;
}

/** Rounds of asking before giving up: a file that keeps changing under the user is not trusted. */
const maxRounds = 3;

/**
 * Runs op; when it fails for trust, asks, grants what was shown and runs it again. Resolves to
 * undefined when the user declines. A grant refused because the file changed since shows the
 * new settings. Other errors are op's.
 */
export async function withTrust<T>(op: () => Promise<T>, ui: TrustUI): Promise<T | undefined> {
  for (let round = 1; ; round++) {
    let st: P.TrustState | undefined;
    try {
      return await op();
    } catch (err) {
      st = untrustedState(err);
      if (!st || round > maxRounds) throw err;
    }
    for (;;) {
      if (!(await ui.ask(st))) return undefined;
      try {
        await ui.grant(st);
        break;
      } catch (err) {
        const now = untrustedState(err);
        if (!now || ++round > maxRounds) throw err;
        st = now;
      }
    }
  }
}
