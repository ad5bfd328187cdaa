-- :ArborHarness — the harness panel: the entries of each scope (the session's, the workspace's,
-- the user's global one) by kind, each entry's versions with the trailers of who changed it and
-- why, each version's diff and a rollback to it; the /refine proposals (pending, or all) with
-- their evidence (the events that triggered them) and the gate's verdict, accept and reject; and
-- "Refine now" on the panel's session. The daemon decides; this shows what it said. The pure
-- render functions take no editor state: test/unit.lua checks them headless.
local P = require('arbor.protocol')
local buffers = require('arbor.buffers')
local client = require('arbor.client')
local proposals = require('arbor.proposals')

local M = {}

M.name = 'arbor://harness'
M.scopes = { 'session', 'workspace', 'global' }

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
  return ((s(v) or ''):gsub('%s*\n%s*', ' '))
end

--- "refine, session 1a2b3c4d turn 2 · trigger #8 #9 · intended: … · observed: …": a change's trailers.
function M.trailers(ch)
  ch = type(ch) == 'table' and ch or {}
  local who = s(ch.author) or '?'
  if s(ch.session) then
    who = who .. ', session ' .. short(ch.session, 8)
    if type(ch.turn) == 'number' and ch.turn > 0 then
      who = who .. ' turn ' .. ch.turn
    end
  end
  local parts = { who }
  if #list(ch.trigger) > 0 then
    local t = {}
    for _, q in ipairs(list(ch.trigger)) do
      table.insert(t, '#' .. tostring(q))
    end
    table.insert(parts, 'trigger ' .. table.concat(t, ' '))
  end
  if s(ch.intended) then
    table.insert(parts, 'intended: ' .. one_line(ch.intended))
  end
  if s(ch.observed) then
    table.insert(parts, 'observed: ' .. one_line(ch.observed))
  end
  return table.concat(parts, ' · ')
end

--- The panel's lines and, per line, what it is ({proposal=p} | {scope=sc, entry=e} | {scope=sc}).
--- st: { repo, session = {id, title} | nil, status, proposals, evidence = {pid -> lines}, lists =
--- { {scope, result = HarnessListResult | nil, error} } }.
function M.render(st)
  local lines = {
    'Arbor harness of ' .. (st.repo or '?') .. (st.session and (' · session ' .. short(st.session.id, 8) .. ' ' .. (st.session.title or '')) or ''),
    '<CR> open · a accept · x reject · n refine now · s pending/all proposals · R refresh · q close',
    '',
  }
  local owners = {}
  local function add(l, o)
    table.insert(lines, l)
    owners[#lines] = o
  end
  local ps = list(st.proposals)
  add(string.format('Proposals: %d %s', #ps, st.status == 'all' and 'in all' or (st.status or 'pending')), nil)
  if #ps == 0 then
    add(st.status == 'pending' and '  nothing waiting for review' or '  none', nil)
  end
  for _, p in ipairs(ps) do
    local o = { proposal = p }
    add(string.format('  %s  %-8s %-9s %s  (%s)', s(p.id) or '?', s(p.status) or '?', s(p.scope) or '?', proposals.edits(p), proposals.origin(p)), o)
    if s(p.rationale) then
      add('      > ' .. one_line(p.rationale), o)
    end
    if s(p.intended) then
      add('      intended: ' .. one_line(p.intended), o)
    end
    local ev = (st.evidence or {})[p.id]
    if ev then
      for i, l in ipairs(ev) do
        add((i == 1 and '      evidence: ' or '                ') .. l, o)
      end
    elseif #list(p.trigger) > 0 then
      local t = {}
      for _, q in ipairs(list(p.trigger)) do
        table.insert(t, '#' .. tostring(q))
      end
      add('      evidence: events ' .. table.concat(t, ' '), o)
    end
    local g = proposals.gate(p.gate)
    if g or p.status == 'pending' then
      add('      ' .. (g or 'gate: not run yet (it judges an accept)'), o)
    end
    local d = proposals.decision(p)
    if d then
      add('      ' .. d, o)
    end
  end
  for _, l in ipairs(list(st.lists)) do
    add('', nil)
    local res = l.result
    local head = l.scope .. ' scope' .. (l.scope == 'session' and st.session and (' (' .. short(st.session.id, 8) .. ')') or '')
    if l.error then
      add(head .. ': ' .. l.error, { scope = l.scope })
    elseif res then
      add(string.format('%s  %s @ %s', head, s(res.ref) or '?', s(res.head) and short(res.head) or '(no change yet)'), { scope = l.scope })
      local entries = list(res.entries)
      if #entries == 0 then
        add('  (no entries)', { scope = l.scope })
      end
      for _, e in ipairs(entries) do
        add(string.format('  %-9s %-24s %-36s %s', s(e.kind) or '?', s(e.id) or '?', one_line(e.title), short(e.version)), { scope = l.scope, entry = e })
      end
    end
  end
  return lines, owners
end

--- The lines of an entry's view: what it is now, then its versions (newest first) with their
--- trailers; owners maps a version's lines to it.
function M.render_entry(scope, e, versions)
  local lines = {
    string.format('# %s %s (%s scope): %s — version %s', s(e.kind) or '?', s(e.id) or '?', scope, one_line(e.title), short(e.version)),
    '# <CR> the diff of the version · R roll back to the version · r refresh · q close',
    '',
    'Versions, newest first:',
  }
  local owners = {}
  for i, v in ipairs(versions) do
    local o = { version = v, index = i }
    table.insert(lines, string.format('  %s  %s  %s', short(v.commit), ((s(v.time) or ''):gsub('T', ' '):match('^(%S+ %d+:%d+:%d+)') or ''), one_line(v.subject)))
    owners[#lines] = o
    table.insert(lines, '      ' .. M.trailers(v.change))
    owners[#lines] = o
  end
  if #versions == 0 then
    table.insert(lines, '  (none: the entry was never changed in this scope)')
  end
  table.insert(lines, '')
  table.insert(lines, 'Now:')
  local body = {}
  if s(e.body) then
    vim.list_extend(body, vim.split(e.body:gsub('\n$', ''), '\n', { plain = true }))
  end
  if s(e.module) then
    table.insert(body, '```python')
    vim.list_extend(body, vim.split(e.module:gsub('\n$', ''), '\n', { plain = true }))
    table.insert(body, '```')
  end
  if type(e.spec) == 'table' then
    table.insert(body, 'instructions: ' .. one_line(e.spec.instructions))
    if s(e.spec.model) then
      table.insert(body, 'model: ' .. e.spec.model)
    end
  end
  if #body == 0 then
    table.insert(body, '(absent: deleted in this scope)')
  end
  for _, l in ipairs(body) do
    table.insert(lines, '  ' .. l)
  end
  return lines, owners
end

local view = { bufnr = nil, status = 'pending', session = nil, dir = nil, owners = {}, evidence = {} }
local entry_views = {} -- bufnr -> { scope, kind, id, owners, versions }

local function valid(b)
  return b and vim.api.nvim_buf_is_valid(b)
end

-- Shows bufnr in the window of this tab that shows another buffer named prefix…, else as cmd:
-- one window for entries and one for version diffs, however many are opened.
local function show_reusing(bufnr, prefix, cmd)
  for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    local b = vim.api.nvim_win_get_buf(w)
    if b ~= bufnr and vim.api.nvim_buf_get_name(b):sub(1, #prefix) == prefix then
      buffers.next_window(w)
      break
    end
  end
  return buffers.show(bufnr, cmd)
end

local function scope_params(scope)
  local p = { dir = view.dir, scope = scope }
  if scope == 'session' then
    p.session = view.session
  end
  return p
end

-- Reads the evidence of a proposal: the events its trigger names, from its session's log.
local function fetch_evidence(p, done)
  local trig = list(p.trigger)
  if not s(p.session) or #trig == 0 or view.evidence[p.id] then
    done()
    return
  end
  local lo, hi = math.huge, 0
  local want = {}
  for _, q in ipairs(trig) do
    lo, hi = math.min(lo, q), math.max(hi, q)
    want[q] = true
  end
  client.request(P.MethodSessionLog, { id = p.session, sinceSeq = lo, limit = math.min(hi - lo + 1, 500) }, function(err, res)
    if not err then
      local out = {}
      for _, ev in ipairs(list((res or {}).events)) do
        if want[ev.seq] then
          table.insert(out, require('arbor.log').summary(ev))
        end
      end
      view.evidence[p.id] = out
    end
    done()
  end)
end

--- Reads everything again and redraws the panel (when it is open); cb(err) after.
function M.refresh(cb)
  if not valid(view.bufnr) then
    if cb then
      cb()
    end
    return
  end
  local st = { repo = view.dir, status = view.status, lists = {}, evidence = view.evidence }
  local sess = view.session and require('arbor.store').get(view.session)
  if view.session then
    st.session = { id = view.session, title = sess and require('arbor.store').title(sess) or '' }
  end
  local pending = 1
  local function done()
    pending = pending - 1
    if pending > 0 then
      return
    end
    if valid(view.bufnr) then
      local lines, owners = M.render(st)
      view.owners = owners
      buffers.set_lines(view.bufnr, lines)
    end
    if cb then
      cb()
    end
  end
  for _, sc in ipairs(M.scopes) do
    if sc ~= 'session' or view.session then
      local l = { scope = sc }
      table.insert(st.lists, l)
      pending = pending + 1
      client.request(P.MethodHarnessList, scope_params(sc), function(err, res)
        if err then
          l.error = client.error_message(err)
        else
          l.result = res
        end
        done()
      end)
    end
  end
  pending = pending + 1
  client.request(P.MethodRefineProposals, { dir = view.dir, status = view.status }, function(err, res)
    if err then
      st.proposals = {}
      client.notify('proposals: ' .. client.error_message(err), vim.log.levels.WARN)
      done()
      return
    end
    st.proposals = list((res or {}).proposals)
    for _, p in ipairs(st.proposals) do
      pending = pending + 1
      fetch_evidence(p, done)
    end
    done()
  end)
  done()
end

--- Opens the diff of version index i of an entry view (against the entry's version before it).
local function version_diff(ev, i, cb)
  local v = ev.versions[i]
  local older = ev.versions[i + 1]
  local params = scope_params(ev.scope)
  params.kind, params.id, params.from, params.to = ev.kind, ev.id, older and older.commit or nil, v.commit
  client.request(P.MethodHarnessDiff, params, function(err, res)
    if err then
      client.notify('harness diff: ' .. client.error_message(err), vim.log.levels.WARN)
      if cb then
        cb(err)
      end
      return
    end
    local name = string.format('arbor://harness-diff/%s/%s/%s@%s', ev.scope, ev.kind, ev.id, short(v.commit))
    local bufnr = buffers.scratch(name, 'diff')
    local lines = {
      string.format('# %s %s (%s scope): %s..%s', ev.kind, ev.id, ev.scope, older and short(older.commit) or 'nothing', short(v.commit)),
      '# ' .. one_line(v.subject),
      '# ' .. M.trailers(v.change),
      '',
    }
    local patch = (s((res or {}).patch) or ''):gsub('\n$', '')
    vim.list_extend(lines, patch ~= '' and vim.split(patch, '\n', { plain = true }) or { '(no change to this entry)' })
    buffers.set_lines(bufnr, lines)
    buffers.keymaps(bufnr, { q = { function() pcall(vim.cmd, 'close') end, 'close' } })
    show_reusing(bufnr, 'arbor://harness-diff/', 'belowright split')
    if cb then
      cb(nil, bufnr)
    end
  end)
end

local function fill_entry(bufnr, cb)
  local ev = entry_views[bufnr]
  if not ev then
    return
  end
  local params = scope_params(ev.scope)
  params.kind, params.id = ev.kind, ev.id
  client.request(P.MethodHarnessGet, params, function(gerr, e)
    client.request(P.MethodHarnessHistory, params, function(herr, h)
      if herr then
        client.notify('harness history: ' .. client.error_message(herr), vim.log.levels.WARN)
      end
      ev.versions = list((h or {}).versions)
      local entry = (not gerr and type(e) == 'table') and e or { kind = ev.kind, id = ev.id, title = ev.title }
      local lines, owners = M.render_entry(ev.scope, entry, ev.versions)
      ev.owners = owners
      buffers.set_lines(bufnr, lines)
      if cb then
        cb()
      end
    end)
  end)
end

--- Rolls entry view ev back to version index i (asks first).
local function rollback(bufnr, i, cb)
  local ev = entry_views[bufnr]
  local v = ev and ev.versions[i]
  if not v then
    return
  end
  if vim.fn.confirm(string.format('Roll %s %s (%s scope) back to %s (%s)? A new version is made; history stays.', ev.kind, ev.id,
    ev.scope, short(v.commit), one_line(v.subject)), '&Yes\n&No', 2) ~= 1 then
    return
  end
  local params = scope_params(ev.scope)
  params.kind, params.id, params.version = ev.kind, ev.id, v.commit
  client.request(P.MethodHarnessRollback, params, function(err, res)
    if err then
      client.notify('rollback: ' .. client.error_message(err), vim.log.levels.WARN)
    elseif res and res.unchanged then
      client.notify(string.format('%s %s is already as it was at %s', ev.kind, ev.id, short(v.commit)))
    else
      client.notify(string.format('rolled %s %s back to %s as %s', ev.kind, ev.id, short(v.commit), short((res or {}).version)))
    end
    fill_entry(bufnr, function()
      M.refresh(function()
        if cb then
          cb(err, res)
        end
      end)
    end)
  end)
end

--- Opens the view of entry e of scope (its versions and trailers, diffs, rollback); cb(bufnr) once drawn.
function M.open_entry(scope, e, cb)
  local name = string.format('arbor://harness/%s/%s/%s', scope, e.kind, e.id)
  local bufnr = buffers.scratch(name, 'markdown')
  entry_views[bufnr] = { scope = scope, kind = e.kind, id = e.id, title = e.title, versions = {}, owners = {} }
  vim.api.nvim_create_autocmd('BufWipeout', { buffer = bufnr, once = true, callback = function() entry_views[bufnr] = nil end })
  local function cur()
    local ev = entry_views[bufnr]
    return ev and ev.owners[vim.api.nvim_win_get_cursor(0)[1]]
  end
  buffers.keymaps(bufnr, {
    ['<CR>'] = { function()
      local o = cur()
      if o then
        version_diff(entry_views[bufnr], o.index)
      end
    end, 'Arbor: the diff of this version' },
    R = { function()
      local o = cur()
      if o then
        rollback(bufnr, o.index)
      else
        client.notify('move to a version to roll back to')
      end
    end, 'Arbor: roll back to this version' },
    r = { function() fill_entry(bufnr) end, 'Arbor: refresh' },
    q = { function() pcall(vim.cmd, 'close') end, 'close' },
  })
  buffers.set_lines(bufnr, { '# ' .. e.kind .. ' ' .. e.id .. ': loading…' })
  local win = show_reusing(bufnr, 'arbor://harness/', 'belowright split')
  vim.wo[win].wrap = false
  fill_entry(bufnr, function()
    if cb then
      cb(bufnr)
    end
  end)
  return bufnr
end

--- The thing on the cursor line of the panel, when it is the current buffer.
function M.current()
  if not valid(view.bufnr) or vim.api.nvim_get_current_buf() ~= view.bufnr then
    return nil
  end
  return view.owners[vim.api.nvim_win_get_cursor(0)[1]]
end

--- Refine now: asks for the scope and a focus, then runs /refine on the panel's session.
function M.refine_now(cb)
  if not view.session then
    client.notify('the panel has no session: open it as :ArborHarness {id} to refine one', vim.log.levels.WARN)
    return
  end
  vim.ui.select(M.scopes, { prompt = 'Refine ' .. view.session:sub(1, 8) .. ' into the scope:' }, function(scope)
    if not scope then
      return
    end
    vim.ui.input({ prompt = 'Focus (optional): ' }, function(focus)
      if focus == nil then
        return
      end
      require('arbor').refine(focus, view.session, {
        scope = scope,
        on_done = function(err, res)
          M.refresh(function()
            if cb then
              cb(err, res)
            end
          end)
        end,
      })
    end)
  end)
end

--- Opens the panel: opts.session (an id: its session scope and "Refine now"), opts.dir (a
--- directory of the repository; default the cwd's), opts.status (of the proposals listed).
function M.open(opts)
  opts = opts or {}
  view.dir = opts.dir or client.root_dir()
  if opts.session then
    local sess = require('arbor.store').find(opts.session)
    view.session = sess and sess.id or opts.session
  end
  if opts.status then
    view.status = opts.status
  end
  local bufnr = buffers.scratch(M.name, 'arbor-harness')
  view.bufnr = bufnr
  local function on(pred, fn, none)
    return function()
      local o = M.current()
      if o and pred(o) then
        fn(o)
      else
        client.notify(none)
      end
    end
  end
  local function pending(o)
    return o.proposal and o.proposal.status == 'pending'
  end
  buffers.keymaps(bufnr, {
    ['<CR>'] = { function()
      local o = M.current()
      if o and o.proposal then
        proposals.diff(o.proposal.id)
      elseif o and o.entry then
        M.open_entry(o.scope, o.entry)
      end
    end, 'Arbor: open the proposal or the entry' },
    a = { on(pending, function(o)
      if proposals.confirm_accept(o.proposal.id, proposals.edits(o.proposal)) then
        proposals.accept(o.proposal.id, function() M.refresh() end)
      end
    end, 'no pending proposal on this line'), 'Arbor: accept the proposal' },
    x = { on(pending, function(o)
      proposals.ask_reject(o.proposal.id, function() M.refresh() end)
    end, 'no pending proposal on this line'), 'Arbor: reject the proposal' },
    n = { function() M.refine_now() end, 'Arbor: refine now' },
    s = { function()
      view.status = view.status == 'pending' and 'all' or 'pending'
      M.refresh()
    end, 'Arbor: pending or all proposals' },
    R = { function() M.refresh() end, 'Arbor: refresh' },
    q = { function() pcall(vim.cmd, 'close') end, 'close' },
  })
  if vim.api.nvim_buf_line_count(bufnr) <= 1 then
    buffers.set_lines(bufnr, { 'Arbor harness: loading…' })
  end
  local win = buffers.show(bufnr, 'botright 16split')
  vim.wo[win].wrap = false
  vim.wo[win].cursorline = true
  M.refresh(opts.on_ready)
  return bufnr
end

function M.bufnr()
  return valid(view.bufnr) and view.bufnr or nil
end

return M
