-- Heartbeats: the schedule a user types ("every 10m", "10m" or a cron expression) read into
-- heartbeat.create's fields, a heartbeat's line, and the list buffer arbor://heartbeats
-- (:ArborHeartbeats) with its next due times, runs and pending counts, where `x` deletes one.
-- The pure parts take no editor state: test/unit.lua checks them headless.
local M = {}

local function s(v)
  if v == nil or v == vim.NIL then
    return nil
  end
  return v ~= '' and tostring(v) or nil
end

local function num(v)
  return type(v) == 'number' and v or 0
end

--- Reads a schedule: "every 10m" or a bare duration is an interval; "cron …", five fields or an
--- @-name (@hourly) a cron expression, which the daemon checks. Returns the fields, or nil and
--- what to type instead.
function M.parse_schedule(text)
  local t = vim.trim((text or ''):gsub('%s+', ' '))
  local want = string.format('schedule "%s": want "every 10m" (an interval of at least 1s) or a cron expression such as "*/15 * * * *"', t)
  local goal = require('arbor.goal')
  local every = t:match('^[Ee]very (.+)$') or (goal.parse_duration(t) and t or nil)
  if every then
    local ms = goal.parse_duration(every)
    if not ms or ms < 1000 then
      return nil, want
    end
    return { every = every }
  end
  local cron = t:match('^cron (.+)$') or t
  local fields = 0
  for _ in cron:gmatch('%S+') do
    fields = fields + 1
  end
  if cron:match('^@%w+$') or fields == 5 then
    return { cron = cron }
  end
  return nil, want
end

function M.schedule_text(hb)
  return s(hb.cron) and ('cron ' .. hb.cron) or ('every ' .. (s(hb.every) or '?'))
end

--- "next due 18:30:05 · 2/3 runs delivered · 1 pending", or that the session stopped.
function M.state_text(hb)
  local next_due = hb.scheduled == true and ('next due ' .. ((s(hb.nextDue) or ''):match('T(%d+:%d+:%d+)') or '?'))
    or 'not scheduled (session stopped)'
  return string.format('%s · %d/%d runs delivered · %d pending', next_due, num(hb.delivered), num(hb.ticks), num(hb.pending))
end

--- The list's lines and, per line, the heartbeat on it.
function M.render(list, session)
  local lines = {
    string.format('Arbor heartbeats of %s (%d)   x delete  r refresh  q close', session and session:sub(1, 8) or 'all sessions', #list),
    '',
  }
  local rows = { false, false }
  if #list == 0 then
    table.insert(lines, '  no heartbeats: :ArborHeartbeat {id} adds one')
  end
  for _, hb in ipairs(list) do
    table.insert(lines, string.format('%s  %s  %-18s %s', s(hb.id) or '?', (s(hb.session) or '?'):sub(1, 8), M.schedule_text(hb), M.state_text(hb)))
    table.insert(rows, hb)
    table.insert(lines, '    ' .. ((s(hb.instruction) or ''):match('^[^\n]*')))
    table.insert(rows, hb)
  end
  return lines, rows
end

local bufnr, rows, shown_session = nil, {}, nil

--- The heartbeat on the cursor line of the list.
function M.current()
  if not bufnr or vim.api.nvim_get_current_buf() ~= bufnr then
    return nil
  end
  return rows[vim.api.nvim_win_get_cursor(0)[1]] or nil
end

--- Lists the heartbeats of session (all when nil) again into the open list.
function M.refresh(cb)
  local P = require('arbor.protocol')
  local client = require('arbor.client')
  client.request(P.MethodHeartbeatList, { session = shown_session }, function(err, res)
    if err then
      client.notify('heartbeats: ' .. client.error_message(err), vim.log.levels.WARN)
    elseif bufnr and vim.api.nvim_buf_is_valid(bufnr) then
      local lines
      lines, rows = M.render(type(res) == 'table' and type(res.heartbeats) == 'table' and res.heartbeats or {}, shown_session)
      require('arbor.buffers').set_lines(bufnr, lines)
    end
    if cb then
      cb(err, res)
    end
  end)
end

--- Opens the list of the heartbeats of session (all sessions' when nil).
function M.open(session, actions)
  local buffers = require('arbor.buffers')
  shown_session = session
  bufnr = buffers.scratch('arbor://heartbeats', 'arbor-heartbeats')
  buffers.keymaps(bufnr, {
    x = { function()
      local hb = M.current()
      if hb then
        actions.heartbeat_delete(hb.id)
      end
    end, 'Arbor: delete the heartbeat' },
    r = { function() M.refresh() end, 'Arbor: refresh' },
    q = { function() pcall(vim.cmd, 'close') end, 'close' },
  })
  buffers.set_lines(bufnr, { 'Arbor heartbeats: loading…' })
  M.refresh()
  local win = buffers.show(bufnr, 'botright 10split')
  vim.wo[win].wrap = false
  vim.wo[win].cursorline = true
  return bufnr
end

function M.bufnr()
  return bufnr and vim.api.nvim_buf_is_valid(bufnr) and bufnr or nil
end

return M
