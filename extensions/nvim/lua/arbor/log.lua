-- :ArborLog {id} — a session's transcript: attach (the daemon replays the log as arbor/event
-- notifications, then streams live ones) and append each event as readable lines.
local P = require('arbor.protocol')
local buffers = require('arbor.buffers')
local client = require('arbor.client')
local store = require('arbor.store')

local M = {}

local open = {} -- session id -> { bufnr, last_seq }

local function s(v)
  if v == nil or v == vim.NIL then
    return nil
  end
  if type(v) ~= 'string' then
    return vim.inspect(v)
  end
  return v ~= '' and v or nil
end

local function num(v)
  return type(v) == 'number' and v or 0
end

local function list(v)
  return type(v) == 'table' and v or {}
end

local function short(id, n)
  return (s(id) or ''):sub(1, n or 8)
end

local function split(text)
  return vim.split(text:gsub('\n$', ''), '\n', { plain = true })
end

local function fenced(lines, text, lang)
  table.insert(lines, '```' .. (lang or ''))
  vim.list_extend(lines, split(text))
  table.insert(lines, '```')
end

local function tokens(u)
  if type(u) ~= 'table' then
    return nil
  end
  return string.format('_%d in / %d out tokens%s_', num(u.inputTokens), num(u.outputTokens),
    u.estimated == true and ' (estimated)' or '')
end

local function files(l)
  local out = {}
  for _, f in ipairs(list(l)) do
    table.insert(out, f)
  end
  return #out > 0 and table.concat(out, ', ') or 'no files'
end

-- How each event type reads: render[type](data, lines) appends the lines of its payload. One
-- entry per type of protocol_gen.lua's event_payloads (test/unit.lua checks both ways).
local render = {}
M.renderers = render

render[P.EventSessionCreated] = function(d, lines)
  table.insert(lines, 'Task: ' .. (s(d.task) or ''):gsub('\n', ' '))
  if s(d.name) then
    table.insert(lines, '- name: ' .. s(d.name))
  end
  for _, kv in ipairs({ { 'model', d.model }, { 'branch', d.branch } }) do
    if s(kv[2]) then
      table.insert(lines, '- ' .. kv[1] .. ': ' .. s(kv[2]))
    end
  end
  if s(d.baseCommit) then
    table.insert(lines, '- base commit: ' .. short(d.baseCommit, 12))
  end
  if s(d.parent) then
    table.insert(lines, '- subagent of ' .. short(d.parent))
  end
  if s(d.forkOf) then
    table.insert(lines, string.format('- fork of %s at event %d', short(d.forkOf), num(d.forkSeq)))
  end
  if s(d.selection) then
    table.insert(lines, 'with the selection:')
    fenced(lines, s(d.selection))
  end
end

render[P.EventStateChanged] = function(d, lines)
  table.insert(lines, '→ ' .. (s(d.state) or '?') .. (s(d.reason) and (': ' .. s(d.reason)) or ''))
end

render[P.EventTurnStarted] = function(d, lines)
  table.insert(lines, '— turn ' .. num(d.turn) .. ' —')
end

render[P.EventMessageQueued] = function(d, lines)
  table.insert(lines, string.format('queued from %s (%s): %s', s(d.from) or 'user', s(d.mode) or '?',
    (s(d.text) or ''):match('^[^\n]*')))
end

render[P.EventUserMessage] = function(d, lines)
  table.insert(lines, (s(d.from) or 'user') .. (s(d.via) and (' (read from the ' .. s(d.via) .. ')') or '') .. ':')
  vim.list_extend(lines, split(s(d.text) or ''))
end

render[P.EventAssistantMessage] = function(d, lines)
  local n = #lines
  if s(d.text) then
    vim.list_extend(lines, split(s(d.text)))
  end
  for _, c in ipairs(list(d.toolCalls)) do
    fenced(lines, s(c.code) or '', 'python')
  end
  if #lines == n then
    table.insert(lines, '_(no text)_')
  end
  local u = tokens(d.usage)
  if u then
    table.insert(lines, u .. (num(d.retries) > 0 and string.format(' _after %d retries_', d.retries) or ''))
  end
