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

--- Lines for the data of an event type this plugin does not know (from a newer daemon).
local function raw(d, lines)
  if next(d) == nil then
    return
  end
  local flat = true
  for _, v in pairs(d) do
    if type(v) == 'table' then
      flat = false
    end
  end
  if flat then
    local keys = vim.tbl_keys(d)
    table.sort(keys)
    for _, k in ipairs(keys) do
      table.insert(lines, '- ' .. k .. ': ' .. (s(d[k]) or ''))
    end
  else
    fenced(lines, vim.fn.json_encode(d), 'json')
  end
end

--- Lines (markdown) for one event: a heading with its type, seq and time, then what it says.
function M.render_event(ev)
  local d = ev.data
  if type(d) ~= 'table' then
    d = {}
  end
  local time = (s(ev.ts) or ''):match('T(%d+:%d+:%d+)') or ''
  local lines = { string.format('### %s · #%s %s', ev.type or '?', tostring(ev.seq or '?'), time), '' }
  local fn = render[ev.type]
  if fn then
    fn(d, lines)
  else
    raw(d, lines)
  end
  table.insert(lines, '')
  return lines
end

--- The first lines of a transcript: the session's title, then its state, branch and origin.
function M.header(sess, id)
  if not sess then
    return { '# ' .. id, '' }
  end
  local about = { s(sess.state) or '?' }
  if s(sess.error) then
    about[1] = about[1] .. ': ' .. s(sess.error):gsub('\n', ' ')
  end
  if s(sess.branch) then
    table.insert(about, 'branch ' .. s(sess.branch))
  end
  if store.origin(sess) then
    table.insert(about, store.origin(sess))
  end
  return { '# ' .. store.title(sess, 200), '', table.concat(about, ' · '), '' }
end

local function attach(id, since)
  local entry = open[id]
  if entry then
    entry.resyncing = true
  end
  client.request(P.MethodSessionAttach, { id = id, sinceSeq = since }, function(err, res)
    if entry then
      entry.resyncing = false
    end
    if err then
      client.notify('attach ' .. id .. ': ' .. client.error_message(err), vim.log.levels.ERROR)
      return
    end
    if entry then
      entry.attached = true -- from now on a restarted connection re-attaches it
    end
    if res and res.session then
      store.upsert(res.session)
    end
  end)
end

-- A restarted `arbor lsp` is a new connection without subscriptions: re-attach open transcripts
-- from the last event they show.
client.on_init(function()
  for id, entry in pairs(open) do
    if entry.attached then
      attach(id, entry.last_seq + 1)
    end
  end
end)

--- Opens the transcript of session id (a unique prefix is accepted by the daemon).
function M.open(id)
  local sess = store.find(id)
  if sess then
    id = sess.id
  end
  local entry = open[id]
  if entry and vim.api.nvim_buf_is_valid(entry.bufnr) then
    buffers.show(entry.bufnr, 'botright vsplit')
    return entry.bufnr
  end
  local bufnr = buffers.scratch('arbor://log/' .. id, 'markdown')
  entry = { bufnr = bufnr, last_seq = -1 }
  open[id] = entry
  buffers.set_lines(bufnr, M.header(sess, id))
  client.off_event(id)
  client.on_event(id, function(ev)
    if ev.type == '_fell_behind' then
      attach(id, entry.last_seq + 1)
      return
    end
    if (ev.seq or 0) <= entry.last_seq or not vim.api.nvim_buf_is_valid(bufnr) then
      return
    end
    if entry.last_seq >= 1 and ev.seq > entry.last_seq + 1 then
      -- A gap: events were lost on the way. Re-attach from it; the replay brings the missing
      -- events and everything after, so what arrives meanwhile can be skipped.
      if not entry.resyncing then
        attach(id, entry.last_seq + 1)
      end
      return
    end
    entry.last_seq = ev.seq
    buffers.set_lines(bufnr, M.render_event(ev), true)
    -- Follow the tail in windows whose cursor is on the last line.
    for _, win in ipairs(vim.fn.win_findbuf(bufnr)) do
      local n = vim.api.nvim_buf_line_count(bufnr)
      local row = vim.api.nvim_win_get_cursor(win)[1]
      if row >= n - 40 then
        vim.api.nvim_win_set_cursor(win, { n, 0 })
      end
    end
  end)
  vim.api.nvim_create_autocmd('BufWipeout', {
    buffer = bufnr,
    once = true,
    callback = function()
      open[id] = nil
      client.off_event(id)
      client.request(P.MethodSessionDetach, { id = id }, function() end)
    end,
  })
  buffers.keymaps(bufnr, {
    q = { function() pcall(vim.cmd, 'close') end, 'close' },
    d = { function() require('arbor').diff(id) end, 'Arbor: diff' },
    m = { function() require('arbor').send(id) end, 'Arbor: send message' },
  })
  attach(id, 0)
  buffers.show(bufnr, 'botright vsplit')
  return bufnr
end

return M
