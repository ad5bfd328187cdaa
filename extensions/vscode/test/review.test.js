// Unit tests of the review, merge and start-up logic of the extension (out/reviewModel.js,
// out/binary.js, the labels of out/sessions.js): hunk ids and placement, refusal messages that
// name the files first, where discarded work went, which sessions may take a child, the status
// bar's count, and where the arbor binary is found without a setting.
'use strict';
const { test } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const M = require('../out/reviewModel');
const B = require('../out/binary');
const S = require('../out/sessions');
const { CodeConflict, CodeInvalidState } = require('../out/protocol');

const hunk = (newStart, newLines, lines) => ({ oldStart: newStart, oldLines: 1, newStart, newLines, lines });

test('each hunk gets the id accept and reject take, on its first changed line in the head version', () => {
  const f = { path: 'src/a.py', status: 'modified', additions: 3, deletions: 2,
    hunks: [hunk(1, 2, [' x', '+y', '-z']), hunk(10, 0, ['-gone']), hunk(20, 3, ['+a', '+b', ' c'])] };
  assert.deepEqual(M.hunkLenses(f), [
    { line: 1, id: 'src/a.py#0', summary: '+1 −1' }, // after its one line of context
    { line: 10, id: 'src/a.py#1', summary: '+0 −1' },
    { line: 19, id: 'src/a.py#2', summary: '+2 −0' },
  ]);
  assert.equal(M.hunkAt(f, 0), 'src/a.py#0', 'above the first hunk: the first hunk');
  assert.equal(M.hunkAt(f, 1), 'src/a.py#0');
  assert.equal(M.hunkAt(f, 15), 'src/a.py#1');
  assert.equal(M.hunkAt(f, 25), 'src/a.py#2');
  // git's usual three lines of context: the lens sits on the changed line, not on the context.
  assert.equal(M.hunkLine({ oldStart: 12, oldLines: 7, newStart: 12, newLines: 7, lines: [' a', ' b', ' c', '-x', '+X', ' d', ' e', ' f'] }), 14);
  assert.equal(M.hunkAt({ path: 'b', hunks: [] }, 3), undefined);
});

test('the diff summary says when the remaining diff starts from an accepted commit', () => {
  const files = [{ path: 'a', additions: 2, deletions: 1 }, { path: 'b', additions: 1, deletions: 0 }];
  assert.equal(M.diffSummary({ base: '0123456789ab', head: 'h', files, patch: '' }), '2 files +3 −1 against 01234567');
  assert.equal(M.diffSummary({ base: 'abcdef0123', head: 'h', files: files.slice(1), patch: '', accepted: 'abcdef0123' }), '1 file +1 −0 since the accepted abcdef01');
});

test('discard shows the archive ref first: branchDeleted is true when the work was archived too', () => {
  assert.equal(M.discardOutcome('arbor/x', { branchDeleted: true, archived: 'refs/arbor/archive/x-1' }),
    'its unaccepted work is kept at refs/arbor/archive/x-1 (branch arbor/x removed)');
  assert.equal(M.discardOutcome('arbor/x', { branchDeleted: true }), 'branch arbor/x deleted');
  assert.equal(M.discardOutcome('arbor/x', { branchDeleted: false }), 'branch arbor/x kept');
});

