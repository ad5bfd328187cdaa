-- :ArborDiff — the session's remaining diff (what is not on the user's branch yet) as a patch
-- buffer, a file's base and head side by side in a tab, and the review: accept (onto the user's
-- branch) or reject (reverted on the session's branch, as a checkpoint the agent is told of) a
-- hunk, a file or the whole session. After each the views are drawn again from the remaining diff.
local P = require('arbor.protocol')
local buffers = require('arbor.buffers')
local client = require('arbor.client')
local store = require('arbor.store')

local M = {}

-- Session id -> { id, title, res (the DiffResult shown), bufnr, owners, hunks, tabs = { path -> tab }, busy }
local reviews = {}
M.reviews = reviews

local function present(v)
  return v ~= nil and v ~= vim.NIL and v ~= ''
end

--- The index (0-based, into file.hunks) of the hunk that covers line lnum (1-based) of side
--- ('base' or 'head'), or nil. A hunk that removes every line on a side covers the line
--- before the removal and the one after it there.
function M.hunk_at(file, side, lnum)
  local hunks = (type(file) == 'table' and type(file.hunks) == 'table') and file.hunks or {}
  local near
  for i, h in ipairs(hunks) do
    local start = side == 'base' and h.oldStart or h.newStart
    local count = side == 'base' and h.oldLines or h.newLines
    if count > 0 and lnum >= start and lnum < start + count then
      return i - 1
    end
    if count == 0 and near == nil and (lnum == start or lnum == start + 1 or (start == 0 and lnum == 1)) then
      near = i - 1
    end
  end
  return near
end

--- The method and params of a review action: kind 'accept' or 'reject', scope 'hunk', 'file'
--- or 'session'; target = { path, index } (hunk), { path } (file). head and accepted are the
--- shown diff's (DiffResult.head and .accepted, nil for none): the daemon refuses when the
--- session's branch moved since, or part of it was accepted since (the hunk indexes would
--- point at other hunks).
function M.action(kind, scope, id, head, target, accepted)
  local method = kind == 'accept' and P.MethodSessionAccept or P.MethodSessionReject
  local params = { id = id, head = present(head) and head or nil, accepted = present(accepted) and accepted or '' }
  if scope == 'hunk' then
    params.hunks = { target.path .. '#' .. target.index }
  elseif scope == 'file' then
    params.files = { target.path }
  end
  return method, params
end

--- What an action did, for the message after it.
function M.done_message(kind, scope, target, res)
  local what = scope == 'hunk' and string.format('hunk %d of %s', target.index + 1, target.path)
    or scope == 'file' and target.path or 'the whole change'
  local commit = ((type(res) == 'table' and res.commit) or ''):sub(1, 8)
  if kind == 'accept' then
    return string.format('accepted %s onto your branch as %s', what, commit)
  end
  return string.format("rejected %s: reverted on the session's branch as %s (the agent is told at its next turn)", what, commit)
end

--- The warning for a refused review action: the files of a conflict or of dirty files
--- (ConflictData) are named when the message does not name them all.
function M.error_text(kind, err)
  local msg = kind .. ': ' .. client.error_message(err)
  local data = type(err) == 'table' and type(err.data) == 'table' and err.data or nil
  local named = true
  for _, f in ipairs(data and type(data.files) == 'table' and data.files or {}) do
    named = named and msg:find(f, 1, true) ~= nil
  end
  if data and type(data.files) == 'table' and #data.files > 0 and not named then
    local what = data.kind == 'dirty' and 'uncommitted changes' or 'conflicts'
    msg = msg .. string.format(' — %s in %s: %s', what, present(data.into) and data.into or 'the target', table.concat(data.files, ', '))
  end
  return msg
end

