-- :ArborSessions — the session tree by parent, with state, model, tokens (rolled up) and branch,
-- redrawn on every arbor/sessionTree notification.
local buffers = require('arbor.buffers')
local store = require('arbor.store')

local M = {}

M.name = 'arbor://sessions'
local bufnr = nil
local line_ids = {}
local view_win = nil -- the window the last <CR> or d showed its view in
local header = 2 -- lines above the first session

local function valid()
  return bufnr and vim.api.nvim_buf_is_valid(bufnr)
end

function M.render()
  if not valid() then
    return
  end
  local lines, ids = store.render()
  local out = {
    string.format('Arbor sessions (%d)   <CR> log  d diff  M merge  s stop  m message  n new  c child  f fork  g goal  G show goal  P progress  h heartbeat  H heartbeats  r refresh  q close', #ids),
    '',
  }
  if #ids == 0 then
    table.insert(out, '  no sessions yet: :ArborRun {task}')
  end
  vim.list_extend(out, lines)
  line_ids = ids
  buffers.set_lines(bufnr, out)
end

--- The id of the session on the cursor line.
function M.current()
  local row = vim.api.nvim_win_get_cursor(0)[1]
  return line_ids[row - header]
end

--- Opens the tree, keymaps acting on the session under the cursor through the arbor.* actions.
function M.open(actions)
  bufnr = buffers.scratch(M.name, 'arbor-sessions')
  vim.bo[bufnr].bufhidden = 'hide'
  local function on(fn)
    return function()
      local id = M.current()
      if id then
        fn(id)
      else
        vim.notify('arbor: no session on this line')
      end
    end
  end
  -- <CR> and d show their view in the window the previous one opened (when it is still there),
  -- not in one more split each time.
  local function in_view(fn)
    return function(id)
      local tree_win = vim.api.nvim_get_current_win()
      local win = (view_win and view_win ~= tree_win and vim.api.nvim_win_is_valid(view_win)) and view_win or nil
      buffers.next_window(win, function(w)
        if w ~= tree_win then
          view_win = w
        end
      end)
      fn(id)
    end
  end
  buffers.keymaps(bufnr, {
    ['<CR>'] = { on(in_view(actions.log)), 'Arbor: transcript' },
    d = { on(in_view(actions.diff)), 'Arbor: diff' },
    M = { on(actions.merge), 'Arbor: merge into its parent' },
    s = { on(actions.stop), 'Arbor: stop' },
    m = { on(function(id) actions.send(id) end), 'Arbor: send message' },
    f = { on(actions.fork), 'Arbor: fork' },
    c = { on(function(id) actions.run(nil, { parent = id }) end), 'Arbor: spawn subagent' },
    n = { function() actions.run() end, 'Arbor: new task' },
    g = { on(function(id) actions.goal(id) end), 'Arbor: set a goal' },
    G = { on(actions.goal_show), 'Arbor: show the goal' },
    P = { on(actions.progress), 'Arbor: progress' },
    h = { on(function(id) actions.heartbeat(id) end), 'Arbor: add a heartbeat' },
    H = { on(actions.heartbeats), 'Arbor: heartbeats of the session' },
    r = { actions.refresh, 'Arbor: refresh' },
    q = { function() pcall(vim.cmd, 'close') end, 'close' },
  })
  M.render()
  local win = buffers.show(bufnr, 'botright 12split')
  vim.wo[win].wrap = false
  vim.wo[win].cursorline = true
  return bufnr
end

function M.bufnr()
  return valid() and bufnr or nil
end

store.on_change(function()
  if valid() then
    M.render()
  end
end)

return M