test('refusals name the files before anything a toast could cut off', () => {
  const dirty = { code: CodeConflict, message: 'long daemon text '.repeat(20), data: { kind: 'dirty', into: 'main', files: ['calc.py', 'notes.md'] } };
  const m = M.refusalMessage('Accept of hunk calc.py#0', dirty);
  assert.ok(m.startsWith('Accept of hunk calc.py#0 refused: uncommitted changes in calc.py, notes.md on main'), m);
  const conflict = { code: CodeConflict, message: 'merge conflict', data: { kind: 'conflict', into: 'arbor/parent-1', files: ['a.txt'] } };
  assert.deepEqual(M.conflictOf(conflict), { kind: 'conflict', into: 'arbor/parent-1', files: ['a.txt'] });
  assert.ok(M.refusalMessage('Merge', conflict).startsWith('Merge stopped on conflicts in a.txt (into arbor/parent-1)'));
  const stale = { code: CodeInvalidState, message: 'the session moved on: diff again' };
  assert.ok(M.isStale(stale));
  assert.match(M.refusalMessage('Reject of a.txt', stale), /moved since this diff was shown; the diff is shown again/);
  assert.equal(M.conflictOf({ code: CodeConflict, message: 'x' }), undefined, 'a conflict without ConflictData is no ConflictData');
  assert.equal(M.refusalMessage('Accept', new Error('boom')), 'Accept failed: boom');
  assert.ok(!M.isStale({ code: CodeInvalidState, message: 'the session is running a turn: stop it or wait' }));
  // The daemon's own words (agents/review.go, gitstate/accept.go), whatever code they come with.
  assert.ok(M.isStale({ code: CodeInvalidState, message: 'invalid state: 1a2b3c4d: part of the session was accepted since the diff you reviewed; diff again' }));
  assert.ok(M.isStale({ code: -32603, message: 'the review is out of date: the merge-base moved from a to b; diff again' }));
});

test('forks read "fork of <short> @<seq>", discarded sessions "discarded", on the row itself', () => {
  const base = { id: 'f'.repeat(16), task: 't', state: 'stopped', model: 'm', branch: 'arbor/t', total: { inputTokens: 1, outputTokens: 2 } };
  assert.equal(S.sessionDescription({ ...base, state: 'idle', forkOf: '8e6a9ede1234', forkSeq: 20 }), 'idle · fork of 8e6a9ede @20 · m · 3 tok · arbor/t');
  assert.equal(S.sessionDescription({ ...base, discarded: true, archived: 'refs/arbor/archive/t' }), 'discarded · m · 3 tok · arbor/t');
});

test('a row says when its worktree is being written, queued, or released, as arbor ls does', () => {
  const base = { id: 'f'.repeat(16), task: 't', state: 'idle', model: 'm', branch: 'arbor/t', total: { inputTokens: 1, outputTokens: 2 } };
  assert.equal(S.sessionDescription({ ...base, forkOf: '8e6a9ede1234', forkSeq: 20, worktreeWriting: true }), 'idle · fork of 8e6a9ede @20 · writing files · m · 3 tok · arbor/t');
  assert.equal(S.sessionDescription({ ...base, state: 'admitted', worktreeQueued: true }), 'admitted · files queued · m · 3 tok · arbor/t');
  assert.equal(S.sessionDescription({ ...base, state: 'inactive', worktreeReleased: true }), 'inactive · worktree released · m · 3 tok · arbor/t');
  assert.equal(S.sessionDescription({ ...base, state: 'stopped', discarded: true, worktreeWriting: true }), 'discarded · m · 3 tok · arbor/t');
});

test('only sessions that can still run take a child; the status bar counts running and waiting ones only', () => {
  const mk = (state, extra = {}) => ({ id: state, task: state, state, ...extra });
  assert.deepEqual(['admitted', 'running', 'idle', 'inactive', 'stopped', 'failed'].filter(st => S.canParent(mk(st))), ['admitted', 'running', 'idle', 'inactive']);
  assert.equal(S.canParent(mk('idle', { discarded: true })), false);
  assert.equal(S.statusText([mk('stopped'), mk('failed'), mk('idle')]), '$(type-hierarchy) Arbor: none running');
  assert.equal(S.statusText([mk('running'), mk('running'), mk('admitted'), mk('stopped')]), '$(sync~spin) Arbor: 2 running, 1 waiting');
  assert.equal(S.statusText([mk('admitted')]), '$(sync~spin) Arbor: 1 waiting');
});