--- Buffer lines for a diff result; per line the file it belongs to and, on a hunk's lines,
--- { file, index } of that hunk (index counting from 0 in the file's hunks).
function M.render(sess_title, res)
  local files = res.files or {}
  local head = string.format('# %s: %d file%s, %s..%s', sess_title, #files, #files == 1 and '' or 's',
    (res.base or ''):sub(1, 8), (res.head or ''):sub(1, 8))
  if present(res.accepted) then
    head = head .. ' (what is left after the accept of ' .. res.accepted:sub(1, 8) .. ')'
  end
  local lines = {
    head,
    '# <CR> side-by-side  a/x accept/reject hunk (on a file line: the file; here: all)  A/X file  ga/gx all  R refresh  q close',
    '',
  }
  local owners, hunks = {}, {}
  if #files == 0 then
    table.insert(lines, 'nothing left to review: every change was accepted or rejected')
  end
  for _, f in ipairs(files) do
    table.insert(lines, string.format('%-9s %s  +%d -%d', f.status or '?', f.path, f.additions or 0, f.deletions or 0))
    owners[#lines] = f
  end
  table.insert(lines, '')
  local current, index
  for _, l in ipairs(vim.split(res.patch or '', '\n', { plain = true })) do
    local b = l:match('^diff %-%-git a/.- b/(.*)$')
    if b then
      current, index = nil, -1
      for _, f in ipairs(files) do
        if f.path == b then
          current = f
        end
      end
    elseif current and l:match('^@@ ') then
      index = index + 1
    end
    table.insert(lines, l)
    owners[#lines] = current
    if current and index >= 0 and not b then
      hunks[#lines] = { file = current, index = index }
    end
  end
  if lines[#lines] == '' and #lines > 4 then
    table.remove(lines)
  end
  return lines, owners, hunks
end

local function warn(msg)
  client.notify(msg, vim.log.levels.WARN)
end

local function lines_of(r)
  local lines = (r and not r.missing) and vim.split(r.content or '', '\n', { plain = true }) or {}
  if #lines > 0 and lines[#lines] == '' then
    table.remove(lines)
  end
  return lines
end

local function file_in(res, path)
  for _, f in ipairs((res or {}).files or {}) do
    if f.path == path then
      return f
    end
  end
end

-- Fetches both sides of file (as the remaining diff has them) and calls cb(base, head).
local function fetch_sides(id, file, cb)
  local results, pending = {}, 2
  for _, side in ipairs({ 'base', 'head' }) do
    local path = file.path
    if side == 'base' and present(file.oldPath) then
      path = file.oldPath
    end
    -- An added file has no base, a deleted one no head: nothing to ask for.
    if (side == 'base' and file.status == 'added') or (side == 'head' and file.status == 'deleted') then
      results[side] = { missing = true }
      pending = pending - 1
    else
      client.request(P.MethodSessionFileAt, { id = id, path = path, side = side }, function(err, res)
        if err then
          warn(side .. ' of ' .. path .. ': ' .. client.error_message(err))
        end
        results[side] = res
        pending = pending - 1
        if pending == 0 then
          cb(results.base, results.head)
        end
      end)
    end
  end
  if pending == 0 then
    cb(results.base, results.head)
  end
end

local act -- forward

-- The keymaps of the review, on a buffer whose target(scope) says what the cursor is on.
local function review_keys(bufnr, id, target, extra)
  local maps = {
    a = { function() act(id, 'accept', target('hunk')) end, 'Arbor: accept the hunk under the cursor' },
    x = { function() act(id, 'reject', target('hunk')) end, 'Arbor: reject the hunk under the cursor' },
    A = { function() act(id, 'accept', target('file')) end, 'Arbor: accept the file' },
    X = { function() act(id, 'reject', target('file')) end, 'Arbor: reject the file' },
    ga = { function() act(id, 'accept', { scope = 'session' }) end, 'Arbor: accept the whole change' },
    gx = { function() act(id, 'reject', { scope = 'session' }) end, 'Arbor: reject the whole change' },
    R = { function() M.refresh(id) end, 'Arbor: diff again' },
  }
  for k, v in pairs(extra or {}) do
    maps[k] = v
  end
  buffers.keymaps(bufnr, maps)
end

local function tab_valid(t)
  return t and vim.api.nvim_tabpage_is_valid(t.tab)
end

-- Draws a side-by-side tab's panes from base and head.
local function fill_tab(t, base, head)
  buffers.set_lines(t.base, lines_of(base))
  buffers.set_lines(t.head, lines_of(head))
  if tab_valid(t) then
    for _, win in ipairs(vim.api.nvim_tabpage_list_wins(t.tab)) do
      vim.api.nvim_win_call(win, function()
        pcall(vim.cmd, 'diffupdate')
      end)
    end
  end
end

--- Opens file (a FileDiff of the remaining diff) of session id: base and head side by side in
--- a tab, in diff mode, with the review keys. A second open of the same file goes to its tab.
function M.side_by_side(id, file)
  local r = reviews[id]
  local t = r and r.tabs[file.path]
  if tab_valid(t) then
    vim.api.nvim_set_current_tabpage(t.tab)
    return
  end
  fetch_sides(id, file, function(base, head)
    vim.cmd('tabnew')
    local short = id:sub(1, 8)
    t = { path = file.path, tab = vim.api.nvim_get_current_tabpage() }
    local function pane(side, name)
      local b = buffers.scratch(string.format('arbor://%s/%s/%s', side, short, name))
      vim.api.nvim_win_set_buf(0, b)
      -- Detect the filetype from the buffer name, which ends with the file's path.
      pcall(vim.cmd, 'filetype detect')
      vim.cmd('diffthis')
      local function target(scope)
        local rv = reviews[id]
        local f = rv and file_in(rv.res, file.path)
        if not f then
          return { scope = scope, none = file.path .. ' has nothing left to review' }
        end
        if scope == 'file' then
          return { scope = 'file', path = f.path }
        end
        local index = M.hunk_at(f, side, vim.api.nvim_win_get_cursor(0)[1])
        if not index then
          return { scope = 'hunk', none = 'no hunk under the cursor (]c and [c move between them)' }
        end
        return { scope = 'hunk', path = f.path, index = index }
      end
      review_keys(b, id, target, { q = { function() pcall(vim.cmd, 'tabclose') end, 'close the tab' } })
      return b
    end
    t.base = pane('base', present(file.oldPath) and file.oldPath or file.path)
    vim.cmd('rightbelow vsplit')
    t.head = pane('head', file.path)
    if reviews[id] then
      reviews[id].tabs[file.path] = t
    end
    fill_tab(t, base, head)
  end)
end

-- Redraws the patch buffer of review r from r.res, keeping the cursor's line.
local function draw(r)
  if not r.bufnr or not vim.api.nvim_buf_is_valid(r.bufnr) then
    return
  end
  local lines
  lines, r.owners, r.hunks = M.render(r.title, r.res)
  buffers.set_lines(r.bufnr, lines)
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_buf(win) == r.bufnr then
      local row = math.min(vim.api.nvim_win_get_cursor(win)[1], #lines)
      vim.api.nvim_win_set_cursor(win, { row, 0 })
    end
  end
end

--- Diffs session id again (the remaining diff) and redraws its patch buffer and open tabs: a
--- tab whose file has nothing left to review is closed. cb(err) after.
function M.refresh(id, cb)
  local r = reviews[id]
  if not r then
    return
  end
  client.request(P.MethodSessionDiff, { id = id }, function(err, res)
    if err then
      warn('diff ' .. id:sub(1, 8) .. ': ' .. client.error_message(err))
      if cb then
        cb(err)
      end
      return
    end
    r.res = res
    draw(r)
    local pending = 1
    local function one_done()
      pending = pending - 1
      if pending == 0 and cb then
        cb(nil)
      end
    end
    for path, t in pairs(r.tabs) do
      local f = file_in(res, path)
      if not tab_valid(t) then
        r.tabs[path] = nil
      elseif not f then
        r.tabs[path] = nil
        if #vim.api.nvim_list_tabpages() > 1 then
          vim.cmd('tabclose ' .. vim.api.nvim_tabpage_get_number(t.tab))
        end
        client.notify(path .. ': nothing left to review')
      else
        pending = pending + 1
        fetch_sides(id, f, function(base, head)
          fill_tab(t, base, head)
          one_done()
        end)
      end
    end
    one_done()
  end)
end

--- Runs a review action: kind 'accept' or 'reject' on target ({ scope = 'hunk', path, index },
--- { scope = 'file', path } or { scope = 'session' }), then refreshes. The whole change is
--- accepted or rejected only once the user confirms. opts.on_done(err, res) after the refresh.
act = function(id, kind, target, opts)
  opts = opts or {}
  local r = reviews[id]
  if not r then
    return
  end
  if target.none then
    warn(target.none)
    return
  end
  if r.busy then
    warn('the previous review action has not finished')
    return
  end
  if target.scope == 'session' then
    local q = kind == 'accept' and ('Accept the whole remaining change of ' .. r.title .. ' onto your branch?')
      or ('Reject the whole remaining change of ' .. r.title .. " (revert it on the session's branch)?")
    if vim.fn.confirm(q, '&Yes\n&No', 2) ~= 1 then
      return
    end
  end
  local method, params = M.action(kind, target.scope, id, r.res.head, target, r.res.accepted)
  r.busy = true
  client.request(method, params, function(err, res)
    r.busy = false
    if err then
      warn(M.error_text(kind, err))
    else
      client.notify(M.done_message(kind, target.scope, target, res))
      if kind == 'accept' then
        pcall(vim.cmd, 'checktime')
      end
    end
    -- Drawn again either way: a refusal for a stale head ("diff again") shows the current diff.
    M.refresh(id, function()
      if opts.on_done then
        opts.on_done(err, res)
      end
    end)
  end)
end
M.act = act

function M.open(id)
  client.request(P.MethodSessionDiff, { id = id }, function(err, res)
    if err then
      client.notify('diff ' .. id .. ': ' .. client.error_message(err), vim.log.levels.ERROR)
      return
    end
    local sess = store.find(id)
    local full = sess and sess.id or id
    local title = sess and (store.title(sess) .. ' (' .. (sess.branch or '') .. ')') or id
    local r = reviews[full] or { id = full, tabs = {} }
    reviews[full] = r
    r.title, r.res = title, res
    r.bufnr = buffers.scratch('arbor://diff/' .. full, 'diff')
    draw(r)
    local function target(scope)
      local row = vim.api.nvim_win_get_cursor(0)[1]
      if scope == 'hunk' then
        local h = r.hunks[row]
        if h then
          return { scope = 'hunk', path = h.file.path, index = h.index }
        end
        -- Off a hunk: a file line means the file, the header the whole change.
        if row <= 2 then
          return { scope = 'session' }
        end
        scope = 'file'
      end
      local f = r.owners[row]
      if not f then
        return { scope = scope, none = 'no file under the cursor' }
      end
      return { scope = 'file', path = f.path }
    end
    review_keys(r.bufnr, full, target, {
      ['<CR>'] = { function()
        local f = r.owners[vim.api.nvim_win_get_cursor(0)[1]]
        if f then
          M.side_by_side(full, f)
        end
      end, 'Arbor: side-by-side diff' },
      q = { function() pcall(vim.cmd, 'close') end, 'close' },
    })
    buffers.show(r.bufnr, 'botright vsplit')
  end)
end

return M
