// Finding the arbor binary without help. An editor started from a launcher (or code-server's
// extension host) does not share the user's shell PATH, so a bare `arbor` is not enough: the
// setting, then PATH, then the places the README's install steps put it.
// No vscode import: the unit tests load it from plain Node.
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

export interface Where {
  /** arbor.path as the user set it ("" or "arbor" when unset). */
  setting: string;
  /** The extension host's PATH. */
  envPath: string;
  home: string;
  /** The open workspace folders (a clone of the repository holds bin/arbor after `make build`). */
  folders: string[];
  /** Whether p is an executable file; fs by default. */
  executable?: (p: string) => boolean;
}

export interface Found {
  path: string;
  /** How it was found: "setting", "PATH" or the install location it was found in. */
  source: string;
}

export interface NotFound {
  /** Every place looked at, in order, for the message. */
  looked: string[];
  /** Set when arbor.path names a file that does not exist or cannot run. */
  badSetting?: string;
}

/** The places `make build` and the README's install steps put the binary, in the order tried. */
export function installPlaces(home: string, folders: string[]): string[] {
  return [
    ...folders.map(f => path.join(f, 'bin', 'arbor')),
    path.join(home, '.local', 'bin', 'arbor'),
    '/usr/local/bin/arbor',
    path.join(home, 'go', 'bin', 'arbor'),
  ];
}

/** arbor.path as a file name: `~/…` from the home directory, relative from the first folder. */
export function expandSetting(p: string, home: string, folders: string[]): string {
  if (p === '~' || p.startsWith('~/')) return path.join(home, p.slice(1));
  if (!path.isAbsolute(p) && p.includes('/') && folders[0]) return path.resolve(folders[0], p);
  return p;
}

function isExecutable(p: string): boolean {
  try {
    const st = fs.statSync(p);
    if (!st.isFile()) return false;
    fs.accessSync(p, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * The binary to run: arbor.path when set (a bare name is looked up on PATH), else `arbor` on
 * PATH, else the first install place that holds an executable. A setting that names nothing
 * runnable is reported, not silently replaced by another binary.
 */
export function findBinary(w: Where): Found | NotFound {
  const ok = w.executable ?? isExecutable;
  const set = w.setting.trim();
  const onPath = (name: string) => {
    for (const dir of w.envPath.split(path.delimiter)) {
      if (!dir) continue;
      const p = path.join(dir, name);
      if (ok(p)) return p;
    }
    return undefined;
  };
  if (set && set !== 'arbor') {
    const p = expandSetting(set, w.home, w.folders);
    if (!p.includes('/')) {
      const hit = onPath(p);
      if (hit) return { path: hit, source: 'setting' };
      return { looked: [`${p} on PATH`], badSetting: set };
    }
    if (ok(p)) return { path: p, source: 'setting' };
    return { looked: [p], badSetting: set };
  }
  const hit = onPath('arbor');
  if (hit) return { path: hit, source: 'PATH' };
  const places = installPlaces(w.home, w.folders);
  for (const p of places) if (ok(p)) return { path: p, source: p };
  return { looked: ['arbor on PATH', ...places] };
}

export function found(r: Found | NotFound): r is Found {
  return (r as Found).path !== undefined;
}

/** The one message shown when no binary was found; the button sets arbor.path. */
export function notFoundMessage(r: NotFound): string {
  if (r.badSetting) return `Arbor: "arbor.path" is ${JSON.stringify(r.badSetting)}, which is not an executable file. Choose the arbor binary (\`make build\` writes bin/arbor).`;
  const home = os.homedir();
  const looked = r.looked.map(p => (p.startsWith(home + '/') ? '~' + p.slice(home.length) : p)).join(', ');
  return `Arbor: cannot find the arbor binary (looked for ${looked}). Choose it (\`make build\` writes bin/arbor), or set "arbor.path".`;
}