test('with no arbor.path the binary is found on PATH, then where make build and the README put it', () => {
  const home = '/home/u';
  const ws = '/src/arbor';
  const have = set => p => set.has(p);
  const where = (files, extra = {}) => ({ setting: '', envPath: '/usr/bin:/bin', home, folders: [ws], executable: have(new Set(files)), ...extra });
  assert.deepEqual(B.findBinary(where(['/bin/arbor', '/src/arbor/bin/arbor'])), { path: '/bin/arbor', source: 'PATH' });
  assert.deepEqual(B.findBinary(where(['/src/arbor/bin/arbor', '/home/u/.local/bin/arbor'])), { path: '/src/arbor/bin/arbor', source: '/src/arbor/bin/arbor' });
  assert.deepEqual(B.findBinary(where(['/home/u/.local/bin/arbor', '/usr/local/bin/arbor'])).path, '/home/u/.local/bin/arbor');
  assert.deepEqual(B.findBinary(where(['/usr/local/bin/arbor', '/home/u/go/bin/arbor'])).path, '/usr/local/bin/arbor');
  assert.deepEqual(B.findBinary(where(['/home/u/go/bin/arbor'])).path, '/home/u/go/bin/arbor');
  // "arbor" (the old default) means the same search.
  assert.deepEqual(B.findBinary(where(['/home/u/go/bin/arbor'], { setting: 'arbor' })).path, '/home/u/go/bin/arbor');
  const none = B.findBinary(where([]));
  assert.ok(!B.found(none));
  assert.deepEqual(none.looked, ['arbor on PATH', '/src/arbor/bin/arbor', '/home/u/.local/bin/arbor', '/usr/local/bin/arbor', '/home/u/go/bin/arbor']);
  assert.match(B.notFoundMessage(none), /^Arbor: cannot find the arbor binary \(looked for arbor on PATH, \/src\/arbor\/bin\/arbor, .*\)\. Choose it/);
});

test('a set arbor.path is used as given, and one that names nothing runnable is reported, not replaced', () => {
  const where = (setting, files) => ({ setting, envPath: '/usr/bin', home: '/home/u', folders: ['/ws'], executable: p => files.includes(p) });
  assert.deepEqual(B.findBinary(where('~/tools/arbor', ['/home/u/tools/arbor', '/usr/bin/arbor'])), { path: '/home/u/tools/arbor', source: 'setting' });
  assert.deepEqual(B.findBinary(where('./bin/arbor', ['/ws/bin/arbor'])), { path: '/ws/bin/arbor', source: 'setting' });
  assert.deepEqual(B.findBinary(where('arbor-dev', ['/usr/bin/arbor-dev'])), { path: '/usr/bin/arbor-dev', source: 'setting' });
  const bad = B.findBinary(where('/opt/arbor', ['/usr/bin/arbor']));
  assert.deepEqual(bad, { looked: ['/opt/arbor'], badSetting: '/opt/arbor' });
  assert.match(B.notFoundMessage(bad), /"arbor.path" is "\/opt\/arbor", which is not an executable file/);
});

test('the real file check: a directory or a non-executable file is no binary', () => {
  const fs = require('node:fs');
  const os = require('node:os');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'arbor-bin-'));
  fs.mkdirSync(path.join(dir, 'bin', 'arbor'), { recursive: true }); // a directory named arbor
  fs.mkdirSync(path.join(dir, 'home', '.local', 'bin'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'home', '.local', 'bin', 'arbor'), '#!/bin/sh\n', { mode: 0o644 });
  assert.ok(!B.found(B.findBinary({ setting: '', envPath: '', home: path.join(dir, 'home'), folders: [dir] })));
  fs.chmodSync(path.join(dir, 'home', '.local', 'bin', 'arbor'), 0o755);
  assert.equal(B.findBinary({ setting: '', envPath: '', home: path.join(dir, 'home'), folders: [dir] }).path, path.join(dir, 'home', '.local', 'bin', 'arbor'));
  fs.rmSync(dir, { recursive: true, force: true });
});

test('a merge result with conflict markers left is not a resolution', () => {
  assert.ok(M.hasMarkers('a\n<<<<<<< ours\nx\n=======\ny\n>>>>>>> theirs\n'));
  assert.ok(M.hasMarkers('>>>>>>>\n'));
  assert.ok(!M.hasMarkers('a\n======= a heading underline is fine\nb\n'));
  assert.ok(!M.hasMarkers('x <<<<<<< not at a line start\n'));
});
