-- The transcript of one session as lines: a pure model fed events in seq order, which the view
-- (log.lua) writes into a buffer as they come. Lines are only ever appended, except three kinds
-- of in-place rewrites that never shift a line: the header's state line, a cell's title line
-- when the cell ends, and the last line while streamed output continues it (a print without a
-- newline yet). Each line has a fold level (turns are level 1, cells level 2) and the entry
-- (event) it belongs to, for the keys on the line under the cursor. No editor state here:
-- test/unit.lua checks it headless.
local P = require('arbor.protocol')

local M = {}

local function s(v)
  if v == nil or v == vim.NIL or type(v) ~= 'string' or v == '' then
    return nil
  end
  return v
end

local function num(v)
  return type(v) == 'number' and v or 0
end

local function short(v, n)
  return (s(v) or ''):sub(1, n or 8)
end

-- The lines of text (a plain split on newlines; vim.split is several times slower, and a long
-- transcript splits every message, code and output).
local function lines_of(text)
  local out, i = {}, 1
  while true do
    local j = text:find('\n', i, true)
    if not j then
      out[#out + 1] = text:sub(i)
      return out
    end
    out[#out + 1] = text:sub(i, j - 1)
    i = j + 1
  end
end

local function split(text)
  return lines_of((text:gsub('\n$', '')))
end

local T = {}
T.__index = T

--- A new transcript. opts.render: type -> fn(data, lines) for the generic events (log.lua's
--- renderers); opts.header: the first lines (the view's title); opts.state_line: which of them
--- shows the session's state (rewritten on state changes by opts.state_text(state, reason)).
function M.new(opts)
  local t = setmetatable({
    render = opts.render or {},
    lines = {},
    levels = {},
    entries = {},
    hls = {}, -- { line, group } not yet taken
    marks = {}, -- { line, text } not yet taken: the quiet seq · time · tokens at an entry's end
    patches = {}, -- line -> true: rewritten in place below the flushed end
    flushed = 0, -- lines the view has written
    dirty = nil, -- first line changed at or after the flushed end
    turn = nil, -- the open turn's number
    cells = {}, -- callId -> { title (line), code, streamed, level }
    open_cell = nil, -- the callId whose cell is open (between tool_started and tool_finished)
    fence = nil, -- { call, stream } while an output fence is open at the end
    partial = false, -- the last line is output still waiting for its newline
    last_seq = -1,
    state_line = opts.state_line,
    state_text = opts.state_text,
  }, T)
  local header = { level = '0' }
  for _, l in ipairs(opts.header or {}) do
    t:push(l, header, '0')
  end
  return t
end

-- Appends one line of entry e at fold level lvl ('0', '1', '>1', …), highlighted with group.
function T:push(text, e, lvl, group)
  table.insert(self.lines, text)
  local n = #self.lines
  self.levels[n] = lvl
  self.entries[n] = e
  if group then
    table.insert(self.hls, { n, group })
  end
  if not self.dirty or n < self.dirty then
    self.dirty = n
  end
  e.first = e.first or n
  e.last = n
  return n
end

-- Rewrites line n in place (its level and entry stay).
function T:set(n, text)
  if self.lines[n] == text then
    return
  end
  self.lines[n] = text
  if n <= self.flushed then
    if not (self.dirty and n >= self.dirty) then
      self.patches[n] = true
    end
  elseif not self.dirty or n < self.dirty then
    self.dirty = n
  end
end

-- The level of a line inside the current structure: 2 in an open cell, 1 in a turn, else 0.
function T:depth()
  if self.open_cell then
    return 2
  end
  return self.turn and 1 or 0
end

function T:close_fence()
  if self.fence then
    local e = { seq = self.fence.seq, type = 'fence', turn = self.turn, call = self.fence.call }
    self:push('```', e, '2')
    self.fence, self.partial = nil, false
  end
end

function T:close_turn()
  self.turn = nil
end

local function cell_title(status)
  return '▸ cell · ' .. (status or 'running…')
end

--- The status a finished cell's title shows: "ok [1] · 12 ms".
function M.cell_status(d)
  local parts = { s(d.status) or '?' }
  if num(d.executionCount) > 0 then
    parts[1] = parts[1] .. ' [' .. d.executionCount .. ']'
  end
  if type(d.durationMs) == 'number' then
    table.insert(parts, d.durationMs .. ' ms')
  end
  return table.concat(parts, ' · ')
end

-- Streamed output of a running cell: appended to its output fence, continuing the last line
-- while it had no newline yet.
function T:output(ev, d, e)
  local call = s(d.callId) or '?'
  local cell = self.cells[call]
  local stream = s(d.stream) or 'stdout'
  local lvl = cell and '2' or tostring(self:depth())
  if cell then
    cell.streamed = cell.streamed .. (s(d.text) or '')
  end
  if not self.fence or self.fence.call ~= call then
    self:close_fence()
    self:push('```', e, lvl)
    self.fence = { call = call, seq = ev.seq }
  end
  local group = stream == 'stderr' and 'WarningMsg' or nil
  local text = s(d.text) or ''
  if text ~= '' then
    local pieces = lines_of(text)
    local ends = pieces[#pieces] == ''
    if ends then
      table.remove(pieces)
    end
    for i, piece in ipairs(pieces) do
      if i == 1 and self.partial and self.fence.stream == stream then
        local n = #self.lines
        self:set(n, self.lines[n] .. piece)
      else
        self:push(piece, e, lvl, group)
      end
    end
    self.partial = not ends
    self.fence.stream = stream
  end
  if d.truncated == true then
    self:close_fence()
    self:push('… the rest of this output is not kept in the log (its end, as the model saw it, follows the cell)', e, lvl, 'Comment')
  end
end

-- A cell's end: its title says how it went; output not streamed (or not all of it) is shown.
function T:finished(d, e)
  local call = s(d.callId) or '?'
  local cell = self.cells[call] or { streamed = '', level = tostring(self:depth()) }
  if cell.title then
    self:set(cell.title, cell_title(M.cell_status(d)))
  else
    self:push('result (' .. M.cell_status(d) .. ')', e, '2')
  end
  local out = s(d.output) or ''
  local streamed = cell.streamed or ''
  local rest = out
  local head = nil
  if streamed ~= '' then
    if out:sub(1, #streamed) == streamed then
      rest = out:sub(#streamed + 1)
    elseif vim.trim(out) == vim.trim(streamed) then
      rest = ''
    else
      head = 'what the model saw (bounded):'
    end
  end
  if rest:match('%S') then
    if head then
      self:push(head, e, '2', 'Comment')
    end
    self:push('```', e, '2')
    for _, l in ipairs(split(rest)) do
      self:push(l, e, '2')
    end
    self:push('```', e, '2')
  end
  if s(d.error) then
    self:push('error: ' .. s(d.error), e, '2', 'ErrorMsg')
  end
  if s(d.artifact) then
    self:push('full output' .. (num(d.bytes) > 0 and (' (' .. d.bytes .. ' bytes)') or '') .. ': ' .. s(d.artifact), e, '2')
  end
  for _, r in ipairs(type(d.rich) == 'table' and d.rich or {}) do
    self:push('rich output: ' .. r, e, '2')
  end
  if not cell.title then
    -- a result whose start this transcript never saw: nothing to end
    return
  end
  if self.open_cell == call then
    self.open_cell = nil
  end
end

local quiet = {
  [P.EventStateChanged] = true,
  [P.EventMessageQueued] = true,
  [P.EventKernel] = true,
  [P.EventWorktreeSetup] = true,
  [P.EventWorktree] = true,
  [P.EventModelRetry] = true,
  [P.EventModelChanged] = true,
}

--- Adds event ev (one arbor/event record); events at or before the last one added are ignored.
function T:add(ev)
  local seq = type(ev.seq) == 'number' and ev.seq or 0
  if seq <= self.last_seq then
    return false
  end
  self.last_seq = seq
  local d = type(ev.data) == 'table' and ev.data or {}
  local typ = ev.type or '?'
  local e = { seq = seq, type = typ, ts = ev.ts }
  local output = P.EventToolOutput or 'tool_output'
  if typ ~= output then
    self:close_fence()
  end
  local mark = (s(ev.ts) or ''):match('T(%d+:%d+:%d+)')
  mark = '#' .. seq .. (mark and (' ' .. mark) or '')
  if typ == P.EventTurnStarted then
    self.turn = num(d.turn)
    self.open_cell = nil
    e.turn = self.turn
    self:push(string.format('## turn %d', self.turn), e, '>1', 'Title')
  elseif typ == output then
    e.turn = self.turn
    self:output(ev, d, e)
    return true -- no mark: streamed pieces join lines of earlier ones
  elseif typ == P.EventToolStarted then
    e.turn, e.call = self.turn, s(d.callId)
    local call = s(d.callId) or '?'
    local title = self:push(cell_title(), e, '>2', 'Identifier')
    self.cells[call] = { title = title, streamed = '' }
    self.open_cell = call
    self:push('```python', e, '2')
    for _, l in ipairs(split(s(d.code) or '')) do
      self:push(l, e, '2')
    end
    self:push('```', e, '2')
  elseif typ == P.EventToolFinished then
    e.turn, e.call = self.turn, s(d.callId)
    self:finished(d, e)
  elseif typ == P.EventAssistantMessage then
    e.turn = self.turn
    local lvl = tostring(self:depth())
    local text = s(d.text)
    if text then
      local ls = split(text)
      if #ls == 1 then
        self:push('assistant: ' .. ls[1], e, lvl)
      else
        self:push('assistant:', e, lvl, 'Statement')
        for _, l in ipairs(ls) do
          self:push(l, e, lvl)
        end
      end
    elseif type(d.toolCalls) ~= 'table' or #d.toolCalls == 0 then
      self:push('assistant: (no text)', e, lvl, 'Comment')
    end
    local u = type(d.usage) == 'table' and d.usage or nil
    if u then
      mark = mark .. string.format(' · %d→%d tok', num(u.inputTokens), num(u.outputTokens))
    end
    if not e.first then
      return true -- only tool calls: the cells that follow show them
    end
  elseif typ == P.EventUserMessage then
    e.turn = self.turn
    local lvl = tostring(self:depth())
    local who = (s(d.from) or 'user') .. (s(d.via) and (' (read from the ' .. s(d.via) .. ')') or '')
    local ls = split(s(d.text) or '')
    if #ls == 1 then
      self:push(who .. ': ' .. ls[1], e, lvl, nil)
    else
      self:push(who .. ':', e, lvl, 'Statement')
      for _, l in ipairs(ls) do
        self:push(l, e, lvl)
      end
    end
  elseif typ == P.EventCheckpoint then
    e.turn = num(d.turn)
    e.checkpoint = num(d.turn)
    self:push(string.format('◆ checkpoint %s after turn %d%s — D: the diff of turn %d', short(d.commit, 12), num(d.turn),
      s(d.merged) and (', merging subagent ' .. short(d.merged)) or '', num(d.turn)), e, tostring(self:depth()), 'Special')
    if s(d.merged) then
      e.child = s(d.merged)
    end
  elseif typ == P.EventSubagentSpawned then
    e.turn, e.child = self.turn, s(d.id)
    self:push(string.format('↳ subagent %s on %s: %s — <CR> opens its transcript', s(d.name) or short(d.id), s(d.branch) or '?',
      ((s(d.task) or ''):gsub('\n', ' '))), e, tostring(self:depth()), 'Underlined')
  else
    e.turn = self.turn
    if typ == P.EventMerged then
      e.child = s(d.child)
    elseif typ == P.EventForked then
      e.child = s(d.source)
    elseif typ == P.EventSessionCreated then
      e.child = s(d.parent) or s(d.forkOf)
    elseif typ == P.EventMessageSent and type(d.receipts) == 'table' and #d.receipts == 1 then
      e.child = s(d.receipts[1].to)
    end
    local lines = {}
    local fn = self.render[typ]
    if fn then
      fn(d, lines)
    else
      M.raw(d, lines, typ)
    end
    local ends = typ == P.EventTurnFailed or typ == P.EventInterrupted
      or (typ == P.EventStateChanged and d.state ~= P.StateRunning)
    if typ == P.EventStateChanged and self.state_line and self.state_text then
      self:set(self.state_line, self.state_text(s(d.state), s(d.reason)))
    end
    local lvl = tostring(self:depth())
    if ends and typ == P.EventStateChanged then
      self:close_turn()
      self.open_cell = nil
      lvl = '0'
    end
    for _, l in ipairs(lines) do
      self:push(l, e, lvl, quiet[typ] and 'Comment' or nil)
    end
    if ends and typ ~= P.EventStateChanged then
      self.open_cell = nil
    end
  end
  if e.first then
    table.insert(self.marks, { e.first, mark })
  end
  return true
end

--- Lines for the data of an event type the plugin does not render (from a newer daemon).
function M.raw(d, lines, typ)
  local keys = vim.tbl_keys(d)
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do
    local v = d[k]
    table.insert(parts, k .. '=' .. (type(v) == 'table' and vim.fn.json_encode(v) or tostring(v)))
  end
  table.insert(lines, (typ or '?') .. (#parts > 0 and (': ' .. table.concat(parts, ' ')) or ''))
end

--- What the view must write since the last take: lines [from, #lines] replace the buffer's
--- lines from `from` to its end (the buffer had `flushed` lines), patches are single lines
--- rewritten in place above that, hls and marks are new highlights and quiet texts.
function T:take()
  local out = { flushed = self.flushed, patches = {}, hls = self.hls, marks = self.marks }
  for n in pairs(self.patches) do
    if not self.dirty or n < self.dirty then
      table.insert(out.patches, { n, self.lines[n] })
    end
  end
  if self.dirty then
    out.from = self.dirty
    out.lines = {}
    for i = self.dirty, #self.lines do
      out.lines[#out.lines + 1] = self.lines[i]
    end
  end
  self.patches, self.hls, self.marks, self.dirty = {}, {}, {}, nil
  self.flushed = #self.lines
  return out
end

--- The entry of line n (1-based), or nil for the header.
function T:entry(n)
  local e = self.entries[n]
  if e and e.seq then
    return e
  end
  return nil
end

--- The turn of line n: the turn it is in, else the last turn before it.
function T:turn_at(n)
  for i = n, 1, -1 do
    local e = self.entries[i]
    if e and e.turn then
      return e.turn
    end
  end
  return nil
end

return M
