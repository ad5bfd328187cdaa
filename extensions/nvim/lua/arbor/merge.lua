-- :ArborMerge — a child session's branch merged into its parent's (arbor/session.merge). A
-- conflict fills the quickfix list with the conflicted files (arbor/session.conflicts); each
-- opens a tab with the base, ours (the parent's) and theirs (the child's) read-only above an
-- editable result that starts as git's merge with conflict markers. :ArborMergeRetry sends the
-- results (arbor/session.merge {id, resolutions}); nothing changes in the parent until then.
local P = require('arbor.protocol')
local buffers = require('arbor.buffers')
local client = require('arbor.client')
local store = require('arbor.store')

local M = {}

-- child id -> { child, parent, files = { ConflictFile }, results = { path -> bufnr }, tabs = { path -> tabpage } }
local pending = {}
M.pending = pending

local function short(id)
  return tostring(id or ''):sub(1, 8)
end

local function warn(msg)
  client.notify(msg, vim.log.levels.WARN)
end

local function present(v)
  return v ~= nil and v ~= vim.NIL and v ~= ''
end

--- The message after a merge of child into its parent.
function M.merged_message(child, res)
  local c = store.find(child)
  local parent = c and present(c.parent) and store.find(c.parent)
  local files = (type(res) == 'table' and res.files) or {}
  return string.format('merged %s into %s%s as %s (%d file%s)', short(child), parent and short(parent.id) or 'its parent',
    parent and present(parent.branch) and (' (' .. parent.branch .. ')') or '', short((res or {}).commit), #files, #files == 1 and '' or 's')
end

--- The lines of text (its last newline does not make an empty last line).
function M.lines(text)
  local lines = vim.split(text or '', '\n', { plain = true })
  if #lines > 0 and lines[#lines] == '' then
    table.remove(lines)
  end
  return lines
end

--- The first line (1-based) with a conflict marker, or nil when there is none.
function M.marker_line(lines)
  for i, l in ipairs(lines) do
    if l:match('^<<<<<<<') or l:match('^>>>>>>>') or l:match('^|||||||') then
      return i
    end
  end
  return nil
end

--- The resolutions the result buffers hold: { path -> text } of those without conflict markers,
--- and the paths that still have them. results: { path -> lines }.
function M.resolutions(results)
  local done, left = {}, {}
  local paths = vim.tbl_keys(results)
  table.sort(paths)
  for _, path in ipairs(paths) do
    local lines = results[path]
    if M.marker_line(lines) then
      table.insert(left, path)
    else
      done[path] = #lines > 0 and (table.concat(lines, '\n') .. '\n') or ''
    end
  end
  return done, left
end

--- What the result buffer of a binary file says: it has no text to resolve.
M.binary_note = '(binary: settle it with :ArborMergeTake ours or :ArborMergeTake theirs)'

--- The quickfix items of a ConflictsResult, given each file's result buffer.
function M.qf_items(res, bufs)
  local items = {}
  for _, f in ipairs(res.files or {}) do
    local why = f.binary and 'binary: take one side' or f.oursMissing and 'deleted in the parent, changed in the child'
      or f.theirsMissing and 'changed in the parent, deleted in the child' or f.baseMissing and 'added in both'
      or 'changed in both'
    table.insert(items, { bufnr = bufs[f.path], lnum = M.marker_line(M.lines(f.merged)) or 1, col = 1,
      text = string.format('conflict (%s): %s ours = parent %s, theirs = child %s', why, f.path, short(res.parent), short(res.child)) })
  end
  return items
end

local function list_text(files)
  local names = {}
  for _, f in ipairs(files) do
    table.insert(names, type(f) == 'table' and f.path or f)
  end
  return table.concat(names, ', ')
end

local open_tab -- forward

-- The editable result buffer of path in merge p: `:w` keeps it (nothing is written to disk).
local function result_buffer(p, f)
  local name = string.format('arbor://merge/%s/%s', short(p.child), f.path)
  local b = vim.fn.bufnr(name)
  if b == -1 or not vim.api.nvim_buf_is_valid(b) then
    b = vim.api.nvim_create_buf(true, false)
    vim.api.nvim_buf_set_name(b, name)
  end
  vim.bo[b].buftype = 'acwrite'
  vim.bo[b].swapfile = false
  vim.bo[b].bufhidden = 'hide'
  vim.bo[b].modifiable = true
  vim.api.nvim_buf_set_lines(b, 0, -1, false, f.binary and { M.binary_note } or M.lines(f.merged))
  vim.bo[b].modified = false
  local group = vim.api.nvim_create_augroup('arbor-merge-' .. b, { clear = true })
  vim.api.nvim_create_autocmd('BufWriteCmd', {
    group = group,
    buffer = b,
    callback = function()
      vim.bo[b].modified = false
      client.notify(f.path .. ': result kept; :ArborMergeRetry sends the resolved files')
    end,
  })
  -- Shown outside a merge tab (from the quickfix list, :cnext, …): open its tab.
  vim.api.nvim_create_autocmd('BufWinEnter', {
    group = group,
    buffer = b,
    callback = function()
      if vim.t.arbor_merge then
        return
      end
      local win = vim.api.nvim_get_current_win()
      vim.schedule(function()
        if pending[p.child] then
          open_tab(p.child, f.path, win)
        end
      end)
    end,
  })
  return b
end

-- A read-only pane of one version.
local function version_buffer(p, f, side)
  local b = buffers.scratch(string.format('arbor://merge/%s/%s/%s', short(p.child), side, f.path))
  local missing = (side == 'base' and f.baseMissing) or (side == 'ours' and f.oursMissing) or (side == 'theirs' and f.theirsMissing)
  buffers.set_lines(b, missing and {} or M.lines(f[side]))
  return b
end

--- Opens the tab of path in the pending merge of child: ours (parent), base and theirs (child)
--- above, the result below. from_win, when it shows the result outside the tab, goes back to
--- the buffer it showed before.
open_tab = function(child, path, from_win)
  local p = pending[child]
  local f
  for _, x in ipairs(p and p.files or {}) do
    if x.path == path then
      f = x
    end
  end
  if not f then
    return
  end
  if from_win and vim.api.nvim_win_is_valid(from_win) and vim.api.nvim_win_get_buf(from_win) == p.results[path] then
    vim.api.nvim_win_call(from_win, function()
      local alt = vim.fn.bufnr('#')
      if alt ~= -1 and alt ~= p.results[path] and vim.api.nvim_buf_is_valid(alt) then
        vim.cmd('silent! buffer ' .. alt)
      end
    end)
  end
  local t = p.tabs[path]
  if t and vim.api.nvim_tabpage_is_valid(t) then
    vim.api.nvim_set_current_tabpage(t)
    return
  end
  vim.cmd('tabnew')
  local scratch = vim.api.nvim_get_current_buf()
  vim.t.arbor_merge = child .. ':' .. path
  p.tabs[path] = vim.api.nvim_get_current_tabpage()
  local result_win = vim.api.nvim_get_current_win()
  vim.api.nvim_win_set_buf(result_win, p.results[path])
  if vim.api.nvim_buf_is_valid(scratch) and scratch ~= p.results[path] then
    pcall(vim.api.nvim_buf_delete, scratch, { force = true })
  end
  local parent = store.find(p.parent)
  local labels = {
    ours = 'ours: parent ' .. short(p.parent) .. (parent and present(parent.branch) and (' ' .. parent.branch) or ''),
    base = 'base',
    theirs = 'theirs: child ' .. short(child),
  }
  vim.cmd('aboveleft split')
  local first = true
  for _, side in ipairs({ 'ours', 'base', 'theirs' }) do
    if not first then
      vim.cmd('rightbelow vsplit')
    end
    first = false
    vim.api.nvim_win_set_buf(0, version_buffer(p, f, side))
    pcall(vim.cmd, 'filetype detect')
    vim.wo.statusline = labels[side] .. ' — ' .. path .. ' (read-only)'
    vim.cmd('diffthis')
  end
  vim.api.nvim_set_current_win(result_win)
  pcall(vim.cmd, 'filetype detect')
  vim.wo[result_win].statusline = 'result — ' .. path .. ' (edit, then :ArborMergeRetry)%m'
  vim.cmd('diffthis')
  local row = M.marker_line(vim.api.nvim_buf_get_lines(p.results[path], 0, -1, false))
  if row then
    vim.api.nvim_win_set_cursor(result_win, { row, 0 })
  end
end
M.open_tab = open_tab

-- Reads the conflicts of child's merge into buffers and the quickfix list.
local function load_conflicts(child, on_done)
  client.request(P.MethodSessionConflicts, { id = child }, function(err, res)
    if err then
      warn('merge conflicts of ' .. short(child) .. ': ' .. client.error_message(err))
      if on_done then
        on_done(err)
      end
      return
    end
    -- Kept under the child's full id (the daemon's answer names it; child may be a prefix).
    local id = present(res.child) and res.child or child
    local p = pending[id] or { tabs = {}, results = {} }
    pending[id] = p
    p.child, p.parent, p.files = id, res.parent, res.files or {}
    -- The commits in conflict: the retry sends them back, refused if either branch moved.
    p.parent_head, p.child_head = res.parentHead, res.childHead
    local bufs = {}
    for _, f in ipairs(p.files) do
      bufs[f.path] = result_buffer(p, f)
    end
    p.results = bufs
    vim.fn.setqflist({}, ' ', {
      title = string.format('Arbor: merge %s into %s: %d file%s in conflict — edit each result, then :ArborMergeRetry',
        short(child), short(res.parent), #p.files, #p.files == 1 and '' or 's'),
      items = M.qf_items(res, bufs),
      context = { arbor_merge = child },
    })
    local cur = vim.api.nvim_get_current_win()
    vim.cmd('botright copen')
    vim.api.nvim_set_current_win(cur)
    client.notify(string.format('merge of %s into %s: %d file%s in conflict (%s). The quickfix list opens each with ours (parent), base and theirs (child) over the result; then :ArborMergeRetry',
      short(child), short(res.parent), #p.files, #p.files == 1 and '' or 's', list_text(p.files)), vim.log.levels.WARN)
    if on_done then
      on_done(nil, p)
    end
  end)
end

-- Closes the tabs and buffers of child's merge and its quickfix list.
local function finish(child)
  local p = pending[child]
  pending[child] = nil
  if not p then
    return
  end
  for _, t in pairs(p.tabs) do
    if vim.api.nvim_tabpage_is_valid(t) and #vim.api.nvim_list_tabpages() > 1 then
      vim.cmd('tabclose! ' .. vim.api.nvim_tabpage_get_number(t))
    end
  end
  for _, f in ipairs(p.files or {}) do
    for _, side in ipairs({ 'ours', 'base', 'theirs' }) do
      local b = vim.fn.bufnr(string.format('arbor://merge/%s/%s/%s', short(child), side, f.path))
      if b ~= -1 then
        pcall(vim.api.nvim_buf_delete, b, { force = true })
      end
    end
    if p.results[f.path] then
      pcall(vim.api.nvim_buf_delete, p.results[f.path], { force = true })
    end
  end
  local ctx = vim.fn.getqflist({ context = 0 }).context
  if type(ctx) == 'table' and ctx.arbor_merge == child then
    vim.fn.setqflist({}, 'r', { title = 'Arbor: merged ' .. short(child), items = {} })
    pcall(vim.cmd, 'cclose')
  end
end

-- The answer to a merge request: done, a conflict (listed), or an error shown.
local function answered(child, err, res, opts)
  if not err then
    client.notify(M.merged_message(child, res))
    finish(child)
    if opts.on_done then
      opts.on_done(nil, res)
    end
    return
  end
  local data = type(err.data) == 'table' and err.data or nil
  if err.code == P.CodeConflict and data and data.kind == 'conflict' then
    load_conflicts(child, function(lerr)
      if opts.on_done then
        opts.on_done(lerr or err)
      end
    end)
    return
  end
  warn(require('arbor.diff').error_text('merge', err))
  if opts.on_done then
    opts.on_done(err)
  end
end

--- Merges child into its parent. opts.on_done(err, res): err after a conflict too (the
--- quickfix list is filled by then).
function M.merge(child, opts)
  opts = opts or {}
  child = (store.find(child) or { id = child }).id
  client.request(P.MethodSessionMerge, { id = child }, function(err, res)
    answered(child, err, res, opts)
  end)
end

--- The child whose pending merge a retry is for: id (a prefix), the merge of the current tab,
--- or the only pending one.
function M.pending_child(id)
  if present(id) then
    for child in pairs(pending) do
      if child:sub(1, #id) == id then
        return child
      end
    end
    return nil
  end
  local t = vim.t.arbor_merge
  if type(t) == 'string' then
    return t:match('^([^:]+):')
  end
  local only
  for child in pairs(pending) do
    if only then
      return nil
    end
    only = child
  end
  return only
end

--- :ArborMergeRetry: sends the result buffers of the pending merge of child (see pending_child)
--- as resolutions. Files whose result still has conflict markers are named and nothing is sent.
function M.retry(id, opts)
  opts = opts or {}
  local child = M.pending_child(id)
  local p = child and pending[child]
  if not p then
    warn('merge retry: no merge with conflicts is waiting' .. (present(id) and (' for ' .. id) or '') .. ' (:ArborMerge starts one)')
    return
  end
  local results, binary = {}, {}
  for _, f in ipairs(p.files or {}) do
    binary[f.path] = f.binary
  end
  p.take = p.take or {}
  local untaken = {}
  for path, b in pairs(p.results) do
    if not p.take[path] then
      if binary[path] then
        table.insert(untaken, path)
      else
        results[path] = vim.api.nvim_buf_is_valid(b) and vim.api.nvim_buf_get_lines(b, 0, -1, false) or M.lines('<<<<<<<')
      end
    end
  end
  if #untaken > 0 then
    table.sort(untaken)
    warn('merge retry: ' .. table.concat(untaken, ', ') .. ' is binary: :ArborMergeTake ours|theirs in its tab first')
    return
  end
  local done, left = M.resolutions(results)
  if #left > 0 then
    warn(string.format('merge retry: %s still %s conflict markers; resolve %s first', table.concat(left, ', '),
      #left == 1 and 'has' or 'have', #left == 1 and 'it' or 'them'))
    return
  end
  -- An empty table would go out as a JSON array: no resolutions is none at all.
  local params = { id = child, resolutions = next(done) and done or nil, parentHead = p.parent_head, childHead = p.child_head }
  if next(p.take) then
    params.take = p.take
  end
  client.request(P.MethodSessionMerge, params, function(err, res)
    if err and err.code == P.CodeConflict then
      -- The parent moved on, or more is in conflict: show what is in conflict now.
      finish(child)
    end
    answered(child, err, res, opts)
  end)
end

--- :ArborMergeTake {ours|theirs} [path]: settles a conflicted file (the current merge tab's when
--- no path is given) by taking the parent's (ours) or the child's (theirs) version whole — for
--- binary files, and a deletion against an edit. :ArborMergeRetry sends it.
function M.take(side, path)
  if side ~= 'ours' and side ~= 'theirs' then
    warn('merge take: want ours or theirs, got ' .. tostring(side))
    return
  end
  local t = vim.t.arbor_merge
  local child, tab_path
  if type(t) == 'string' then
    child, tab_path = t:match('^([^:]+):(.*)$')
  end
  child = child or M.pending_child(nil)
  path = present(path) and path or tab_path
  local p = child and pending[child]
  if not p or not present(path) or not p.results[path] then
    warn('merge take: no conflicted file ' .. tostring(path or '') .. ' in a pending merge (open its tab from the quickfix list)')
    return
  end
  p.take = p.take or {}
  p.take[path] = side
  client.notify(string.format('%s: taking %s whole; :ArborMergeRetry sends it', path, side == 'ours' and "ours (the parent's)" or "theirs (the child's)"))
end

return M
