// A session's whole remaining patch as a read-only virtual document (arbor-patch:): closing it
// asks nothing, and it cannot be saved by mistake as an untitled buffer could.
import * as vscode from 'vscode';
import * as P from './protocol';
import { ArborClient } from './client';
import { sessionTitle } from './sessions';
import { diffSummary } from './reviewModel';

export const patchScheme = 'arbor-patch';

/** The whole remaining patch of a session as a read-only document. */
export function patchUri(s: P.Session): vscode.Uri {
  const name = sessionTitle(s, 40).replace(/[\/\\?#%]/g, ' ');
  return vscode.Uri.from({ scheme: patchScheme, path: `/${name}.diff`, query: s.id });
}

export class PatchProvider implements vscode.TextDocumentContentProvider {
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  constructor(private readonly client: ArborClient) {}

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const d = await this.client.diff({ id: uri.query });
    return d.patch || `# no remaining changes (${diffSummary(d)})\n`;
  }

  refresh(id: string): void {
    for (const d of vscode.workspace.textDocuments) if (d.uri.scheme === patchScheme && d.uri.query === id) this.changed.fire(d.uri);
  }
}

