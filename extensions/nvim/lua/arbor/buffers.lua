-- Scratch buffers (buftype=nofile, nomodifiable) that the plugin's views draw into.
local M = {}

--- Finds or creates the scratch buffer called name.
function M.scratch(name, filetype)
  local bufnr = vim.fn.bufnr(name)
  if bufnr == -1 or not vim.api.nvim_buf_is_valid(bufnr) then
    bufnr = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(bufnr, name)
  end
  vim.bo[bufnr].buftype = 'nofile'
  vim.bo[bufnr].bufhidden = 'hide'
  vim.bo[bufnr].swapfile = false
  vim.bo[bufnr].modifiable = false
  if filetype then
    vim.bo[bufnr].filetype = filetype
  end
  return bufnr
end

--- Replaces (or, with append, extends) the lines of a nomodifiable buffer.
function M.set_lines(bufnr, lines, append)
  if not vim.api.nvim_buf_is_valid(bufnr) then
    return
  end
  vim.bo[bufnr].modifiable = true
  if append then
    local n = vim.api.nvim_buf_line_count(bufnr)
    local first = vim.api.nvim_buf_get_lines(bufnr, 0, 1, false)[1]
    if n == 1 and first == '' then
      vim.api.nvim_buf_set_lines(bufnr, 0, -1, false, lines)
    else
      vim.api.nvim_buf_set_lines(bufnr, n, n, false, lines)
    end
  else
    vim.api.nvim_buf_set_lines(bufnr, 0, -1, false, lines)
  end
  vim.bo[bufnr].modifiable = false
  vim.bo[bufnr].modified = false
end

-- The window the next show() puts its buffer in (see next_window), for a little while.
local hint = nil

--- Makes the next show() (within a few seconds: views open after their first reply) use win
--- instead of a new split when win is valid, and call on_shown(window) with the window it used.
--- The session tree reuses the window its last `d` or <CR> opened this way.
function M.next_window(win, on_shown)
  hint = { win = win, on_shown = on_shown, at = vim.loop.now() }
end

local function take_hint()
  local h = hint
  hint = nil
  if h and vim.loop.now() - h.at < 5000 then
    return h
  end
  return nil
end

--- Shows bufnr: in a window that already shows it, else in the window next_window named, else in
--- a new split (cmd, e.g. 'botright split').
function M.show(bufnr, cmd)
  local h = take_hint()
  local function shown(win)
    if h and h.on_shown then
      h.on_shown(win)
    end
    return win
  end
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_buf(win) == bufnr then
      vim.api.nvim_set_current_win(win)
      return shown(win)
    end
  end
  if h and h.win and vim.api.nvim_win_is_valid(h.win) and vim.api.nvim_win_get_tabpage(h.win) == vim.api.nvim_get_current_tabpage() then
    vim.api.nvim_win_set_buf(h.win, bufnr)
    vim.api.nvim_set_current_win(h.win)
    return shown(h.win)
  end
  local cur = vim.api.nvim_get_current_buf()
  local empty = vim.api.nvim_buf_get_name(cur) == '' and not vim.bo[cur].modified
    and vim.api.nvim_buf_line_count(cur) == 1 and vim.api.nvim_buf_get_lines(cur, 0, 1, false)[1] == ''
  if not empty then
    vim.cmd(cmd or 'botright split')
  end
  vim.api.nvim_win_set_buf(0, bufnr)
  return shown(vim.api.nvim_get_current_win())
end

--- Buffer-local normal-mode keymaps: { lhs = { fn, desc } }.
function M.keymaps(bufnr, maps)
  for lhs, m in pairs(maps) do
    vim.keymap.set('n', lhs, m[1], { buffer = bufnr, nowait = true, silent = true, desc = m[2] })
  end
end

return M
