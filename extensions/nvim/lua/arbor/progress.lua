-- The cost–progress summary of a session tree (:ArborProgress): sparklines of verified progress
-- (checkpoints and passed checks) against the tokens and cost the tree spent, over time, from
-- arbor/progress of each session of the tree. The pure parts take no editor state:
-- test/unit.lua checks them headless.
local M = {}

M.blocks = { '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█' }

local function num(v)
  return type(v) == 'number' and v or 0
end

local function str(v)
  return type(v) == 'string' and v ~= '' and v or nil
end

--- Seconds since the epoch of an RFC 3339 time ("2026-01-01T10:11:12.5Z"), or nil. Only
--- differences are used, so the local-time reading of os.time does not matter.
function M.seconds(ts)
  local y, mo, d, h, mi, sec = (str(ts) or ''):match('^(%d+)-(%d+)-(%d+)T(%d+):(%d+):(%d+%.?%d*)')
  if not y then
    return nil
  end
  local whole = math.floor(tonumber(sec))
  return os.time({ year = tonumber(y), month = tonumber(mo), day = tonumber(d), hour = tonumber(h), min = tonumber(mi), sec = whole })
    + (tonumber(sec) - whole)
end

--- A sparkline of series (a list of {t, v}, t ascending, v cumulative) over [t0, t1] in width
--- cells: each cell shows the last value at or before its end, scaled from 0 (or the least
--- value, when below 0) to the greatest; before the first point a cell is blank.
function M.sparkline(series, t0, t1, width)
  if #series == 0 then
    return string.rep(' ', width)
  end
  local lo, hi = 0, -math.huge
  for _, p in ipairs(series) do
    lo, hi = math.min(lo, p[2]), math.max(hi, p[2])
  end
  local out, j, cur = {}, 0, nil
  local span = t1 - t0
  for i = 1, width do
    local edge = span > 0 and (t0 + span * i / width) or t1
    while j < #series and series[j + 1][1] <= edge + 1e-9 do
      j = j + 1
      cur = series[j][2]
    end
    if cur == nil then
      out[i] = ' '
    elseif hi <= lo then
      out[i] = hi > 0 and M.blocks[8] or M.blocks[1]
    else
      out[i] = M.blocks[math.floor((cur - lo) / (hi - lo) * 7 + 0.5) + 1]
    end
  end
  return table.concat(out)
end

--- Whether a progress point is verified progress: a checkpoint, or a check (end condition or
--- gate) that passed.
function M.verified(p)
  if p.kind == 'checkpoint' then
    return true
  end
  return (p.kind == 'verified' or p.kind == 'gate') and p.status == 'passed'
end

local function tokens_text(n)
  if n < 1000 then
    return tostring(n)
  elseif n < 1000000 then
    return string.format('%.1fk', n / 1000)
  end
  return string.format('%.1fM', n / 1000000)
end

local function span_text(sec)
  sec = math.floor(sec + 0.5)
  local h, m, s = math.floor(sec / 3600), math.floor(sec / 60) % 60, sec % 60
  return (h > 0 and (h .. 'h') or '') .. ((h > 0 or m > 0) and (m .. 'm') or '') .. s .. 's'
end

--- The counts of a session's points: checkpoints, checks passed and failed.
function M.counts(points)
  local c = { checkpoints = 0, passed = 0, failed = 0 }
  for _, p in ipairs(points) do
    if p.kind == 'checkpoint' then
      c.checkpoints = c.checkpoints + 1
    elseif (p.kind == 'verified' or p.kind == 'gate') and p.status == 'passed' then
      c.passed = c.passed + 1
    elseif (p.kind == 'verified' or p.kind == 'gate') and p.status == 'failed' then
      c.failed = c.failed + 1
    end
  end
  return c
end

local function counts_text(c)
  local parts = { string.format('%d checkpoint%s', c.checkpoints, c.checkpoints == 1 and '' or 's'),
    string.format('%d check%s passed', c.passed, c.passed == 1 and '' or 's') }
  if c.failed > 0 then
    table.insert(parts, c.failed .. ' failed')
  end
  return table.concat(parts, ', ')
end

