-- :ArborDiff {id} — a session's change against its merge-base: the patch in a diff buffer; <CR> on
-- a file opens base and head side by side (:diffthis), `a` accepts the file (or, on the header,
-- everything) onto the current branch.
local P = require('arbor.protocol')
local buffers = require('arbor.buffers')
local client = require('arbor.client')
local store = require('arbor.store')

local M = {}

local function side_by_side(id, file)
  local results = {}
  local function show()
    vim.cmd('tabnew')
    local function pane(side, name)
      local r = results[side]
      local b = buffers.scratch(string.format('arbor://%s/%s/%s', side, id:sub(1, 8), name))
      local lines = (r and not r.missing) and vim.split(r.content or '', '\n', { plain = true }) or {}
      if #lines > 0 and lines[#lines] == '' then
        table.remove(lines)
      end
      buffers.set_lines(b, lines)
      vim.api.nvim_win_set_buf(0, b)
      -- Detect the filetype from the buffer name, which ends with the file's path.
      pcall(vim.cmd, 'filetype detect')
      vim.cmd('diffthis')
    end
    pane('base', file.oldPath ~= nil and file.oldPath ~= vim.NIL and file.oldPath ~= '' and file.oldPath or file.path)
    vim.cmd('rightbelow vsplit')
    pane('head', file.path)
  end
  local pending = 2
  for _, side in ipairs({ 'base', 'head' }) do
    local path = file.path
    if side == 'base' and file.oldPath and file.oldPath ~= vim.NIL and file.oldPath ~= '' then
      path = file.oldPath
    end
    -- An added file has no base, a deleted one no head: nothing to ask for.
    if (side == 'base' and file.status == 'added') or (side == 'head' and file.status == 'deleted') then
      results[side] = { missing = true }
      pending = pending - 1
    else
      client.request(P.MethodSessionFileAt, { id = id, path = path, side = side }, function(err, res)
        if err then
          client.notify(side .. ' of ' .. path .. ': ' .. client.error_message(err), vim.log.levels.WARN)
        end
        results[side] = res
        pending = pending - 1
        if pending == 0 then
          show()
        end
      end)
    end
  end
end

--- Buffer lines for a diff result, and the file each line belongs to.
function M.render(sess_title, res)
  local lines = {
    string.format('# %s: %d files, %s..%s', sess_title, #(res.files or {}), (res.base or ''):sub(1, 8), (res.head or ''):sub(1, 8)),
    '# <CR> side-by-side  a accept file (on this line: all)  q close',
    '',
  }
  local owners = {}
  for _, f in ipairs(res.files or {}) do
    table.insert(lines, string.format('%-9s %s  +%d -%d', f.status or '?', f.path, f.additions or 0, f.deletions or 0))
    owners[#lines] = f
  end
  table.insert(lines, '')
  local current
  for _, l in ipairs(vim.split(res.patch or '', '\n', { plain = true })) do
    local b = l:match('^diff %-%-git a/.- b/(.*)$')
    if b then
      for _, f in ipairs(res.files or {}) do
        if f.path == b then
          current = f
        end
      end
    end
    table.insert(lines, l)
    owners[#lines] = current
  end
  return lines, owners
end

function M.open(id)
  client.request(P.MethodSessionDiff, { id = id }, function(err, res)
    if err then
      client.notify('diff ' .. id .. ': ' .. client.error_message(err), vim.log.levels.ERROR)
      return
    end
    local sess = store.find(id)
    local full = sess and sess.id or id
    local title = sess and (store.title(sess) .. ' (' .. (sess.branch or '') .. ')') or id
    local bufnr = buffers.scratch('arbor://diff/' .. full, 'diff')
    local lines, owners = M.render(title, res)
    buffers.set_lines(bufnr, lines)
    local function file_here()
      return owners[vim.api.nvim_win_get_cursor(0)[1]]
    end
    buffers.keymaps(bufnr, {
      ['<CR>'] = { function()
        local f = file_here()
        if f then
          side_by_side(full, f)
        end
      end, 'Arbor: side-by-side diff' },
      a = { function()
        local f = file_here()
        local what = f and f.path or 'all files'
        if vim.fn.confirm('Accept ' .. what .. ' of ' .. title .. ' onto your branch?', '&Yes\n&No', 2) ~= 1 then
          return
        end
        -- head: exactly the change shown here, not a checkpoint made since.
        client.request(P.MethodSessionAccept, { id = full, files = f and { f.path } or nil, head = res.head }, function(e, r)
          if e then
            client.notify('accept: ' .. client.error_message(e), vim.log.levels.ERROR)
          else
            client.notify('accepted ' .. what .. ' as ' .. ((r and r.commit) or ''):sub(1, 8))
            vim.cmd('checktime')
          end
        end)
      end, 'Arbor: accept' },
      q = { function() pcall(vim.cmd, 'close') end, 'close' },
    })
    buffers.show(bufnr, 'botright vsplit')
  end)
end

return M
