-- The views of a session, driven as a user would against the real `arbor lsp` (ARBOR_BIN) and the
-- scripted model of run.sh: the transcript (folds per turn and cell, output streamed while the
-- cell runs, the subagent as a link, the checkpoint's per-turn diff), fork from an event (a key on
-- the line, and :ArborFork with a seq), the harness panel, the cost–progress summary, and the
-- figures: attach → a 5,000-event transcript rendered (ms) and a cell's print → the buffer (p50).
-- Screens are printed as text. Ends with :cquit 0 (pass) or :cquit 1 and the reason in
-- $ARBOR_TEST_OUT.
local out = os.getenv('ARBOR_TEST_OUT') or '/dev/stderr'
local bin = assert(os.getenv('ARBOR_BIN'), 'ARBOR_BIN')

local function finish(ok, msg)
  local f = io.open(out, 'w')
  f:write((ok and 'PASS ' or '') .. msg .. '\n')
  f:close()
  vim.cmd(ok and 'cquit 0' or 'cquit 1')
end

local function text_of(bufnr)
  if not bufnr or bufnr == -1 or not vim.api.nvim_buf_is_valid(bufnr) then
    return ''
  end
  return table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), '\n')
end

local function wait_for(what, timeout, fn)
  if not vim.wait(timeout, fn, 20) and what then
    error(what, 0)
  end
end

