// The editors and the generated protocol mirrors. Go checks that protocol.gen.ts and
// protocol_gen.lua are what `go generate ./server` writes from the Go types; this test checks
// (a) that every protocol name the editors use (P.X, named imports, M.protocol) is one the
// generated files define, so a method or notification removed in Go breaks here, and that the
// hand-written wrappers copy nothing of them; (b) that the TypeScript and Lua mirrors agree
// constant by constant and type by type, field by field.
// Run: node --test extensions/test/
'use strict';
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { repo, read, tsFile, luaFile, readTs, readLua } = require('./generated');

const ts = readTs();
const lua = readLua();

/** Files under dir (relative to the repository) whose names end in ext, recursively. */
function files(dir, ext) {
  const out = [];
  const walk = rel => {
    for (const ent of fs.readdirSync(path.join(repo, rel), { withFileTypes: true })) {
      const p = path.join(rel, ent.name);
      if (ent.isDirectory() && ent.name !== 'node_modules' && ent.name !== 'out') walk(p);
      else if (ent.isFile() && ent.name.endsWith(ext)) out.push(p);
    }
  };
  walk(dir);
  return out;
}

const tsSources = [...files('extensions/vscode/src', '.ts'), ...files('extensions/vscode/test', '.js'), ...files('extensions/vscode/e2e', '.js')]
  .filter(f => f !== tsFile);
const luaSources = [...files('extensions/nvim/lua', '.lua'), ...files('extensions/nvim/plugin', '.lua'), ...files('extensions/nvim/test', '.lua')]
  .filter(f => f !== luaFile);

/** Where src uses a name of the protocol module: `P.X` for a P bound to it, and named imports. */
function tsUses(src) {
  const used = [];
  const binds = [
    ...src.matchAll(/import \* as (\w+) from '\.\/protocol(?:\.gen)?'/g),
    ...src.matchAll(/const (\w+) = require\('\.\.\/out\/protocol(?:\.gen)?'\)/g),
  ].map(m => m[1]);
  for (const b of binds) for (const m of src.matchAll(new RegExp(`\\b${b}\\.(\\w+)`, 'g'))) used.push(m[1]);
  for (const m of src.matchAll(/import (?:type )?\{([^}]*)\} from '\.\/protocol(?:\.gen)?'/g)) {
    used.push(...m[1].split(',').map(x => x.trim().replace(/^type /, '').split(/\s+as\s+/)[0]).filter(Boolean));
  }
  for (const m of src.matchAll(/const \{([^}]*)\} = require\('\.\.\/out\/protocol(?:\.gen)?'\)/g)) {
    used.push(...m[1].split(',').map(x => x.trim().split(':')[0].trim()).filter(Boolean));
  }
  return used;
}

/** Where src uses a field of the protocol module: `P.X` for a local P = require('arbor.protocol'). */
function luaUses(src) {
  const used = [];
  const binds = [...src.matchAll(/local (\w+) = require\(?'arbor\.protocol(?:_gen)?'\)?/g)].map(m => m[1]);
  if (/require\('arbor'\)\.protocol\b/.test(src)) binds.push('arbor.protocol');
  for (const b of binds) {
    for (const m of src.matchAll(new RegExp(`(?<![\\w.])${b.replace('.', '\\.')}\\.(\\w+)`, 'g'))) used.push(m[1]);
  }
  return used;
}

test('the generated mirrors parse into constants, types, events and requests', () => {
  for (const [side, m] of [['ts', ts], ['lua', lua]]) {
    assert.equal(m.consts.get('MethodSessionCreate'), 'arbor/session.create', side);
    assert.equal(m.consts.get('EventStateChanged'), 'state_changed', side);
    assert.ok([...m.consts.keys()].filter(n => n.startsWith('Method')).length >= 10, `${side}: too few Method constants`);
    assert.deepEqual(m.types.get('StateChanged').map(f => f.name), ['state', 'reason'], side);
    assert.ok(m.eventPayloads.size >= 20, `${side}: ${m.eventPayloads.size} event payloads`);
    assert.ok(m.requests.size >= 10, `${side}: ${m.requests.size} requests`);
    assert.ok(m.states.includes('failed'), `${side}: SessionState ${m.states}`);
  }
});