--- The summary lines of a tree: root is the root's ProgressResult (its points carry the whole
--- subtree's spending), others the results of the sessions below it ({ {session=, label=,
--- points=}, … }, in tree order). width: the sparklines' cells.
function M.summary(title, root, others, width)
  width = width or 40
  local all = { { label = nil, points = type(root) == 'table' and type(root.points) == 'table' and root.points or {} } }
  vim.list_extend(all, others or {})
  local t0, t1 = math.huge, -math.huge
  local marks = {}
  for _, sess in ipairs(all) do
    for _, p in ipairs(sess.points) do
      local t = M.seconds(p.time)
      if t then
        t0, t1 = math.min(t0, t), math.max(t1, t)
        if M.verified(p) then
          table.insert(marks, t)
        end
      end
    end
  end
  local lines = { '# Progress of ' .. title .. (#all > 1 and string.format(' (the session tree: %d sessions)', #all) or ''), '' }
  if t0 == math.huge then
    table.insert(lines, 'No progress points yet (checkpoints, goals, end-condition and gate results).')
    return lines
  end
  if t1 <= t0 then
    width = 1 -- one moment: one cell, not a bar that suggests a course over time
  end
  table.sort(marks)
  local verified = {}
  for i, t in ipairs(marks) do
    verified[i] = { t, i }
  end
  local tok, cost = {}, {}
  local last = {}
  for _, p in ipairs(all[1].points) do
    local t = M.seconds(p.time)
    local sp = type(p.spend) == 'table' and p.spend or {}
    if t then
      table.insert(tok, { t, num(sp.tokens) })
      table.insert(cost, { t, num(sp.costUSD) })
      last = sp
    end
  end
  local c = { checkpoints = 0, passed = 0, failed = 0 }
  for _, sess in ipairs(all) do
    local k = M.counts(sess.points)
    c.checkpoints, c.passed, c.failed = c.checkpoints + k.checkpoints, c.passed + k.passed, c.failed + k.failed
  end
  table.insert(lines, string.format('verified  %s  %d (%s)', M.sparkline(verified, t0, t1, width), #verified, counts_text(c)))
  table.insert(lines, string.format('tokens    %s  %s', M.sparkline(tok, t0, t1, width), tokens_text(num(last.tokens))))
  table.insert(lines, string.format('cost      %s  $%.4f', M.sparkline(cost, t0, t1, width), num(last.costUSD)))
  local from, to = os.date('%H:%M:%S', math.floor(t0)), os.date('%H:%M:%S', math.floor(t1))
  local npts = 0
  for _, sess in ipairs(all) do
    npts = npts + #sess.points
  end
  table.insert(lines, string.format('          %s → %s (%s), %d point%s; %d model calls', from, to, span_text(t1 - t0), npts,
    npts == 1 and '' or 's', num(last.modelCalls)))
  if #all > 1 then
    table.insert(lines, '')
    for _, sess in ipairs(others) do
      local k = M.counts(sess.points)
      local sp = {}
      for _, p in ipairs(sess.points) do
        if type(p.spend) == 'table' then
          sp = p.spend
        end
      end
      table.insert(lines, string.format('%s  %s · %s tok · $%.4f', sess.label or '?', counts_text(k), tokens_text(num(sp.tokens)), num(sp.costUSD)))
    end
  end
  return lines
end

--- The sessions of the tree under id (id first, then depth first) with their tree labels.
function M.subtree(id)
  local store = require('arbor.store')
  local kids = {}
  for _, x in ipairs(store.all()) do
    if type(x.parent) == 'string' and x.parent ~= '' then
      kids[x.parent] = kids[x.parent] or {}
      table.insert(kids[x.parent], x)
    end
  end
  local out = {}
  local function walk(x, prefix, depth)
    if #out >= M.max_sessions then
      return
    end
    table.insert(out, { session = x.id, label = prefix .. store.title(x, 40) .. '  ' .. x.id:sub(1, 8) })
    for i, k in ipairs(kids[x.id] or {}) do
      walk(k, string.rep('   ', depth) .. (i == #(kids[x.id]) and '└─ ' or '├─ '), depth + 1)
    end
  end
  walk(store.get(id) or { id = id, task = id }, '', 0)
  return out
end

M.max_sessions = 30 -- of a tree, read for the summary
M.width = 40

--- Reads arbor/progress of every session of the tree under id and calls cb(lines): the summary
--- with its sparklines, then the root's series as a table (goal.render_progress).
function M.load(id, title, cb)
  local P = require('arbor.protocol')
  local client = require('arbor.client')
  local tree = M.subtree(id)
  local results, pending, failed = {}, #tree, nil
  for i, t in ipairs(tree) do
    client.request(P.MethodProgress, { session = t.session }, function(err, res)
      if err and i == 1 then
        failed = client.error_message(err)
      end
      results[i] = (not err and type(res) == 'table') and res or { points = {} }
      pending = pending - 1
      if pending > 0 then
        return
      end
      if failed then
        cb({ '# Progress of ' .. title, '', 'error: ' .. failed })
        return
      end
      local others = {}
      for j = 2, #tree do
        table.insert(others, { session = tree[j].session, label = tree[j].label,
          points = type(results[j].points) == 'table' and results[j].points or {} })
      end
      local lines = M.summary(title, results[1], others, M.width)
      if type(results[1].points) == 'table' and #results[1].points > 0 then
        table.insert(lines, '')
        table.insert(lines, 'The series of ' .. title .. ':')
        local tbl = require('arbor.goal').render_progress(title, results[1])
        vim.list_extend(lines, vim.list_slice(tbl, 3))
      end
      cb(lines)
    end)
  end
end

return M
