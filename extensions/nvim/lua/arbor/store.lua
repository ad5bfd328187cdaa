-- The plugin's picture of the daemon's session tree, fed by arbor/sessionTree and arbor/sessions,
-- and its rendering as tree lines. No editor state here: test/unit.lua checks it headless.
local P = require('arbor.protocol')

local M = {}

local sessions = {} -- id -> Session
local listeners = {}

local function fire()
  for _, fn in ipairs(listeners) do
    pcall(fn)
  end
end

--- Calls fn after every change.
function M.on_change(fn)
  table.insert(listeners, fn)
end

local function seq(s)
  return type(s.lastSeq) == 'number' and s.lastSeq or 0
end

--- Applies an arbor/sessionTree notification: full replaces the list, otherwise upsert. A record
--- older than the one held (a lower lastSeq: a reply overtaken by a notification) never replaces
--- it, so a late answer cannot turn a stopped session back to idle.
function M.apply(params)
  local old = sessions
  if params.full then
    sessions = {}
  end
  for _, s in ipairs(params.sessions or {}) do
    local held = old[s.id]
    sessions[s.id] = (held and seq(held) > seq(s)) and held or s
  end
  fire()
end

function M.upsert(s)
  M.apply({ full = false, sessions = { s } })
end

function M.replace(list)
  M.apply({ full = true, sessions = list })
end

function M.get(id)
  return sessions[id]
end

--- Finds a session by id or unique id prefix.
function M.find(prefix)
  if sessions[prefix] then
    return sessions[prefix]
  end
  local found
  for id, s in pairs(sessions) do
    if id:sub(1, #prefix) == prefix then
      if found then
        return nil
      end
      found = s
    end
  end
  return found
end

function M.all()
  local list = {}
  for _, s in pairs(sessions) do
    table.insert(list, s)
  end
  table.sort(list, function(a, b)
    if (a.created or '') ~= (b.created or '') then
      return (a.created or '') < (b.created or '')
    end
    return a.id < b.id
  end)
  return list
end

function M.ids()
  local ids = {}
  for _, s in ipairs(M.all()) do
    table.insert(ids, s.id)
  end
  return ids
end

--- "12.3k" style count of a usage record's input + output tokens.
function M.format_tokens(u)
  local n = ((u or {}).inputTokens or 0) + ((u or {}).outputTokens or 0)
  if n < 1000 then
    return tostring(n)
  elseif n < 10000 then
    return string.format('%.1fk', n / 1000)
  elseif n < 1000000 then
    return string.format('%dk', math.floor(n / 1000 + 0.5))
  end
  return string.format('%.1fM', n / 1000000)
end

--- The short title of a session: its name, else the first line of its task.
function M.title(s, max)
  max = max or 48
  local t = s.name
  if t == nil or t == '' or t == vim.NIL then
    t = s.task or s.id
  end
  t = (t:match('^[^\n]*') or t):gsub('^%s+', ''):gsub('%s+$', '')
  if vim.fn.strchars(t) > max then
    t = vim.fn.strcharpart(t, 0, max - 1) .. '…'
  end
  return t
end

--- Where a session came from when it is a fork ("fork of 8e6a9ede @20": forked at event 20), else nil.
function M.origin(s)
  if type(s.forkOf) ~= 'string' or s.forkOf == '' then
    return nil
  end
  return string.format('fork of %s @%d', s.forkOf:sub(1, 8), type(s.forkSeq) == 'number' and s.forkSeq or 0)
end

--- What a row says of session s's worktree when its files are not simply on disk (as `arbor ls`), else nil.
function M.worktree_note(s)
  if M.discarded(s) then
    return nil
  elseif s.worktreeReleased == true then
    return 'worktree released'
  elseif s.worktreeQueued == true then
    return 'files queued'
  elseif s.worktreeWriting == true then
    return 'writing files'
  end
  return nil
end

--- Whether session s was discarded (its worktree removed; its work, if any, archived).
function M.discarded(s)
  return type(s) == 'table' and s.discarded == true
end

--- Whether session s can take a subagent: live (not stopped or failed) and not discarded.
function M.can_parent(s)
  return type(s) == 'table' and P.live_states[s.state] == true and not M.discarded(s)
end

--- Counts for a statusline: running (a turn under way or admitted to one) and waiting (idle or
--- inactive: alive, waiting for a message). Stopped, failed and discarded sessions count in neither.
function M.counts()
  local running, waiting = 0, 0
  for _, s in pairs(sessions) do
    if not M.discarded(s) then
      -- As VS Code's status bar counts them: a turn under way, or admitted and waiting for a
      -- slot to run one. Idle sessions are done until told more.
      if s.state == P.StateRunning then
        running = running + 1
      elseif s.state == P.StateAdmitted then
        waiting = waiting + 1
      end
    end
  end
  return running, waiting
end

local icons = {
  [P.StateAdmitted] = '◌',
  [P.StateRunning] = '▶',
  [P.StateIdle] = '●',
  [P.StateInactive] = '○',
  [P.StateStopped] = '■',
  [P.StateFailed] = '✗',
}

local function str(v)
  if v == nil or v == vim.NIL then
    return ''
  end
  return tostring(v)
end

--- Renders the sessions as a tree by parent. Returns lines and, per line, the session id (or nil).
function M.render()
  local all = M.all()
  local children, roots = {}, {}
  for _, s in ipairs(all) do
    local p = str(s.parent)
    if p ~= '' and sessions[p] then
      children[p] = children[p] or {}
      table.insert(children[p], s)
    else
      table.insert(roots, s)
    end
  end
  local lines, ids = {}, {}
  local function row(s, prefix, branch_prefix)
    local state = str(s.state)
    local icon = icons[state] or '?'
    if M.discarded(s) then
      -- A discarded session is stopped too; what matters is that its worktree is gone.
      state, icon = 'discarded', '⊘'
    end
    local line = string.format(
      '%s%s %-8s %s  [%s · %s tok · %s] %s',
      prefix,
      icon,
      state,
      M.title(s),
      str(s.model) ~= '' and str(s.model) or '-',
      M.format_tokens(s.total or s.usage),
      str(s.branch) ~= '' and str(s.branch) or '-',
      s.id:sub(1, 8)
    )
    local origin = M.origin(s)
    if origin then
      line = line .. '  (' .. origin .. ')'
    end
    local wt = M.worktree_note(s)
    if wt then
      line = line .. '  (' .. wt .. ')'
    end
    if M.discarded(s) and str(s.archived) ~= '' then
      line = line .. '  (work kept at ' .. str(s.archived) .. ')'
    end
    local goal = require('arbor.goal').label(s.goal)
    if goal then
      line = line .. '  ◎ ' .. goal
    end
    if str(s.error) ~= '' then
      line = line .. '  ! ' .. str(s.error):gsub('\n', ' ')
    end
    table.insert(lines, line)
    table.insert(ids, s.id)
    local kids = children[s.id] or {}
    for i, c in ipairs(kids) do
      local last = i == #kids
      row(c, branch_prefix .. (last and '└─ ' or '├─ '), branch_prefix .. (last and '   ' or '│  '))
    end
  end
  for _, s in ipairs(roots) do
    row(s, '', '')
  end
  return lines, ids
end

return M
