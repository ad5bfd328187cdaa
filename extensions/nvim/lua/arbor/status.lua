-- Status for a statusline and the daemon's $/progress reports. Neovim 0.7.2 keeps $/progress in
-- client.messages but shows nothing; this module keeps the reports of arbor's client, echoes
-- each begin and end (setup{progress = false} turns that off) and counts sessions for
-- require('arbor').status(). No requests: a statusline calls it on every redraw.
local store = require('arbor.store')

local M = {}

local active = {} -- token -> { title, message, percentage }
local order = {} -- tokens in the order they began
M.last = nil -- the last report as text (what was echoed)

--- "arbor: 2 running, 1 waiting"; "" when none is running or waiting.
function M.line()
  local running, waiting = store.counts()
  local parts = {}
  if running > 0 then
    table.insert(parts, running .. ' running')
  end
  if waiting > 0 then
    table.insert(parts, waiting .. ' waiting')
  end
  if #parts == 0 then
    return ''
  end
  return 'arbor: ' .. table.concat(parts, ', ')
end

--- The progress reports that began and have not ended, oldest first: { token, title, message, percentage }.
function M.active()
  local out = {}
  for _, token in ipairs(order) do
    local p = active[token]
    if p then
      table.insert(out, vim.tbl_extend('force', { token = token }, p))
    end
  end
  return out
end

local function str(v)
  return type(v) == 'string' and v or nil
end

--- The text shown for a $/progress value, or nil for a value that says nothing new.
function M.text(p, value)
  local title = (p and p.title) or 'Arbor'
  local msg = str(value.message) or (p and p.message)
  local pct = type(value.percentage) == 'number' and string.format(' (%d%%)', value.percentage) or ''
  if value.kind == 'end' then
    return title .. ': ' .. (str(value.message) or 'done')
  end
  return title .. (msg and (' — ' .. msg) or '') .. pct
end

--- Takes a $/progress params object ({token, value = {kind, title, message, percentage}}) and
--- returns the text it shows (nil when it is not a work-done progress report).
function M.on_progress(params, echo)
  if type(params) ~= 'table' or type(params.value) ~= 'table' then
    return nil
  end
  local token, v = tostring(params.token), params.value
  local p = active[token]
  if v.kind == 'begin' then
    -- The daemon's titles are "Arbor: <task>"; shown after "arbor: ", the task is enough.
    local title = (str(v.title) or 'Arbor'):gsub('^Arbor: ', '')
    p = { title = title, message = str(v.message), percentage = v.percentage }
    active[token] = p
    table.insert(order, token)
  elseif v.kind == 'report' then
    if not p then
      return nil
    end
    p.message = str(v.message) or p.message
    p.percentage = v.percentage or p.percentage
  elseif v.kind == 'end' then
    active[token] = nil
    for i, t in ipairs(order) do
      if t == token then
        table.remove(order, i)
        break
      end
    end
  else
    return nil
  end
  local text = M.text(p, v)
  M.last = text
  if echo ~= false then
    vim.api.nvim_echo({ { 'arbor: ' .. text } }, false, {})
  end
  pcall(vim.cmd, 'redrawstatus')
  return text
end

--- Forgets every report (the client exited: its progress ends with it).
function M.reset()
  active, order = {}, {}
end

store.on_change(function()
  -- A statusline showing status() follows the tree.
  vim.schedule(function()
    pcall(vim.cmd, 'redrawstatus')
  end)
end)

return M
