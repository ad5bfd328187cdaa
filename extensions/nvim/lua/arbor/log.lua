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

local function split(text)
  return vim.split(text:gsub('\n$', ''), '\n', { plain = true })
end

local function fenced(lines, text, lang)
  table.insert(lines, '```' .. (lang or ''))
  vim.list_extend(lines, split(text))
  table.insert(lines, '```')
end

--- Lines (markdown) for one event. Unknown types show their data as JSON.
function M.render_event(ev)
  local d = ev.data
  if type(d) ~= 'table' then
    d = {}
  end
  local time = (s(ev.ts) or ''):match('T(%d+:%d+:%d+)') or ''
  local lines = { string.format('### %s · #%s %s', ev.type or '?', tostring(ev.seq or '?'), time), '' }
  local t = ev.type
  local n = #lines
  if t == 'session_created' then
    table.insert(lines, 'Task: ' .. (s(d.task) or ''):gsub('\n', ' '))
    for _, k in ipairs({ 'model', 'branch', 'baseCommit', 'parent' }) do
      if s(d[k]) then
        table.insert(lines, '- ' .. k .. ': ' .. s(d[k]))
      end
    end
  elseif t == 'state_changed' then
    table.insert(lines, '→ ' .. (s(d.state) or s(d.to) or '?') .. (s(d.error) and (': ' .. s(d.error)) or ''))
  elseif t == 'user_message' or t == 'assistant_message' or t:match('^message_') then
    if s(d.text) then
      vim.list_extend(lines, split(s(d.text)))
    end
    for _, c in ipairs(type(d.toolCalls) == 'table' and d.toolCalls or type(d.tool_calls) == 'table' and d.tool_calls or {}) do
      local code = type(c) == 'table' and (s(c.code) or s(c.Code) or (type(c.arguments) == 'table' and s(c.arguments.code)) or s(c.arguments))
      if code then
        fenced(lines, code, 'python')
      end
    end
  elseif t == 'tool_started' then
    -- The code is in the assistant_message just before; say only that it runs.
    table.insert(lines, 'running cell' .. (s(d.callId) and (' ' .. s(d.callId)) or '') .. '…')
  elseif t == 'tool_finished' then
    if s(d.output) then
      fenced(lines, s(d.output))
    end
    if s(d.error) then
      table.insert(lines, 'error: ' .. s(d.error))
    end
  elseif t == 'turn_failed' then
    table.insert(lines, 'failed: ' .. (s(d.error) or vim.fn.json_encode(d)))
  elseif t == 'turn_started' then
    table.insert(lines, '— turn ' .. tostring(d.turn or '?') .. ' —')
  elseif t == 'checkpoint' then
    table.insert(lines, 'checkpoint ' .. (s(d.commit) or ''):sub(1, 12) .. (d.turn and (' after turn ' .. tostring(d.turn)) or ''))
  elseif t == 'interrupted' then
    table.insert(lines, 'interrupted' .. (s(d.reason) and (': ' .. s(d.reason)) or ''))
  end
  if #lines == n and next(d) ~= nil then
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
  table.insert(lines, '')
  return lines
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
  local title = sess and store.title(sess, 200) or id
  buffers.set_lines(bufnr, { '# ' .. title, '' })
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