-- The screen as text (what a user sees: folds, the quiet seq marks at line ends), printed.
local function screen(title)
  vim.cmd('redraw')
  local rows = {}
  for r = 1, vim.o.lines do
    local t = {}
    for c = 1, vim.o.columns do
      t[#t + 1] = vim.fn.screenstring(r, c)
    end
    rows[#rows + 1] = (table.concat(t):gsub('%s+$', ''))
  end
  local shot = table.concat(rows, '\n')
  io.stdout:write('---- screen: ' .. title .. ' ----\n' .. shot .. '\n')
  return shot
end

local function line_of(bufnr, pat, plain)
  for i, l in ipairs(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)) do
    if l:find(pat, 1, plain ~= false) then
      return i, l
    end
  end
end

local function cli_json(args)
  local raw = vim.fn.system(vim.list_extend({ bin }, args))
  if vim.v.shell_error ~= 0 then
    error(table.concat(args, ' ') .. ': ' .. raw, 0)
  end
  return vim.fn.json_decode(raw)
end

local function percentile(xs, p)
  table.sort(xs)
  return xs[math.max(1, math.ceil(#xs * p))]
end

local complaints = {}
local notify = vim.notify
local said = {}
vim.notify = function(msg, level, opts)
  table.insert(said, msg)
  if level and level >= vim.log.levels.WARN then
    table.insert(complaints, msg)
  end
  return notify(msg, level, opts)
end

local function said_it(part)
  for _, m in ipairs(said) do
    if m:find(part, 1, true) then
      return m
    end
  end
end

local function run()
  vim.o.columns, vim.o.lines = 120, 40
  local arbor = require('arbor')
  local log = require('arbor.log')
  arbor.setup({ cmd = { bin, 'lsp' } })
  local passed, figures = {}, {}
  local confirm = vim.fn.confirm
  vim.fn.confirm = function() return 1 end

  -- The 5,000-event session runs in the background while the other views are tried.
  vim.fn.writefile({ vim.fn.json_encode({ maxTurnSteps = 1100 }) }, 'arbor.json')
  local many
  arbor.run('many cells', { on_created = function(x) many = x end })
  wait_for('arbor/session.create of "many cells" did not answer within 20s', 20000, function() return many ~= nil end)

  -- Streaming: the transcript, opened as the session starts, shows each print of the running cell
  -- as it comes (timed from the print's own timestamp to the buffer's on_lines).
  local sess
  arbor.run('stream a count', { on_created = function(x) sess = x end })
  wait_for('arbor/session.create of "stream a count" did not answer within 20s', 20000, function() return sess ~= nil end)
  local id = sess.id
  local wins_before = #vim.api.nvim_tabpage_list_wins(0)
  local bufnr = log.open(id)
  local lat, while_running = {}, nil
  vim.api.nvim_buf_attach(bufnr, false, {
    on_lines = function(_, b, _, first, _, last_new)
      local sec, usec = vim.loop.gettimeofday()
      local now = sec + usec / 1e6
      for _, l in ipairs(vim.api.nvim_buf_get_lines(b, first, last_new, false)) do
        local t = l:match('^t=(%d+%.%d+)$')
        if t and not lat[t] then
          lat[t] = (now - tonumber(t)) * 1000
        end
      end
    end,
  })
  wait_for(nil, 60000, function()
    local n = vim.tbl_count(lat)
    if n >= 3 and not while_running then
      -- The cell has not ended: its title still says so, and the daemon has no tool_finished yet.
      local _, title = line_of(bufnr, '▸ cell · running…')
      if title then
        while_running = { lines = n, shot = screen('a cell streaming its output while it runs') }
      end
    end
    return text_of(bufnr):find('▸ cell · ok [1]', 1, true) ~= nil
  end)
  if not while_running then
    error('no streamed output was seen while the cell ran:\n' .. text_of(bufnr), 0)
  end
  if not while_running.shot:find('t=%d+%.%d+') or not while_running.shot:find('▸ cell · running…', 1, true) then
    error('the screen while the cell ran shows no streamed line under a running cell:\n' .. while_running.shot, 0)
  end
  local samples = {}
  for _, v in pairs(lat) do
    table.insert(samples, v)
  end
  if #samples < 10 then
    error('only ' .. #samples .. ' of the 12 timestamps reached the buffer:\n' .. text_of(bufnr), 0)
  end
  local p50 = percentile(samples, 0.5)
  table.insert(figures, string.format('streamed output print → buffer p50 %.1f ms (p90 %.1f ms, %d prints)', p50,
    percentile(samples, 0.9), #samples))
  table.insert(passed, 'streamed cell seen before it ended (' .. while_running.lines .. ' prints)')

  wait_for(nil, 60000, function()
    local x = arbor.store.get(id)
    return x and x.state == 'idle' and text_of(bufnr):find('◆ checkpoint', 1, true) ~= nil
      and text_of(bufnr):find('helped', 1, true) ~= nil
  end)
  local text = text_of(bufnr)
  for _, want in ipairs({ '## turn 1\ntask: stream a count\n▸ cell · ok [1] · ', "```python\nh = await rlm('help with the count', name='helper')",
    '\nwarn 3\n', '\n```\n```\n42\n```\n', '↳ subagent helper on arbor/', '◆ checkpoint ', '→ idle' }) do
    if not text:find(want, 1, true) then
      error('the transcript lacks ' .. vim.inspect(want) .. ':\n' .. text, 0)
    end
  end
  if #vim.api.nvim_tabpage_list_wins(0) > wins_before + 1 or vim.fn.bufwinid(bufnr) == -1 then
    error('the transcript did not open in one window', 0)
  end
  -- Folds: the turn and the cell fold; zc on the cell closes just the cell.
  local win = vim.fn.bufwinid(bufnr)
  vim.api.nvim_set_current_win(win)
  local turn1 = line_of(bufnr, '## turn 1')
  local cell1 = line_of(bufnr, '▸ cell · ok [1]')
  local state = line_of(bufnr, '→ idle')
  if vim.fn.foldlevel(turn1) ~= 1 or vim.fn.foldlevel(cell1) ~= 2 or vim.fn.foldlevel(cell1 + 2) ~= 2 or vim.fn.foldlevel(state) ~= 0 then
    error(string.format('fold levels: turn %d, cell %d, code %d, idle %d', vim.fn.foldlevel(turn1), vim.fn.foldlevel(cell1),
      vim.fn.foldlevel(cell1 + 2), vim.fn.foldlevel(state)), 0)
  end
  vim.api.nvim_win_set_cursor(win, { cell1 + 1, 0 })
  vim.cmd('normal! zc')
  if vim.fn.foldclosed(cell1 + 1) ~= cell1 or vim.fn.foldclosed(turn1) ~= -1 then
    error('zc in the cell did not close the cell alone', 0)
  end
  vim.api.nvim_win_set_cursor(win, { 1, 0 })
  local folded = screen('the transcript with its first cell folded')
  if not folded:find('lines: ▸ cell · ok [1]', 1, true) then
    error('the folded cell does not show as one line:\n' .. folded, 0)
  end
  vim.cmd('normal! zR')
  table.insert(passed, 'transcript: turns and cells fold')

  -- The per-turn diff: <CR> on the checkpoint line opens turn 1's diff (count.txt).
  local cp = line_of(bufnr, '◆ checkpoint ')
  vim.api.nvim_win_set_cursor(win, { cp, 0 })
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes('<CR>', true, false, true), 'x', false)
  local tbuf
  wait_for(nil, 10000, function()
    tbuf = vim.fn.bufnr('arbor://turn/' .. id .. '/1')
    return tbuf ~= -1 and text_of(tbuf):find('+12', 1, true) ~= nil
  end)
  if tbuf == -1 or not text_of(tbuf):find('+++ b/count.txt', 1, true) or vim.bo[tbuf].filetype ~= 'diff' then
    error('<CR> on the checkpoint did not open the diff of turn 1 with count.txt:\n' .. text_of(tbuf), 0)
  end
  local cli = cli_json({ 'diff', id, '--turn', '1', '--json' })
  if not text_of(tbuf):find(vim.trim(cli.patch), 1, true) then
    error('the turn diff differs from `arbor diff --turn 1`:\n' .. text_of(tbuf) .. '\n---\n' .. cli.patch, 0)
  end
  -- D anywhere in the turn opens the same diff, in the same window.
  vim.api.nvim_set_current_win(win)
  vim.api.nvim_win_set_cursor(win, { cell1 + 1, 0 })
  local nwins = #vim.api.nvim_tabpage_list_wins(0)
  vim.api.nvim_feedkeys('D', 'x', false)
  wait_for(nil, 5000, function() return vim.api.nvim_get_current_buf() == tbuf end)
  if vim.api.nvim_get_current_buf() ~= tbuf or #vim.api.nvim_tabpage_list_wins(0) ~= nwins then
    error('D in the turn did not show its diff in the window it already had', 0)
  end
  vim.cmd('close')
  table.insert(passed, 'per-turn diff from the checkpoint (<CR>) and from within the turn (D)')

  -- The subagent line is a link: <CR> opens the helper's transcript in the transcript window.
  vim.api.nvim_set_current_win(win)
  local sub = line_of(bufnr, '↳ subagent helper')
  vim.api.nvim_win_set_cursor(win, { sub, 0 })
  nwins = #vim.api.nvim_tabpage_list_wins(0)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes('<CR>', true, false, true), 'x', false)
  local helper
  wait_for(nil, 10000, function()
    local shown = log.session_of(vim.api.nvim_win_get_buf(win))
    helper = shown ~= id and shown or nil
    return helper and text_of(vim.api.nvim_win_get_buf(win)):find('assistant: helped', 1, true) ~= nil
  end)
  if not helper or #vim.api.nvim_tabpage_list_wins(0) ~= nwins then
    error('<CR> on the subagent line did not open its transcript in the same window', 0)
  end
  if not text_of(vim.api.nvim_win_get_buf(win)):find('task: help with the count', 1, true) then
    error('the helper\'s transcript lacks its task:\n' .. text_of(vim.api.nvim_win_get_buf(win)), 0)
  end
  log.open(id)
  table.insert(passed, 'subagent link opens ' .. helper:sub(1, 8) .. ' in the transcript window')

  -- Fork from here: f on the cell's title forks at that event (tool_started) and opens the fork's
  -- transcript in the same window; the daemon records forkSeq = that seq.
  local title_line = line_of(bufnr, '▸ cell · ok [1]')
  local at = log.entry_at(bufnr, title_line).seq
  vim.api.nvim_set_current_win(win)
  vim.api.nvim_win_set_cursor(win, { title_line, 0 })
  nwins = #vim.api.nvim_tabpage_list_wins(0)
  vim.api.nvim_feedkeys('f', 'x', false)
  local fork
  wait_for(nil, 20000, function()
    local shown = log.session_of(vim.api.nvim_win_get_buf(win))
    local x = shown and arbor.store.get(shown)
    if x and x.forkOf == id then
      fork = x
      return text_of(vim.api.nvim_win_get_buf(win)):find('forked from', 1, true) ~= nil
    end
  end)
  if not fork or fork.forkSeq ~= at or #vim.api.nvim_tabpage_list_wins(0) ~= nwins then
    error(string.format('f did not fork at #%d into the transcript window: %s', at, vim.inspect(fork)), 0)
  end
  local fbuf = vim.api.nvim_win_get_buf(win)
  local ftext = text_of(fbuf)
  if not ftext:find('fork of ' .. id:sub(1, 8) .. ' @' .. at, 1, true) or not ftext:find('forked from ' .. id:sub(1, 8) .. ' at event ' .. at, 1, true) then
    error('the fork\'s transcript does not say where it came from:\n' .. ftext, 0)
  end
  local listed
  for _, x in ipairs(cli_json({ 'ls', '--json' })) do
    if x.id == fork.id then
      listed = x
    end
  end
  if not listed or listed.forkOf ~= id or listed.forkSeq ~= at then
    error('`arbor ls` records the fork as ' .. vim.inspect(listed), 0)
  end
  screen('the fork\'s transcript')
  table.insert(passed, 'f forked ' .. id:sub(1, 8) .. ' at #' .. at .. ' as ' .. fork.id:sub(1, 8))

  -- :ArborFork {id} {seq} forks at that seq too (here: the turn's heading).
  local at2 = log.entry_at(bufnr, turn1).seq
  vim.cmd('ArborFork ' .. id:sub(1, 8) .. ' ' .. at2)
  local fork2
  wait_for(nil, 20000, function()
    for _, x in ipairs(arbor.store.all()) do
      if x.forkOf == id and x.forkSeq == at2 then
        fork2 = x
        return true
      end
    end
  end)
  if not fork2 then
    error(':ArborFork ' .. id:sub(1, 8) .. ' ' .. at2 .. ' made no fork at #' .. at2, 0)
  end
  table.insert(passed, ':ArborFork id ' .. at2 .. ' forked as ' .. fork2.id:sub(1, 8))

  -- The figure: attach → the whole transcript of the 5,000-event session rendered.
  wait_for(nil, 240000, function()
    local x = arbor.store.get(many.id)
    return x and (x.state == 'idle' or x.state == 'failed' or x.state == 'stopped')
  end)
  local m = arbor.store.get(many.id)
  if m.state ~= 'idle' then
    error('the many-cells session did not go idle: ' .. vim.inspect(m), 0)
  end
  local raw = vim.fn.systemlist({ bin, 'log', many.id, '--json' })
  local final = vim.fn.json_decode(raw[#raw]).seq
  os.remove('arbor.json')
  local t0 = vim.loop.hrtime()
  local mbuf = log.open(many.id)
  local v = log.view(many.id)
  wait_for(nil, 60000, function()
    return v.t.last_seq >= final and not v.scheduled
  end)
  vim.cmd('redraw')
  local ms = (vim.loop.hrtime() - t0) / 1e6
  local nlines = vim.api.nvim_buf_line_count(mbuf)
  local mtext = text_of(mbuf)
  if v.t.last_seq < 5000 or not mtext:find('\nn=1000\n1000\n', 1, true) or not mtext:find('assistant: done many', 1, true) then
    error(string.format('the many-cells transcript shows %d events (want ≥ 5000), %d lines', v.t.last_seq, nlines), 0)
  end
  local _, streamed = mtext:gsub('\n```\nn=%d+\n%d+\n```', '')
  table.insert(figures, string.format('attach → %d-event transcript rendered: %.0f ms (%d lines, %d streamed cells)', v.t.last_seq, ms, nlines, streamed))
  table.insert(passed, 'the ' .. v.t.last_seq .. '-event transcript')

  vim.fn.confirm = confirm
  vim.wait(300, function() return false end, 50)
  if #complaints > 0 then
    error('the plugin showed warnings/errors: ' .. table.concat(complaints, ' | '), 0)
  end
  arbor.disconnect()
  return passed, figures
end

local ok, res, figs = xpcall(run, debug.traceback)
if ok then
  for _, f in ipairs(figs) do
    io.stdout:write('FIGURE ' .. f .. '\n')
  end
  finish(true, #res .. ' passed, 0 failed: ' .. table.concat(res, '; ') .. ' | ' .. table.concat(figs, '; '))
else
  finish(false, tostring(res))
end
