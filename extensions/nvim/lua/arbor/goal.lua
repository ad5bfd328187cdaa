-- Goals as the plugin shows them: the --budget grammar of `arbor goal` (checked before the request
-- goes out), a goal's status for the tree, its account and the cost–progress series as lines, and
-- the scratch buffers :ArborGoalShow and :ArborProgress draw them into. The pure parts take no
-- editor state: test/unit.lua checks them headless.
local M = {}

local function s(v)
  if v == nil or v == vim.NIL then
    return nil
  end
  if type(v) ~= 'string' then
    return tostring(v)
  end
  return v ~= '' and v or nil
end

local function num(v)
  return type(v) == 'number' and v or 0
end

local unit_ms = { ns = 1e-6, us = 1e-3, ['µs'] = 1e-3, ms = 1, s = 1000, m = 60000, h = 3600000 }

--- The milliseconds of a Go duration ("2h", "1h30m", "90s"); nil when it is none.
function M.parse_duration(v)
  if v == '' then
    return nil
  end
  local ms, rest = 0, v
  while rest ~= '' do
    local n, u, tail = rest:match('^(%d+%.?%d*)(µs)(.*)$')
    if not n then
      n, u, tail = rest:match('^(%d+%.?%d*)([numh]?s)(.*)$')
    end
    if not n then
      n, u, tail = rest:match('^(%d+%.?%d*)([mh])(.*)$')
    end
    if not n or not unit_ms[u] or not tonumber(n) then
      return nil
    end
    ms = ms + tonumber(n) * unit_ms[u]
    rest = tail
  end
  return ms
end

