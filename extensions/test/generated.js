// Readers of the two generated protocol mirrors, extensions/vscode/src/protocol.gen.ts and
// extensions/nvim/lua/arbor/protocol_gen.lua (`go generate ./server` writes both), into one model:
// constants, types with their fields, the event payload table and the request table. Used by
// protocol-mirror.test.js and the VS Code unit tests.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const repo = path.resolve(__dirname, '..', '..');
const tsFile = 'extensions/vscode/src/protocol.gen.ts';
const luaFile = 'extensions/nvim/lua/arbor/protocol_gen.lua';
const read = rel => fs.readFileSync(path.join(repo, rel), 'utf8');

function literal(v) {
  return /^['"]/.test(v) ? v.slice(1, -1) : Number(v);
}

/**
 * The TypeScript mirror: consts (name → value), types (name → [{ name, optional, type }], with
 * types written the Lua way: arbor.X, string[], any), states, eventPayloads, requests,
 * notifications.
 */
function readTs(src = read(tsFile)) {
  const consts = new Map();
  for (const m of src.matchAll(/^export const (\w+) = ('[^']*'|-?\d+);$/gm)) consts.set(m[1], literal(m[2]));
  const luaType = t => {
    t = t.replace(/\/\*.*?\*\//g, '').trim();
    const rec = t.match(/^Record<string, (.+)>$/);
    if (rec) return 'table<string,' + luaType(rec[1]) + '>';
    const arr = t.endsWith('[]');
    const base = arr ? t.slice(0, -2) : t;
    const named = ['string', 'number', 'boolean'].includes(base) ? base : base === 'unknown' ? 'any' : 'arbor.' + base;
    return named + (arr ? '[]' : '');
  };
  const types = new Map();
  const bodies = new Map();
  for (const m of src.matchAll(/^export interface (\w+) \{\n([\s\S]*?)^\}/gm)) bodies.set(m[1], m[2]);
  for (const m of src.matchAll(/^export type (\w+) = Record<string, never>;$/gm)) types.set(m[1], []);
  const special = new Set(['EventPayloads', 'Requests', 'Notifications']);
  for (const [name, body] of bodies) {
    if (special.has(name)) continue;
    const fields = [];
    for (const f of body.matchAll(/^ {2}(\w+)(\?)?: (.+);$/gm)) fields.push({ name: f[1], optional: !!f[2], type: luaType(f[3]) });
    types.set(name, fields);
  }
  const entries = (name, re) => [...(bodies.get(name) ?? '').matchAll(re)];
  const eventPayloads = new Map(entries('EventPayloads', /^ {2}(\w+): (\w+);$/gm).map(m => [m[1], m[2]]));
  const requests = new Map(entries('Requests', /^ {2}'([^']+)': \{ params: (\w+); result: (\w+) \};$/gm)
    .map(m => [m[1], { params: 'arbor.' + m[2], result: 'arbor.' + m[3] }]));
  const notifications = new Map(entries('Notifications', /^ {2}'([^']+)': (\w+);$/gm).map(m => [m[1], m[2]]));
  const union = src.match(/^export type SessionState =\n((?: {2}\| '[^']*'\n?)+);/m);
  const states = union ? [...union[1].matchAll(/'([^']*)'/g)].map(m => m[1]) : [];
  const exported = new Set([...src.matchAll(/^export (?:const|interface|type) (\w+)/gm)].map(m => m[1]));
  return { consts, types, eventPayloads, requests, notifications, states, exported };
}

/**
 * The Lua mirror, in the same model: constants M.X, ---@class/---@field annotations, the
 * ---@alias of SessionState, M.fields, M.event_payloads and M.requests.
 */
function readLua(src = read(luaFile)) {
  const consts = new Map();
  for (const m of src.matchAll(/^M\.(\w+) = ('[^']*'|-?\d+)$/gm)) consts.set(m[1], literal(m[2]));
  const types = new Map();
  for (const m of src.matchAll(/^---@class arbor\.(\w+)\n((?:---@field .*\n)*)/gm)) {
    types.set(m[1], [...m[2].matchAll(/^---@field (\w+)(\?)? (\S+)$/gm)].map(f => ({ name: f[1], optional: !!f[2], type: f[3] })));
  }
  const table = name => {
    const m = src.match(new RegExp(`^M\\.${name} = \\{\\n([\\s\\S]*?)^\\}`, 'm'));
    return m ? m[1] : '';
  };
  const fields = new Map([...table('fields').matchAll(/^ {2}(\w+) = \{ ?(.*?) ?\},$/gm)]
    .map(m => [m[1], [...m[2].matchAll(/'(\w+)'/g)].map(x => x[1])]));
  const eventPayloads = new Map([...table('event_payloads').matchAll(/^ {2}(\w+) = '(\w+)',$/gm)].map(m => [m[1], m[2]]));
  const requests = new Map([...table('requests').matchAll(/^ {2}\['([^']+)'\] = \{ params = '([\w.]+)', result = '([\w.]+)' \},$/gm)]
    .map(m => [m[1], { params: m[2], result: m[3] }]));
  const alias = src.match(/^---@alias arbor\.SessionState (.*)$/m);
  const states = alias ? [...alias[1].matchAll(/'([^']*)'/g)].map(m => m[1]) : [];
  const tables = new Set([...src.matchAll(/^M\.(\w+) = \{$/gm)].map(m => m[1]));
  return { consts, types, fields, eventPayloads, requests, states, tables };
}

module.exports = { repo, read, tsFile, luaFile, readTs, readLua };