end

render[P.EventModelRetry] = function(d, lines)
  table.insert(lines, string.format('model call failed, retry %d: %s', num(d.retry), s(d.error) or ''))
end

render[P.EventModelChanged] = function(d, lines)
  table.insert(lines, string.format('model %s → %s', s(d.from) or '?', s(d.model) or '?'))
end

render[P.EventToolStarted] = function(d, lines)
  -- The code is in the assistant_message just before; say only that it runs.
  table.insert(lines, 'running cell' .. (s(d.callId) and (' ' .. s(d.callId)) or '') .. '…')
end

render[P.EventToolFinished] = function(d, lines)
  local meta = {}
  if num(d.executionCount) > 0 then
    table.insert(meta, '[' .. d.executionCount .. ']')
  end
  if type(d.durationMs) == 'number' then
    table.insert(meta, d.durationMs .. ' ms')
  end
  table.insert(lines, 'result (' .. (s(d.status) or '?') .. ')' .. (#meta > 0 and (' ' .. table.concat(meta, ', ')) or ''))
  if s(d.output) then
    fenced(lines, s(d.output))
  end
  if s(d.error) then
    table.insert(lines, 'error: ' .. s(d.error))
  end
  if s(d.artifact) then
    table.insert(lines, 'full output' .. (num(d.bytes) > 0 and (' (' .. d.bytes .. ' bytes)') or '') .. ': ' .. s(d.artifact))
  end
  for _, r in ipairs(list(d.rich)) do
    table.insert(lines, 'rich output: ' .. r)
  end
end

render[P.EventCheckpoint] = function(d, lines)
  table.insert(lines, string.format('checkpoint %s after turn %d%s', short(d.commit, 12), num(d.turn),
    s(d.merged) and (', merging subagent ' .. short(d.merged)) or ''))
end

render[P.EventTurnFailed] = function(d, lines)
  table.insert(lines, string.format('turn %d failed: %s%s', num(d.turn), s(d.error) or '',
    d.checkpoint == true and " (only its checkpoint: the turn's work is recorded)" or ''))
end

render[P.EventInterrupted] = function(d, lines)
  table.insert(lines, string.format('turn %d interrupted: %s', num(d.turn), s(d.reason) or ''))
end

render[P.EventRecovered] = function(d, lines)
  if s(d.worktree) then
    table.insert(lines, 'recovered: worktree ' .. s(d.worktree))
  else
    table.insert(lines, 'recovered after a daemon restart (was ' .. (s(d.previousState) or 'unknown') .. ')')
  end
end

render[P.EventKernel] = function(d, lines)
  table.insert(lines, 'kernel ' .. (s(d.event) or '?') .. (num(d.pid) > 0 and (' (pid ' .. d.pid .. ')') or ''))
  if s(d.restored) then
    table.insert(lines, 'restored: ' .. s(d.restored))
  end
  if s(d.summary) then
    table.insert(lines, 'snapshot: ' .. s(d.summary))
  end
  if s(d.error) then
    table.insert(lines, 'error: ' .. s(d.error))
  end
end

render[P.EventSubagentSpawned] = function(d, lines)
  table.insert(lines, string.format('spawned subagent %s on %s: %s', s(d.name) or short(d.id), s(d.branch) or '?',
    (s(d.task) or ''):gsub('\n', ' ')))
  table.insert(lines, '- id: ' .. (s(d.id) or '?'))
end

render[P.EventMessageSent] = function(d, lines)
  local to = {}
  for _, r in ipairs(list(d.receipts)) do
    table.insert(to, string.format('%s %s (%s)', s(r.role) or '?', s(r.name) or short(r.to), s(r.status) or '?'))
  end
  table.insert(lines, 'sent to ' .. (#to > 0 and table.concat(to, ', ') or 'nobody') .. ':')
  vim.list_extend(lines, split(s(d.text) or ''))
end

render[P.EventCompaction] = function(d, lines)
  table.insert(lines, string.format('context compacted: %d messages summarised, %d kept%s', num(d.compacted), num(d.kept),
    d.forced == true and ' (forced: the model refused the context)' or ''))
  for _, l in ipairs(split(s(d.summary) or '')) do
    table.insert(lines, '> ' .. l)
  end
  if s(d.liveVariables) then
    table.insert(lines, 'live variables: ' .. s(d.liveVariables))
  end
  local u = tokens(d.usage)
  if u then
    table.insert(lines, u)
  end
end

render[P.EventWorktree] = function(d, lines)
  local c = s(d.commit)
  table.insert(lines, d.event == 'released' and ('worktree released to stay within the worktree bounds; its work is on the branch'
    .. (c and (' (checkpoint ' .. c:sub(1, 10) .. ')') or '') .. ' and it is checked out again at the next use')
    or ('worktree checked out again from the branch (' .. tostring(tonumber(d.durationMs) or 0) .. ' ms)'))
end

render[P.EventWorktreeSetup] = function(d, lines)
  if d.ok ~= true then
    table.insert(lines, 'worktree setup failed: ' .. (s(d.error) or ''))
    return
  end
  table.insert(lines, 'worktree prepared')
  if #list(d.copied) > 0 then
    table.insert(lines, '- copied: ' .. files(d.copied))
  end
  if #list(d.linked) > 0 then
    table.insert(lines, '- linked: ' .. files(d.linked))
  end
  if s(d.command) then
    table.insert(lines, '- ran ' .. s(d.command))
  end
end

render[P.EventForked] = function(d, lines)
  table.insert(lines, string.format('forked from %s at event %d (checkpoint %s, %d turns)', short(d.source), num(d.seq),
    short(d.commit, 10), num(d.turns)))
end

render[P.EventAccepted] = function(d, lines)
  table.insert(lines, string.format('accepted onto %s as %s (%s): %s', s(d.branch) or '?', short(d.commit, 10),
    s(d.mode) or '?', files(d.files)))
end

if P.EventRejected then
  render[P.EventRejected] = function(d, lines)
    local what = #list(d.hunks) > 0 and ('hunks ' .. table.concat(list(d.hunks), ', ')) or files(d.files)
    table.insert(lines, string.format('✗ rejected by the user, reverted on this branch as %s: %s', short(d.commit, 10), what))
  end
end

render[P.EventMerged] = function(d, lines)
  table.insert(lines, string.format('merged subagent %s (%s) as %s: %s', short(d.child), s(d.branch) or '?',
    short(d.commit, 10), files(d.files)))
end

render[P.EventDiscarded] = function(d, lines)
  local where = s(d.archived) and ('unmerged work kept at ' .. s(d.archived))
    or (d.branchDeleted == true and ('branch ' .. (s(d.branch) or '?') .. ' deleted'))
    or ('branch ' .. (s(d.branch) or '?') .. ' kept')
  table.insert(lines, 'discarded' .. (d.force == true and ' (forced)' or '') .. '; ' .. where
    .. (d.worktreeRemoved == true and '' or '; the worktree was not removed'))
end

local function harness_edits(edits)
  local parts = {}
  for _, x in ipairs(list(edits)) do
    table.insert(parts, (s(x.op) or '?') .. ' ' .. (s(x.kind) or '?') .. ' ' .. (s(x.id) or '?'))
  end
  return table.concat(parts, ', ')
end

render[P.EventHarnessProposed] = function(d, lines)
  local wait = d.policy == 'review' and 'waiting for review: :ArborProposals' or 'applied by policy unless refused'
  table.insert(lines, string.format('harness proposal %s (%s, %s scope, %s): %s', s(d.proposal) or '?', s(d.author) or '?',
    s(d.scope) or '?', wait, harness_edits(d.edits)))
  if s(d.rationale) then
    table.insert(lines, '> ' .. s(d.rationale))
  end
end

render[P.EventHarnessApplied] = function(d, lines)
  local what = s(d.proposal) and ('harness proposal ' .. s(d.proposal) .. ' applied')
    or ('harness ' .. (s(d.scope) or '?') .. ' scope changed')
  table.insert(lines, string.format('%s by %s as %s: %s', what, s(d.by) or '?', short(d.commit, 10), harness_edits(d.edits)))
  if s(d.observed) then
    table.insert(lines, 'observed: ' .. s(d.observed))
  end
end

render[P.EventHarnessRejected] = function(d, lines)
  local what = s(d.proposal) and ('harness proposal ' .. s(d.proposal)) or 'harness change'
  table.insert(lines, string.format('%s rejected by %s: %s', what, s(d.by) or '?', s(d.reason) or ''))
end

render[P.EventHarnessRolledBack] = function(d, lines)
  table.insert(lines, string.format('harness %s scope: %s %s rolled back to %s as %s', s(d.scope) or '?', s(d.kind) or '?',
    s(d.id) or '?', short(d.to, 10), short(d.commit, 10)))
end

render[P.EventRefined] = function(d, lines)
  if s(d.error) then
    table.insert(lines, string.format('refine (%s scope, events %d-%d) made no proposal: %s', s(d.scope) or '?',
      num(d.fromSeq), num(d.toSeq), s(d.error)))
    return
  end
  table.insert(lines, string.format('refine (%s scope, events %d-%d): %d proposals %s', s(d.scope) or '?', num(d.fromSeq),
    num(d.toSeq), #list(d.proposals), table.concat(list(d.proposals), ', ')))
end

local goal = require('arbor.goal')

render[P.EventGoalSet] = function(d, lines)
  local line = '◎ goal (set by ' .. (s(d.by) or '?') .. '): ' .. (s(d.objective) or ''):match('^[^\n]*')
  local b = goal.budget_text(d)
  if b ~= '' then
    line = line .. ' — budget ' .. b
  end
  if s(d['until']) then
    line = line .. '; done when `' .. d['until'] .. '` passes'
  end
  if d.replaced == true then
    line = line .. '; replaces the previous goal'
  end
  table.insert(lines, line)
end

render[P.EventGoalChanged] = function(d, lines)
  table.insert(lines, string.format('◎ goal %s%s [%d turns, %s]', (s(d.status) or '?'):gsub('_', ' '),
    s(d.reason) and (': ' .. s(d.reason):gsub('\n', ' ')) or '', num(d.turns), goal.spend_text(d.spend)))
  if d.claimed == true or d.verified == true then
    table.insert(lines, string.format('claimed by the model: %s; verified: %s', d.claimed == true and 'yes' or 'no',
      d.verified == true and 'yes' or 'no'))
  end
  if s(d.evidence) then
    table.insert(lines, 'evidence: ' .. s(d.evidence))
  end
end

render[P.EventGoalWait] = function(d, lines)
  if d.reason == 'children' then
    local kids = {}
    for _, c in ipairs(list(d.children)) do
      table.insert(kids, short(c))
    end
    table.insert(lines, '◎ goal parked until its subagents report: ' .. table.concat(kids, ', '))
    return
  end
  table.insert(lines, string.format('◎ goal backs off %ds after %d turn(s) that changed nothing', math.floor(num(d.delayMs) / 1000 + 0.5),
    num(d.idleTurns)))
end

render[P.EventVerified] = function(d, lines)
  local mark = d.skipped == true and '✓?' or (d.passed == true and '✓' or '✗')
  table.insert(lines, string.format('%s end condition %s%s [%s]', mark, goal.check_text(d),
    d.claimed == true and ' (after the model claimed success)' or '', goal.spend_text(d.spend)))
  if s(d.output) and d.passed ~= true then
    fenced(lines, s(d.output))
  end
end

render[P.EventHeartbeatTick] = function(d, lines)
  local head = string.format('♡ heartbeat %s run %d%s', s(d.id) or '?', num(d.run),
    num(d.count) > 1 and string.format(' (counting %d due times)', num(d.count)) or '')
  if d.status == 'coalesced' then
    table.insert(lines, string.format('%s coalesced: the session was busy; %d pending, delivered as one message when it is free', head, num(d.pending)))
  elseif d.status == 'stopped' then
    table.insert(lines, head .. ' not delivered: the session is stopped, so it is no longer scheduled')
  else
    table.insert(lines, string.format('%s: %s (%d pending)', head, s(d.status) or '?', num(d.pending)))
  end
end

if P.EventToolOutput then
  -- Streamed cell output: the transcript appends it to the cell (transcript.lua); alone it reads so.
  render[P.EventToolOutput] = function(d, lines)
    local text = (s(d.text) or ''):gsub('\n$', '')
    table.insert(lines, string.format('%s of cell %s: %s%s', s(d.stream) or 'output', s(d.callId) or '?',
      text:gsub('\n', ' ⏎ '), d.truncated == true and ' (cut: no more is kept)' or ''))
  end
end

local transcript = require('arbor.transcript')

--- The lines of one event's data as its renderer writes them (no transcript structure).
function M.render_event(ev)
  local d = type(ev.data) == 'table' and ev.data or {}
  local lines = {}
  local fn = render[ev.type]
  if fn then
    fn(d, lines)
  else
    transcript.raw(d, lines, ev.type)
  end
  return lines
end

--- One line for an event: "#12 tool_finished: result (error) [2] · 688 ms" (evidence lists).
function M.summary(ev)
  local lines = M.render_event(ev)
  local first, err
  for _, l in ipairs(lines) do
    if not first and l:match('%S') and not l:match('^```') then
      first = l
    elseif first and l:match('^error: ') then
      err = l:sub(8)
    end
  end
  return string.format('#%s %s: %s%s', tostring(ev.seq or '?'), ev.type or '?', first or '', err and (' — ' .. err) or '')
end

--- The state line of a transcript's header: "idle · branch arbor/x · fork of 8e6a9ede at event 20".
function M.about(sess, state, reason)
  local about = { state or (sess and s(sess.state)) or '?' }
  reason = reason or (sess and not state and s(sess.error)) or nil
  if reason then
    about[1] = about[1] .. ': ' .. reason:gsub('\n', ' ')
  end
  if sess and s(sess.branch) then
    table.insert(about, 'branch ' .. s(sess.branch))
  end
  if sess and store.origin(sess) then
    table.insert(about, store.origin(sess))
  end
  return table.concat(about, ' · ')
end

M.keys = '<CR> subagent/turn diff/fold · f fork from here · D turn diff · d diff · r refine now · m message · q close'

--- The first lines of a transcript: the session's title, its state, branch and origin, the keys.
function M.header(sess, id)
  if not sess then
    return { '# ' .. id, '', '?', M.keys, '' }
  end
  return { '# ' .. store.title(sess, 200), '', M.about(sess), M.keys, '' }
end
M.state_line = 3

--- The transcript of events as lines (for tests and summaries): a transcript fed them all.
function M.render_log(events, sess, id)
  local t = transcript.new({ render = render, header = M.header(sess, id or '?'), state_line = M.state_line,
    state_text = function(st, why) return M.about(sess, st, why) end })
  for _, ev in ipairs(events) do
    t:add(ev)
  end
  return t.lines, t
end

local ns = vim.api.nvim_create_namespace('arbor-log')
local views = {} -- session id -> { bufnr, t, attached, resyncing, scheduled }
local by_buf = {} -- bufnr -> view

M.page = 2000 -- events read per arbor/session.log request while catching up

--- The fold level of line lnum of the current buffer (its 'foldexpr').
function M.foldexpr(lnum)
  local v = by_buf[vim.api.nvim_get_current_buf()]
  return v and v.t.levels[lnum] or '0'
end

local function flush(v)
  v.scheduled = false
  local bufnr = v.bufnr
  if not vim.api.nvim_buf_is_valid(bufnr) then
    return
  end
  local old_n = vim.api.nvim_buf_line_count(bufnr)
  local out = v.t:take()
  if not out.from and #out.patches == 0 and #out.hls == 0 and #out.marks == 0 then
    return
  end
  local followers = {}
  for _, win in ipairs(vim.fn.win_findbuf(bufnr)) do
    if vim.api.nvim_win_get_cursor(win)[1] >= old_n - 1 then
      table.insert(followers, win)
    end
  end
  vim.bo[bufnr].modifiable = true
  for _, p in ipairs(out.patches) do
    vim.api.nvim_buf_set_lines(bufnr, p[1] - 1, p[1], false, { p[2] })
  end
  if out.from then
    if out.flushed == 0 then
      vim.api.nvim_buf_set_lines(bufnr, 0, -1, false, out.lines)
    else
      vim.api.nvim_buf_set_lines(bufnr, out.from - 1, out.flushed, false, out.lines)
    end
  end
  vim.bo[bufnr].modifiable = false
  vim.bo[bufnr].modified = false
  for _, h in ipairs(out.hls) do
    vim.api.nvim_buf_add_highlight(bufnr, ns, h[2], h[1] - 1, 0, -1)
  end
  for _, m in ipairs(out.marks) do
    pcall(vim.api.nvim_buf_set_extmark, bufnr, ns, m[1] - 1, 0, { virt_text = { { m[2], 'Comment' } }, virt_text_pos = 'eol' })
  end
  -- Follow the tail in windows whose cursor was on the last line.
  local n = vim.api.nvim_buf_line_count(bufnr)
  for _, win in ipairs(followers) do
    vim.api.nvim_win_set_cursor(win, { n, 0 })
  end
end

local function schedule(v)
  if not v.scheduled then
    v.scheduled = true
    vim.schedule(function() flush(v) end)
  end
end

local function attach(id, since)
  local v = views[id]
  if v then
    v.resyncing = true
  end
  client.request(P.MethodSessionAttach, { id = id, sinceSeq = since }, function(err, res)
    if v then
      v.resyncing = false
    end
    if err then
      client.notify('attach ' .. id .. ': ' .. client.error_message(err), vim.log.levels.ERROR)
      return
    end
    if v then
      v.attached = true -- from now on a restarted connection re-attaches it
    end
    if res and res.session then
      store.upsert(res.session)
      if v and vim.api.nvim_buf_is_valid(v.bufnr) then
        v.t:set(1, '# ' .. store.title(res.session, 200))
        schedule(v)
      end
    end
  end)
end

-- Reads the log in pages (one response each, much cheaper than one notification per event),
-- then attaches from the first event not read: the replay brings what came meanwhile.
local function catch_up(id, since)
  local v = views[id]
  client.request(P.MethodSessionLog, { id = id, sinceSeq = since, limit = M.page }, function(err, res)
    if not v or views[id] ~= v then
      return
    end
    if err then
      client.notify('log ' .. id .. ': ' .. client.error_message(err), vim.log.levels.ERROR)
      return
    end
    local evs = type(res) == 'table' and type(res.events) == 'table' and res.events or {}
    for _, ev in ipairs(evs) do
      v.t:add(ev)
    end
    schedule(v)
    if #evs >= M.page then
      catch_up(id, v.t.last_seq + 1)
    else
      attach(id, v.t.last_seq + 1)
    end
  end)
end

-- A restarted `arbor lsp` is a new connection without subscriptions: re-attach open transcripts
-- from the last event they show.
client.on_init(function()
  for id, v in pairs(views) do
    if v.attached then
      attach(id, v.t.last_seq + 1)
    end
  end
end)

local function on_event(v, id, ev)
  if ev.type == '_fell_behind' then
    attach(id, v.t.last_seq + 1)
    return
  end
  if (ev.seq or 0) <= v.t.last_seq or not vim.api.nvim_buf_is_valid(v.bufnr) then
    return
  end
  if v.t.last_seq >= 1 and ev.seq > v.t.last_seq + 1 then
    -- A gap: events were lost on the way. Re-attach from it; the replay brings the missing
    -- events and everything after, so what arrives meanwhile can be skipped.
    if not v.resyncing then
      attach(id, v.t.last_seq + 1)
    end
    return
  end
  v.t:add(ev)
  schedule(v)
end

--- The window options of a transcript window: folds by turn and cell, all open at first.
local function dress(win)
  vim.wo[win].foldmethod = 'expr'
  vim.wo[win].foldexpr = "v:lua.require'arbor.log'.foldexpr(v:lnum)"
  vim.wo[win].foldlevel = 99
  vim.wo[win].foldenable = true
  vim.wo[win].wrap = true
  vim.wo[win].linebreak = true
end

-- Shows bufnr in the window that shows it, else in a window showing another transcript, else
-- in a new split: opening a child or a fork reuses the transcript window.
local function show(bufnr, prefix)
  local win = vim.fn.bufwinid(bufnr)
  if win == -1 then
    for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
      if vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(w)):find('^' .. prefix) then
        win = w
        break
      end
    end
  end
  if win ~= -1 then
    vim.api.nvim_set_current_win(win)
    vim.api.nvim_win_set_buf(win, bufnr)
  else
    win = buffers.show(bufnr, 'botright vsplit')
  end
  return win
end

--- The session id of the transcript in bufnr (default: the current buffer), or nil.
function M.session_of(bufnr)
  return (vim.api.nvim_buf_get_name(bufnr or 0)):match('^arbor://log/(.+)$')
end

--- The entry (event) of line lnum (default: the cursor's) in transcript bufnr (default: the current).
function M.entry_at(bufnr, lnum)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local v = views[M.session_of(bufnr) or '']
  if not v then
    return nil
  end
  return v.t:entry(lnum or vim.api.nvim_win_get_cursor(0)[1]), v
end

--- Opens the diff of turn `turn` of session id (arbor/session.diff {id, turn}) in a diff buffer.
function M.turn_diff(id, turn, cb)
  client.request(P.MethodSessionDiff, { id = id, turn = turn }, function(err, res)
    if err then
      client.notify(string.format('diff of turn %d: %s', turn, client.error_message(err)), vim.log.levels.WARN)
      if cb then
        cb(err)
      end
      return
    end
    res = type(res) == 'table' and res or {}
    local sess = store.get(id)
    local lines = { string.format('# turn %d of %s: %s..%s', turn, sess and store.title(sess, 80) or id:sub(1, 8),
      (s(res.base) or ''):sub(1, 10), (s(res.head) or ''):sub(1, 10)) }
    local files = type(res.files) == 'table' and res.files or {}
    for _, f in ipairs(files) do
      table.insert(lines, string.format('#   %-9s %s  +%d -%d', s(f.status) or '?', s(f.path) or '?', num(f.additions), num(f.deletions)))
    end
    if #files == 0 then
      table.insert(lines, '#   no change in this turn')
    end
    table.insert(lines, '')
    local patch = (s(res.patch) or ''):gsub('\n$', '')
    if patch ~= '' then
      vim.list_extend(lines, vim.split(patch, '\n', { plain = true }))
    end
    local bufnr = buffers.scratch(string.format('arbor://turn/%s/%d', id, turn), 'diff')
    buffers.set_lines(bufnr, lines)
    buffers.keymaps(bufnr, { q = { function() pcall(vim.cmd, 'close') end, 'close' } })
    local win = vim.fn.bufwinid(bufnr)
    if win == -1 then
      for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
        if vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(w)):find('^arbor://turn/') then
          win = w
        end
      end
    end
    if win ~= -1 then
      vim.api.nvim_win_set_buf(win, bufnr)
      vim.api.nvim_set_current_win(win)
    else
      buffers.show(bufnr, 'belowright split')
    end
    if cb then
      cb(nil, bufnr)
    end
  end)
end

--- Forks session id at event seq (asking first) and opens the fork's transcript.
function M.fork_at(id, seq, cb)
  if vim.fn.confirm(string.format('Fork %s at event #%d (a new session on its own branch)?', id:sub(1, 8), seq), '&Yes\n&No', 2) ~= 1 then
    return
  end
  require('arbor').fork(id, seq, function(fork)
    local bufnr = M.open(fork.id)
    if cb then
      cb(fork, bufnr)
    end
  end)
end

local function keymaps(bufnr, id)
  local function here()
    local e = M.entry_at(bufnr)
    if not e then
      client.notify('no event on this line (the header): move to an event')
    end
    return e
  end
  buffers.keymaps(bufnr, {
    q = { function() pcall(vim.cmd, 'close') end, 'close' },
    d = { function() require('arbor').diff(id) end, 'Arbor: diff' },
    m = { function() require('arbor').send(id) end, 'Arbor: send message' },
    r = { function() require('arbor').refine(nil, id) end, 'Arbor: refine now' },
    f = { function()
      local e = here()
      if e then
        M.fork_at(id, e.seq)
      end
    end, 'Arbor: fork from the event under the cursor' },
    D = { function()
      local v = views[id]
      local turn = v and v.t:turn_at(vim.api.nvim_win_get_cursor(0)[1])
      if not turn then
        client.notify('no turn here: move into a turn')
        return
      end
      M.turn_diff(id, turn)
    end, 'Arbor: the diff of the turn under the cursor' },
    ['<CR>'] = { function()
      local e = M.entry_at(bufnr)
      if e and e.child then
        M.open(e.child)
      elseif e and e.checkpoint then
        M.turn_diff(id, e.checkpoint)
      elseif vim.fn.foldlevel('.') > 0 then
        vim.cmd('normal! za')
      end
    end, 'Arbor: open the subagent or the turn diff, else toggle the fold' },
  })
end

--- Opens the transcript of session id (a unique prefix is accepted by the daemon).
function M.open(id)
  local sess = store.find(id)
  if sess then
    id = sess.id
  end
  local v = views[id]
  if v and vim.api.nvim_buf_is_valid(v.bufnr) then
    dress(show(v.bufnr, 'arbor://log/'))
    return v.bufnr
  end
  local bufnr = buffers.scratch('arbor://log/' .. id, 'markdown')
  local t = transcript.new({ render = render, header = M.header(sess, id), state_line = M.state_line,
    state_text = function(st, why) return M.about(store.get(id), st, why) end })
  v = { bufnr = bufnr, t = t }
  views[id] = v
  by_buf[bufnr] = v
  vim.api.nvim_buf_clear_namespace(bufnr, ns, 0, -1)
  flush(v)
  client.off_event(id)
  client.on_event(id, function(ev) on_event(v, id, ev) end)
  vim.api.nvim_create_autocmd('BufWipeout', {
    buffer = bufnr,
    once = true,
    callback = function()
      views[id] = nil
      by_buf[bufnr] = nil
      client.off_event(id)
      client.request(P.MethodSessionDetach, { id = id }, function() end)
    end,
  })
  vim.api.nvim_create_autocmd('BufWinEnter', { buffer = bufnr, callback = function() dress(vim.api.nvim_get_current_win()) end })
  keymaps(bufnr, id)
  catch_up(id, 0)
  dress(show(bufnr, 'arbor://log/'))
  return bufnr
end

--- The view of session id's transcript (for tests): { bufnr, t = the transcript }.
function M.view(id)
  return views[id]
end

return M