test('every protocol name the VS Code extension uses is in protocol.gen.ts (or protocol.ts adds it)', () => {
  const own = new Set([...read('extensions/vscode/src/protocol.ts').matchAll(/^export (?:const|function|interface|type|class) (\w+)/gm)].map(m => m[1]));
  const missing = [];
  let n = 0;
  for (const f of tsSources) {
    for (const name of tsUses(read(f))) {
      n++;
      if (!ts.exported.has(name) && !own.has(name)) missing.push(`${f}: ${name}`);
    }
  }
  assert.ok(n > 50, `found only ${n} uses of the protocol module: the scan is broken`);
  assert.deepEqual(missing, [], `names that are not in ${tsFile}:\n  ${missing.join('\n  ')}`);
});

test('every protocol field the Neovim plugin uses is in protocol_gen.lua (or protocol.lua adds it)', () => {
  const own = new Set([...read('extensions/nvim/lua/arbor/protocol.lua').matchAll(/^M\.(\w+) =/gm)].map(m => m[1]));
  const missing = [];
  let n = 0;
  for (const f of luaSources) {
    for (const name of luaUses(read(f))) {
      n++;
      if (!lua.consts.has(name) && !lua.tables.has(name) && !own.has(name)) missing.push(`${f}: ${name}`);
    }
  }
  assert.ok(n > 30, `found only ${n} uses of the protocol module: the scan is broken`);
  assert.deepEqual(missing, [], `names that are not in ${luaFile}:\n  ${missing.join('\n  ')}`);
});

