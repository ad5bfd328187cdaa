-- :ArborProposals — review the harness proposals of the repository (agents writing a shared scope,
-- /refine, any scope under a "review" policy): a list (pending ones, or every status), each
-- proposal as a `git diff` of the harness in a diff buffer, accept (the scope's gate still
-- judges it) or reject with an optional reason. The daemon decides; this shows what it said.
local P = require('arbor.protocol')
local buffers = require('arbor.buffers')
local client = require('arbor.client')

local M = {}

M.name = 'arbor://proposals'
M.statuses = { 'pending', 'applied', 'rejected', 'all' }

local view = {
  bufnr = nil,
  status = 'pending',
  dir = nil,
  owners = {}, -- line -> proposal
  ids = {}, -- ids of the last listing, for completion
}
local diffs = {} -- proposal id -> { bufnr, diff } of an open diff buffer

local function s(v)
  if v == nil or v == vim.NIL or type(v) ~= 'string' or v == '' then
    return nil
  end
  return v
end

local function list(v)
  return type(v) == 'table' and v or {}
end

local function short(v, n)
  return (s(v) or ''):sub(1, n or 10)
end

local function one_line(v)
  local out = (s(v) or ''):gsub('%s*\n%s*', ' ')
  return out
end

--- "create note team-rule (Team rule), delete skill x": what a proposal changes.
function M.edits(p)
  local parts = {}
  for _, e in ipairs(list(p.edits)) do
    local t = s(e.title) and (' (' .. one_line(e.title) .. ')') or ''
    table.insert(parts, string.format('%s %s %s%s', s(e.op) or '?', s(e.kind) or '?', s(e.id) or '?', t))
  end
  return #parts > 0 and table.concat(parts, ', ') or 'no edits'
end

--- "agent, session d27561aa turn 1": who proposed it.
function M.origin(p)
  local who = s(p.author) or '?'
  if s(p.session) then
    who = who .. ', session ' .. short(p.session, 8)
    if type(p.turn) == 'number' and p.turn > 0 then
      who = who .. ' turn ' .. p.turn
    end
  end
  return who
end

--- Who decided, in words: the branch check, the eval gate, user, policy, validation. "gate" is
--- what proposals decided before the branch check had its name.
function M.decider(by)
  by = s(by)
  if by == 'branch-check' or by == 'gate' then
    return 'the branch check'
  elseif by == 'eval-gate' then
    return 'the eval gate'
  end
  return by or '?'
end

--- The branch check's verdict in a line: "branch check `make test` passed (exit 0, 812 ms)".
function M.gate(v)
  if type(v) ~= 'table' then
    return nil
  end
  local how
  if s(v.error) then
    how = 'could not run: ' .. one_line(v.error)
  elseif v.timedOut == true then
    how = 'timed out'
  else
    how = string.format('%s (exit %d)', v.passed == true and 'passed' or 'failed', type(v.exitCode) == 'number' and v.exitCode or -1)
  end
  local ms = type(v.durationMs) == 'number' and string.format(', %d ms', v.durationMs) or ''
  return string.format('branch check `%s` %s%s', one_line(v.command), how, ms)
end

