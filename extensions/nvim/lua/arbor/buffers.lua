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

--- Shows bufnr: in a window that already shows it, else in a new split (cmd, e.g. 'botright split').
function M.show(bufnr, cmd)
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_buf(win) == bufnr then
      vim.api.nvim_set_current_win(win)
      return win
    end
  end
  local cur = vim.api.nvim_get_current_buf()
  local empty = vim.api.nvim_buf_get_name(cur) == '' and not vim.bo[cur].modified
    and vim.api.nvim_buf_line_count(cur) == 1 and vim.api.nvim_buf_get_lines(cur, 0, 1, false)[1] == ''
  if not empty then
    vim.cmd(cmd or 'botright split')
  end
  vim.api.nvim_win_set_buf(0, bufnr)
  return vim.api.nvim_get_current_win()
end

--- Buffer-local normal-mode keymaps: { lhs = { fn, desc } }.
function M.keymaps(bufnr, maps)
  for lhs, m in pairs(maps) do
    vim.keymap.set('n', lhs, m[1], { buffer = bufnr, nowait = true, silent = true, desc = m[2] })
  end
end

return M