test('no arbor/* method or notification is spelt out instead of named by its constant', () => {
  const methods = new Set([...ts.consts].filter(([k]) => /^(Method|Notify)/.test(k)).map(([, v]) => v));
  const bad = [];
  for (const f of [...files('extensions/vscode/src', '.ts'), ...files('extensions/nvim/lua', '.lua')]) {
    if (f === tsFile || f === luaFile) continue;
    for (const m of read(f).matchAll(/['"`](arbor\/[a-z][A-Za-z]*(?:\.[a-z][A-Za-z]*)?)['"`]/g)) {
      bad.push(`${f}: ${m[1]}${methods.has(m[1]) ? '' : ' (not even a method of the protocol)'}`);
    }
  }
  assert.deepEqual(bad, [], `use the generated constants:\n  ${bad.join('\n  ')}`);
});

test('the wrappers protocol.ts and protocol.lua copy nothing of the generated files', () => {
  const tsWrap = read('extensions/vscode/src/protocol.ts');
  assert.match(tsWrap, /^export \* from '\.\/protocol\.gen';$/m);
  const tsCopies = [...tsWrap.matchAll(/^export (?:const|interface|type|enum) (\w+)/gm)].map(m => m[1]).filter(n => ts.exported.has(n));
  assert.deepEqual(tsCopies, [], 'protocol.ts redeclares generated names');
  const luaWrap = read('extensions/nvim/lua/arbor/protocol.lua');
  assert.match(luaWrap, /require\('arbor\.protocol_gen'\)/);
  const luaCopies = [...luaWrap.matchAll(/^M\.(\w+) =/gm)].map(m => m[1]).filter(n => lua.consts.has(n) || lua.tables.has(n));
  assert.deepEqual(luaCopies, [], 'protocol.lua redefines generated names');
  for (const [f, src] of [['protocol.ts', tsWrap], ['protocol.lua', luaWrap]]) {
    assert.ok(!/['"]arbor\/|-320\d\d/.test(src), `${f} spells out a method or an error code`);
  }
});

test('protocol.gen.ts and protocol_gen.lua have the same constants with the same values', () => {
  const problems = [];
  for (const [name, v] of ts.consts) {
    if (!lua.consts.has(name)) problems.push(`only in TypeScript: ${name} = ${JSON.stringify(v)}`);
    else if (lua.consts.get(name) !== v) problems.push(`${name}: TypeScript ${JSON.stringify(v)}, Lua ${JSON.stringify(lua.consts.get(name))}`);
  }
  for (const [name, v] of lua.consts) if (!ts.consts.has(name)) problems.push(`only in Lua: ${name} = ${JSON.stringify(v)}`);
  assert.deepEqual(problems, []);
  assert.deepEqual(ts.states, lua.states, 'SessionState');
  const stateConsts = [...ts.consts].filter(([k]) => k.startsWith('State')).map(([, v]) => v);
  for (const v of stateConsts) assert.ok(ts.states.includes(v), `State constant ${v} is not a SessionState`);
});

test('protocol.gen.ts and protocol_gen.lua declare the same types with the same fields', () => {
  const problems = [];
  const show = f => `${f.name}${f.optional ? '?' : ''} ${f.type}`;
  for (const [name, fields] of ts.types) {
    if (!lua.types.has(name)) { problems.push(`only in TypeScript: ${name}`); continue; }
    const a = fields.map(show), b = lua.types.get(name).map(show);
    if (JSON.stringify(a) !== JSON.stringify(b)) problems.push(`${name}: TypeScript { ${a.join(', ')} }, Lua { ${b.join(', ')} }`);
    const listed = lua.fields.get(name);
    if (!listed) problems.push(`${name}: not in M.fields`);
    else if (JSON.stringify(listed) !== JSON.stringify(fields.map(f => f.name))) problems.push(`${name}: M.fields { ${listed.join(', ')} }`);
    for (const f of fields) {
      const ref = f.type.replace(/^arbor\./, '').replace(/\[\]$/, '');
      if (f.type.startsWith('arbor.') && ref !== 'SessionState' && !ts.types.has(ref)) problems.push(`${name}.${f.name}: no type ${ref}`);
    }
  }
  for (const name of lua.types.keys()) if (!ts.types.has(name)) problems.push(`only in Lua: ${name}`);
  for (const name of lua.fields.keys()) if (!ts.types.has(name)) problems.push(`M.fields.${name}: no such type`);
  assert.ok(ts.types.size >= 50, `only ${ts.types.size} types parsed`);
  assert.deepEqual(problems, []);
});

test('both mirrors map the same event types to the same payloads, and the Event constants name them', () => {
  assert.deepEqual([...lua.eventPayloads].sort(), [...ts.eventPayloads].sort());
  for (const [type, payload] of ts.eventPayloads) assert.ok(ts.types.has(payload), `${type}: no payload type ${payload}`);
  const eventConsts = [...ts.consts].filter(([k]) => k.startsWith('Event')).map(([, v]) => v).sort();
  assert.deepEqual(eventConsts, [...ts.eventPayloads.keys()].sort(), 'Event* constants vs EventPayloads');
});

test('both mirrors give every request the same params and result, one per Method constant', () => {
  assert.deepEqual([...lua.requests].sort(), [...ts.requests].sort());
  const methods = [...ts.consts].filter(([k]) => k.startsWith('Method')).map(([, v]) => v).sort();
  assert.deepEqual([...ts.requests.keys()].sort(), methods, 'Method* constants vs Requests');
  for (const [m, { params, result }] of ts.requests) {
    for (const t of [params, result]) assert.ok(ts.types.has(t.replace(/^arbor\./, '')), `${m}: no type ${t}`);
  }
  const notifies = [...ts.consts].filter(([k]) => k.startsWith('Notify')).map(([, v]) => v).sort();
  assert.deepEqual([...ts.notifications.keys()].sort(), notifies, 'Notify* constants vs Notifications');
  for (const [n, t] of ts.notifications) assert.ok(ts.types.has(t), `${n}: no type ${t}`);
});