--- What became of a decided proposal, in a line ("applied as 1a2b3c4d5e by user", "rejected by
--- gate: …"), or nil while it is pending.
function M.decision(p)
  if p.status == 'applied' then
    return string.format('applied as %s by %s', short(p.applied), M.decider(p.decidedBy))
  elseif p.status == 'rejected' then
    local line = string.format('rejected by %s: %s', M.decider(p.decidedBy), one_line(p.reason))
    if s(p.observed) and s(p.observed) ~= s(p.reason) then
      line = line .. ' (observed: ' .. one_line(p.observed) .. ')'
    end
    return line
  end
  return nil
end

--- The message for the answer to an accept or reject (action 'accept' or 'reject') and its level:
--- an accept the gate turned into a rejection is a warning, with the gate's reason.
function M.outcome(p, action)
  local id = s(p.id) or '?'
  if p.status == 'applied' then
    local msg = string.format('%s applied to the %s harness as %s: %s', id, s(p.scope) or '?', short(p.applied), M.edits(p))
    if s(p.observed) then
      msg = msg .. '; observed: ' .. one_line(p.observed)
    end
    return msg, vim.log.levels.INFO
  end
  if p.status == 'rejected' then
    if action == 'accept' then
      local msg = string.format('%s was not applied: rejected by %s: %s', id, M.decider(p.decidedBy), one_line(p.reason))
      if s(p.observed) and s(p.observed) ~= s(p.reason) then
        msg = msg .. ' (observed: ' .. one_line(p.observed) .. ')'
      end
      return msg, vim.log.levels.WARN
    end
    return string.format('rejected %s (%s): %s', id, M.edits(p), one_line(p.reason)), vim.log.levels.INFO
  end
  return string.format('%s is %s', id, s(p.status) or '?'), vim.log.levels.INFO
end

--- The message for what a /refine of session id made (an arbor/refine.run result).
function M.refined(id, res)
  res = type(res) == 'table' and res or {}
  local n = function(v) return type(v) == 'number' and v or 0 end
  local head = string.format('refine of %s (%s scope, events %d-%d, %d model calls, %d+%d tokens)', short(id, 8),
    s(res.scope) or '?', n(res.fromSeq), n(res.toSeq), n(res.calls), n(res.inputTokens), n(res.outputTokens))
  if s(res.error) then
    return head .. ': no proposal: ' .. one_line(res.error)
  end
  local ps = list(res.proposals)
  local parts, waiting = {}, false
  for _, p in ipairs(ps) do
    table.insert(parts, string.format('%s %s (%s)', s(p.id) or '?', M.decision(p) or s(p.status) or '?', M.edits(p)))
    waiting = waiting or p.status == 'pending'
  end
  local msg = head .. ': ' .. (#ps == 0 and 'no edits proposed' or (#ps .. ' proposed: ' .. table.concat(parts, '; ')))
  if s(res.summary) then
    msg = msg .. '. ' .. one_line(res.summary)
  end
  if waiting then
    msg = msg .. ' — :ArborProposals to review'
  end
  return msg
end

--- The lines of the list buffer for proposals (as arbor/refine.proposals returns them) and the
--- proposal each line belongs to.
function M.render(proposals, status)
  local lines = {
    string.format('Arbor proposals: %d %s   <CR>/d diff  a accept  x reject  s pending/all  R refresh  q close',
      #proposals, status == 'all' and 'in all' or status),
    '',
  }
  local owners = {}
  if #proposals == 0 then
    table.insert(lines, status == 'pending' and '  nothing waiting for review (s shows decided ones too)'
      or ('  no ' .. status .. ' proposals'))
  end
  for _, p in ipairs(proposals) do
    local function add(l)
      table.insert(lines, l)
      owners[#lines] = p
    end
    add(string.format('%s  %-8s %-9s %s  (%s)', s(p.id) or '?', s(p.status) or '?', s(p.scope) or '?', M.edits(p), M.origin(p)))
    if s(p.rationale) then
      add('    > ' .. one_line(p.rationale))
    end
    if s(p.intended) then
      add('    intended: ' .. one_line(p.intended))
    end
    local d = M.decision(p)
    if d then
      add('    ' .. d)
    end
    local g = M.gate(p.gate)
    if g then
      add('    ' .. g)
    end
    for _, a in ipairs(type(p.advice) == 'table' and p.advice or {}) do
      add('    advice: ' .. one_line(a))
    end
  end
  return lines, owners
end

--- The lines of a proposal's diff buffer: a header of `#` lines, then the unified diff.
function M.render_diff(p, diff)
  local lines = {
    string.format('# harness proposal %s: %s, %s scope, by %s', s(p.id) or '?', s(p.status) or '?', s(p.scope) or '?', M.origin(p)),
    '# ' .. M.edits(p),
  }
  if s(p.rationale) then
    table.insert(lines, '# rationale: ' .. one_line(p.rationale))
  end
  if s(p.intended) then
    table.insert(lines, '# intended: ' .. one_line(p.intended))
  end
  local d = M.decision(p)
  if d then
    table.insert(lines, '# ' .. d)
  end
  for _, a in ipairs(type(p.advice) == 'table' and p.advice or {}) do
    table.insert(lines, '# advice: ' .. one_line(a))
  end
  local g = M.gate(p.gate)
  if g then
    table.insert(lines, '# ' .. g)
    -- The end of what the gate printed: why it failed, usually.
    local out = vim.split((s(p.gate.output) or ''):gsub('\n+$', ''), '\n', { plain = true })
    for i = math.max(1, #out - 9), #out do
      if out[i] ~= '' or #out > 1 then
        table.insert(lines, '#   ' .. out[i])
      end
    end
  end
  table.insert(lines, p.status == 'pending' and '# a accept  x reject  q close' or '# q close')
  table.insert(lines, '')
  local body = (s(diff) or ''):gsub('\n$', '')
  if body == '' then
    table.insert(lines, '(no change against the scope as it was proposed on)')
  else
    vim.list_extend(lines, vim.split(body, '\n', { plain = true }))
  end
  return lines
end

local function valid(bufnr)
  return bufnr and vim.api.nvim_buf_is_valid(bufnr)
end

--- The ids of the last listing (for completion).
function M.ids()
  return view.ids
end

--- The proposal on the cursor line of the list buffer, or ({id=…}) of the diff buffer, when that
--- is the current buffer.
function M.current()
  local shown = vim.api.nvim_buf_get_name(0):match('^arbor://proposal/(p%x+)$')
  if shown then
    return { id = shown }
  end
  if not valid(view.bufnr) or vim.api.nvim_get_current_buf() ~= view.bufnr then
    return nil
  end
  return view.owners[vim.api.nvim_win_get_cursor(0)[1]]
end

--- Lists the proposals again into the list buffer (when it is open); cb(err) after.
function M.refresh(cb)
  local dir = view.dir or client.root_dir()
  client.request(P.MethodRefineProposals, { dir = dir, status = view.status }, function(err, res)
    if err then
      client.notify('proposals: ' .. client.error_message(err), vim.log.levels.WARN)
    else
      local ps = list((res or {}).proposals)
      view.ids = {}
      for _, p in ipairs(ps) do
        table.insert(view.ids, p.id)
      end
      if valid(view.bufnr) then
        local lines, owners = M.render(ps, view.status)
        view.owners = owners
        buffers.set_lines(view.bufnr, lines)
      end
    end
    if cb then
      cb(err)
    end
  end)
end

local function after_decision(p)
  if valid(view.bufnr) then
    M.refresh()
  end
  local d = diffs[p.id]
  if d and valid(d.bufnr) then
    buffers.set_lines(d.bufnr, M.render_diff(p, d.diff))
  end
end

--- Sends a decision (verb 'accept' or 'reject') on proposal params.id; cb(err, proposal) after
--- the message.
local function decide(method, verb, params, cb)
  client.request(method, params, function(err, p)
    if err then
      client.notify(verb .. ' ' .. params.id .. ': ' .. client.error_message(err), vim.log.levels.WARN)
    else
      client.notify(M.outcome(p, verb))
      after_decision(p)
    end
    if cb then
      cb(err, p)
    end
  end)
end

--- Accepts proposal id; cb(err, proposal) after the message.
function M.accept(id, cb)
  decide(P.MethodRefineAccept, 'accept', { dir = view.dir or client.root_dir(), id = id }, cb)
end

--- Rejects proposal id with reason (optional); cb(err, proposal) after the message.
function M.reject(id, reason, cb)
  decide(P.MethodRefineReject, 'reject', { dir = view.dir or client.root_dir(), id = id, reason = s(reason) }, cb)
end

-- Esc at the reason prompt: no reject at all (an empty answer rejects without a reason).
local cancelled = '\27arbor-cancelled'

--- Asks for an optional reason (vim.fn.input), then rejects id; cb(err, proposal) after.
function M.ask_reject(id, cb)
  local reason = vim.fn.input({ prompt = 'Reject ' .. id .. ', reason (optional): ', cancelreturn = cancelled })
  if reason == cancelled then
    return
  end
  M.reject(id, reason, cb)
end

--- Asks whether to accept proposal id (what: its edits).
function M.confirm_accept(id, what)
  return vim.fn.confirm('Accept ' .. id .. ' (' .. what .. ')? The scope\'s gate still checks it.', '&Yes\n&No', 2) == 1
end
local confirm_accept = M.confirm_accept

--- Opens proposal id's diff in a filetype=diff scratch buffer (`a` accept, `x` reject there too).
function M.diff(id, cb)
  client.request(P.MethodRefineProposal, { dir = view.dir or client.root_dir(), id = id }, function(err, p)
    if err then
      client.notify('proposal ' .. id .. ': ' .. client.error_message(err), vim.log.levels.WARN)
      if cb then
        cb(err)
      end
      return
    end
    local bufnr = buffers.scratch('arbor://proposal/' .. p.id, 'diff')
    diffs[p.id] = { bufnr = bufnr, diff = p.diff }
    buffers.set_lines(bufnr, M.render_diff(p, p.diff))
    buffers.keymaps(bufnr, {
      a = { function()
        if confirm_accept(p.id, M.edits(p)) then
          M.accept(p.id)
        end
      end, 'Arbor: accept the proposal' },
      x = { function() M.ask_reject(p.id) end, 'Arbor: reject the proposal' },
      r = { function() M.ask_reject(p.id) end, 'Arbor: reject the proposal' },
      q = { function() pcall(vim.cmd, 'close') end, 'close' },
    })
    buffers.show(bufnr, 'botright vsplit')
    if cb then
      cb(nil, bufnr)
    end
  end)
end

--- Opens the list buffer: opts.status (pending by default; applied, rejected or all), opts.dir
--- (a directory of the repository; default the cwd's).
function M.open(opts)
  opts = opts or {}
  if opts.status and opts.status ~= '' then
    if not vim.tbl_contains(M.statuses, opts.status) then
      client.notify('proposals: status ' .. opts.status .. ': want ' .. table.concat(M.statuses, ', '), vim.log.levels.WARN)
      return nil
    end
    view.status = opts.status
  end
  view.dir = opts.dir or client.root_dir()
  local bufnr = buffers.scratch(M.name, 'arbor-proposals')
  view.bufnr = bufnr
  local function on(fn)
    return function()
      local p = M.current()
      if p then
        fn(p)
      else
        client.notify('no proposal on this line')
      end
    end
  end
  local function pending(fn)
    return on(function(p)
      if p.status ~= 'pending' then
        client.notify(p.id .. ' is already ' .. p.status .. ': ' .. (M.decision(p) or ''))
        return
      end
      fn(p)
    end)
  end
  local show_diff = on(function(p) M.diff(p.id) end)
  local reject = pending(function(p) M.ask_reject(p.id) end)
  buffers.keymaps(bufnr, {
    ['<CR>'] = { show_diff, 'Arbor: the proposal as a diff' },
    d = { show_diff, 'Arbor: the proposal as a diff' },
    a = { pending(function(p)
      if confirm_accept(p.id, M.edits(p)) then
        M.accept(p.id)
      end
    end), 'Arbor: accept the proposal' },
    x = { reject, 'Arbor: reject the proposal' },
    r = { reject, 'Arbor: reject the proposal' },
    s = { function()
      view.status = view.status == 'pending' and 'all' or 'pending'
      M.refresh()
    end, 'Arbor: pending or all proposals' },
    R = { function() M.refresh() end, 'Arbor: refresh' },
    q = { function() pcall(vim.cmd, 'close') end, 'close' },
  })
  if vim.api.nvim_buf_line_count(bufnr) <= 1 then
    buffers.set_lines(bufnr, { 'Arbor proposals: loading…' })
  end
  local win = buffers.show(bufnr, 'botright 12split')
  vim.wo[win].wrap = false
  vim.wo[win].cursorline = true
  M.refresh()
  return bufnr
end

function M.bufnr()
  return valid(view.bufnr) and view.bufnr or nil
end

return M