--- Reads "tokens=N,turns=N,wall=2h,cost=5" (the CLI's --budget) into goal.set's fields; '' is
--- no budget. Returns the fields, or nil and a message naming the bad item.
function M.parse_budget(text)
  local out = {}
  if (text or ''):match('^%s*$') then
    return out
  end
  local i = 0
  for item in (text .. ','):gmatch('([^,]*),') do
    i = i + 1
    local shown = vim.trim(item)
    local function bad(want)
      return nil, string.format('budget item %d "%s": %s', i, shown, want)
    end
    local k, v = shown:match('^([^=]*)=(.*)$')
    if not k then
      return bad('want KEY=VALUE with KEY tokens, turns, wall or cost')
    end
    k, v = vim.trim(k), vim.trim(v)
    if k == 'tokens' or k == 'turns' then
      if not v:match('^%d+$') or tonumber(v) <= 0 then
        return bad('want a whole number of ' .. k .. ' above zero')
      end
      out[k == 'tokens' and 'tokenBudget' or 'turnBudget'] = tonumber(v)
    elseif k == 'wall' then
      local ms = M.parse_duration(v)
      if not ms or ms <= 0 then
        return bad('want a duration above zero such as 2h or 90m')
      end
      out.wallBudget = v
    elseif k == 'cost' then
      local c = v:gsub('^%$', '')
      if not (c:match('^%d+%.?%d*$') or c:match('^%.%d+$')) or tonumber(c) <= 0 then
        return bad('want an amount of USD above zero such as 5 or 0.50')
      end
      out.costBudget = tonumber(c)
    else
      return bad('unknown budget; want tokens, turns, wall or cost')
    end
  end
  return out
end

--- Whether a goal still holds the session (a new one must replace it).
function M.holds(g)
  return type(g) == 'table' and (g.status == 'active' or g.status == 'paused')
end

--- The tree's word for a session's goal (a GoalBrief): "goal active", "goal parked on children"…
function M.label(g)
  if type(g) ~= 'table' or not s(g.status) then
    return nil
  end
  if g.status == 'active' and g.waiting == 'children' then
    return 'goal parked on children'
  elseif g.status == 'active' and g.waiting == 'backoff' then
    return 'goal backing off'
  elseif g.status == 'active' and s(g.waiting) then
    return 'goal waiting on ' .. (g.waiting == 'message' and 'a reply' or g.waiting)
  end
  return 'goal ' .. g.status:gsub('_', ' ')
end

local function duration(ms)
  local h, m, sec = math.floor(ms / 3600000), math.floor(ms / 60000) % 60, math.floor(ms / 1000 + 0.5) % 60
  local out = (h > 0 and (h .. 'h') or '') .. (m > 0 and (m .. 'm') or '')
  if sec > 0 or out == '' then
    out = out .. sec .. 's'
  end
  return out
end

--- A goal's budgets, "50000 tokens, 20 turns, 2h, $5.00"; '' when it has none.
function M.budget_text(g)
  local parts = {}
  if num(g.tokenBudget) > 0 then
    table.insert(parts, num(g.tokenBudget) .. ' tokens')
  end
  if num(g.turnBudget) > 0 then
    table.insert(parts, num(g.turnBudget) .. ' turns')
  end
  if num(g.wallBudgetMs) > 0 then
    table.insert(parts, duration(num(g.wallBudgetMs)))
  end
  if num(g.costBudget) > 0 then
    table.insert(parts, string.format('$%.2f', num(g.costBudget)))
  end
  return table.concat(parts, ', ')
end

function M.spend_text(sp)
  sp = type(sp) == 'table' and sp or {}
  return string.format('%d tokens, $%.4f, %d model calls', num(sp.tokens), num(sp.costUSD), num(sp.modelCalls))
end

--- One line for an end-condition check (a Verified record).
function M.check_text(v)
  local cmd = '`' .. (s(v.command) or '?') .. '`'
  if v.skipped == true then
    return cmd .. ' not run again: the worktree is unchanged since it failed'
  elseif v.passed == true then
    return string.format('%s passed (%d ms)%s', cmd, num(v.durationMs), s(v.commit) and (' on ' .. v.commit:sub(1, 10)) or '')
  elseif s(v.error) then
    return cmd .. ': ' .. s(v.error)
  end
  return string.format('%s failed (exit %d%s, %d ms)', cmd, num(v.exitCode), v.timedOut == true and ', timed out' or '', num(v.durationMs))
end

local function yes(b)
  return b == true and 'yes' or 'no'
end

--- The lines of a goal's account: status and why, budgets, spending, claimed vs verified, checks.
function M.render(title, g)
  local lines = { '# Goal of ' .. title, '' }
  if type(g) ~= 'table' then
    table.insert(lines, 'No goal. Set one with :ArborGoal.')
    return lines
  end
  local status = (s(g.status) or '?'):gsub('_', ' ') .. (s(g.waiting) and (' (waiting on ' .. g.waiting .. ')') or '')
  table.insert(lines, 'objective: ' .. (s(g.objective) or ''):gsub('\n', ' '))
  table.insert(lines, 'status:    ' .. status .. (s(g.limit) and (' — the ' .. g.limit .. ' budget') or ''))
  if s(g.reason) then
    table.insert(lines, 'why:       ' .. s(g.reason):gsub('\n', ' '))
  end
  local b = M.budget_text(g)
  table.insert(lines, 'budget:    ' .. (b ~= '' and b or 'none (no limit)'))
  table.insert(lines, string.format('spent:     %d turns, %s (the whole subtree since %s)', num(g.turns), M.spend_text(g.spent), s(g.set) or '?'))
  if s(g['until']) then
    table.insert(lines, string.format('until:     `%s` (%d checks)', g['until'], num(g.checks)))
  end
  table.insert(lines, string.format('success:   claimed by the model: %s; verified: %s', yes(g.claimed),
    s(g['until']) and yes(g.verified) or 'no end condition'))
  if s(g.evidence) then
    table.insert(lines, 'evidence:  ' .. s(g.evidence):gsub('\n', ' '))
  end
  if type(g.lastCheck) == 'table' then
    table.insert(lines, 'last check: ' .. M.check_text(g.lastCheck))
    if s(g.lastCheck.output) then
      table.insert(lines, '```')
      vim.list_extend(lines, vim.split(g.lastCheck.output:gsub('\n$', ''), '\n', { plain = true }))
      table.insert(lines, '```')
    end
  end
  table.insert(lines, 'set by:    ' .. (s(g.by) or '?'))
  return lines
end

--- The cost–progress series (a ProgressResult) as table lines.
function M.render_progress(title, res)
  local lines = { '# Progress of ' .. title, '' }
  local points = type(res) == 'table' and type(res.points) == 'table' and res.points or {}
  if #points == 0 then
    table.insert(lines, 'No progress points yet (checkpoints, goals, end-condition and gate results).')
    return lines
  end
  local fmt = '%6s  %-8s  %-12s  %-14s  %9s  %9s  %5s  %s'
  table.insert(lines, string.format(fmt, 'SEQ', 'TIME', 'KIND', 'STATUS', 'TOKENS', 'COST', 'CALLS', 'DETAIL'))
  for _, p in ipairs(points) do
    local sp = type(p.spend) == 'table' and p.spend or {}
    local detail = (s(p.detail) or ''):match('^[^\n]*')
    table.insert(lines, string.format(fmt, tostring(num(p.seq)), (s(p.time) or ''):match('T(%d+:%d+:%d+)') or '', s(p.kind) or '',
      s(p.status) or '', tostring(num(sp.tokens)), string.format('$%.4f', num(sp.costUSD)), tostring(num(sp.modelCalls)), detail))
  end
  return lines
end

-- The views: arbor://goal/<id> and arbor://progress/<id>, fetched on open, on `r` and when their
-- session's tree record changes (a goal event moves its lastSeq on).
local views = {} -- bufnr -> { id, kind, seq }

local function fill(bufnr)
  local v = views[bufnr]
  if not v or not vim.api.nvim_buf_is_valid(bufnr) then
    views[bufnr] = nil
    return
  end
  local P = require('arbor.protocol')
  local client = require('arbor.client')
  local store = require('arbor.store')
  local sess = store.get(v.id)
  local title = sess and store.title(sess, 200) or v.id
  if v.kind == 'progress' then
    -- One read of the tree at a time: changes meanwhile ask for one more after it.
    if v.loading then
      v.again = true
      return
    end
    v.loading = true
    require('arbor.progress').load(v.id, title, function(lines)
      require('arbor.buffers').set_lines(bufnr, lines)
      v.loading = false
      if v.again then
        v.again = false
        fill(bufnr)
      end
    end)
    return
  end
  client.request(P.MethodGoalGet, { session = v.id }, function(err, res)
    local lines
    if err then
      lines = { '# ' .. title, '', 'error: ' .. client.error_message(err) }
    elseif v.kind == 'progress' then
      lines = M.render_progress(title, res)
    else
      lines = M.render(title, type(res) == 'table' and res.goal or nil)
    end
    require('arbor.buffers').set_lines(bufnr, lines)
  end)
end

--- Reads the open goal and progress views of session id again.
function M.refresh(id)
  for bufnr, v in pairs(views) do
    if v.id == id then
      fill(bufnr)
    end
  end
end

--- Opens the goal (kind 'goal') or the progress table (kind 'progress') of session id.
function M.open(id, kind, actions)
  local buffers = require('arbor.buffers')
  local bufnr = buffers.scratch('arbor://' .. kind .. '/' .. id, 'markdown')
  views[bufnr] = { id = id, kind = kind, seq = -1 }
  local maps = {
    r = { function() fill(bufnr) end, 'Arbor: refresh' },
    q = { function() pcall(vim.cmd, 'close') end, 'close' },
  }
  if kind == 'goal' and actions then
    maps.p = { function() actions.goal_control('pause', id) end, 'Arbor: pause the goal' }
    maps.u = { function() actions.goal_control('resume', id) end, 'Arbor: resume the goal' }
    maps.x = { function() actions.goal_control('clear', id) end, 'Arbor: clear the goal' }
    maps.g = { function() actions.goal(id) end, 'Arbor: set a new goal' }
  end
  buffers.keymaps(bufnr, maps)
  vim.api.nvim_create_autocmd('BufWipeout', { buffer = bufnr, once = true, callback = function() views[bufnr] = nil end })
  buffers.set_lines(bufnr, { '# ' .. kind .. ' of ' .. id, '', 'loading…' })
  fill(bufnr)
  local win = buffers.show(bufnr, 'botright 14split')
  vim.wo[win].wrap = false
  return bufnr
end

-- A view follows its session: a goal event moves the session's lastSeq on.
local followed = false
function M.follow()
  if followed then
    return
  end
  followed = true
  local store = require('arbor.store')
  store.on_change(function()
    for bufnr, v in pairs(views) do
      local sess = store.get(v.id)
      local seq = sess and sess.lastSeq or -1
      if seq ~= v.seq then
        v.seq = seq
        fill(bufnr)
      end
    end
  end)
end

return M
