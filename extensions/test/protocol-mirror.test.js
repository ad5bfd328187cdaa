// Checks that the editors' copies of the arbor/* protocol constants agree with the single source,
// server/protocol.go: every Method*, Notify*, State* and Code* constant must appear, with the same
// name and value, in extensions/vscode/src/protocol.ts and extensions/nvim/lua/arbor/protocol.lua,
// and neither copy may name an arbor/* method the Go side lacks.
// Run: node --test extensions/test/
'use strict';
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const repo = path.resolve(__dirname, '..', '..');
const read = rel => fs.readFileSync(path.join(repo, rel), 'utf8');
const wanted = /^(Method|Notify|State|Code)[A-Z]/;

/** Name → value (string or number) of the Go constants, from `Name = "value"` / `Name = -32001`. */
function goConstants(src) {
  const out = new Map();
  for (const block of src.matchAll(/\bconst\s*\(([\s\S]*?)\n\)/g)) {
    for (const m of block[1].matchAll(/^\s*(\w+)\s*=\s*("(?:[^"\\]|\\.)*"|-?\d+)/gm)) {
      if (wanted.test(m[1])) out.set(m[1], m[2].startsWith('"') ? JSON.parse(m[2]) : Number(m[2]));
    }
  }
  for (const m of src.matchAll(/^const\s+(\w+)\s*=\s*("(?:[^"\\]|\\.)*"|-?\d+)/gm)) {
    if (wanted.test(m[1])) out.set(m[1], m[2].startsWith('"') ? JSON.parse(m[2]) : Number(m[2]));
  }
  return out;
}

/** Name → value from lines like `<prefix>Name = 'value'` (TS `export const`, Lua `M.`). */
function mirrorConstants(src, prefix) {
  const out = new Map();
  const re = new RegExp(`^\\s*${prefix}(\\w+)\\s*=\\s*('[^']*'|"[^"]*"|-?\\d+)`, 'gm');
  for (const m of src.matchAll(re)) {
    if (wanted.test(m[1])) out.set(m[1], /^['"]/.test(m[2]) ? m[2].slice(1, -1) : Number(m[2]));
  }
  return out;
}

const go = goConstants(read('server/protocol.go'));
const mirrors = {
  'extensions/vscode/src/protocol.ts': mirrorConstants(read('extensions/vscode/src/protocol.ts'), 'export const '),
  'extensions/nvim/lua/arbor/protocol.lua': mirrorConstants(read('extensions/nvim/lua/arbor/protocol.lua'), 'M\\.'),
};

test('server/protocol.go parses into method, notification, state and code constants', () => {
  const names = [...go.keys()];
  assert.ok(names.filter(n => n.startsWith('Method')).length >= 10, `too few Method constants: ${names}`);
  assert.ok(names.some(n => n.startsWith('Notify')), 'no Notify constants');
  assert.equal(go.get('MethodSessionCreate'), 'arbor/session.create');
});

for (const [file, consts] of Object.entries(mirrors)) {
  test(`${file} mirrors server/protocol.go`, () => {
    const missing = [], wrong = [], extra = [];
    for (const [name, value] of go) {
      if (!consts.has(name)) missing.push(`${name} = ${JSON.stringify(value)}`);
      else if (consts.get(name) !== value) wrong.push(`${name}: Go ${JSON.stringify(value)}, here ${JSON.stringify(consts.get(name))}`);
    }
    const goValues = new Set(go.values());
    for (const [name, value] of consts) {
      if (!go.has(name)) extra.push(`${name} = ${JSON.stringify(value)}`);
      else if (typeof value === 'string' && value.startsWith('arbor/') && !goValues.has(value)) extra.push(value);
    }
    const problems = [
      ...missing.map(x => `missing ${x}`), ...wrong.map(x => `different ${x}`), ...extra.map(x => `not in protocol.go: ${x}`),
    ];
    assert.deepEqual(problems, [], `${file} disagrees with server/protocol.go:\n  ${problems.join('\n  ')}`);
  });
}
