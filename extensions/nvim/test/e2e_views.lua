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
  -- arbor.json: room for 1000 cells in a turn, and a workspace gate (trusted at the first create).
  vim.fn.writefile({ vim.fn.json_encode({ maxTurnSteps = 1100, harness = { workspace = { gate = 'echo gate ok' } } }) }, 'arbor.json')
  -- It is a benchmark (1,000 model calls): `make bench-editors` runs it (ARBOR_E2E_FIGURES=1).
  local many
  local bench = os.getenv('ARBOR_E2E_FIGURES') == '1'
  if bench then
    arbor.run('many cells', { on_created = function(x) many = x end })
    wait_for('arbor/session.create of "many cells" did not answer within 20s', 20000, function() return many ~= nil end)
  end

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
  table.insert(figures, string.format('streamed output print → buffer p50 %.1f ms (p90 %.1f ms, %d prints 250 ms apart; '
    .. 'the daemon sends at most one tool_output per stream per 100 ms)', p50, percentile(samples, 0.9), #samples))
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

  -- The cost–progress summary of the streaming session's tree (it and its helper): sparklines
  -- of verified progress against tokens and cost, the helper's line, then the series. A goal
  -- with an end condition first gives it points over time: the goal set, a second checkpoint,
  -- the end condition passed, the goal complete.
  local gdone
  require('arbor.client').request('arbor/goal.set', { session = id, objective = 'write done.txt', ['until'] = 'test -f done.txt' },
    function(err) gdone = err or false end)
  wait_for(nil, 10000, function() return gdone ~= nil end)
  if gdone then
    error('goal.set: ' .. vim.inspect(gdone), 0)
  end
  wait_for(nil, 60000, function()
    for _, p in ipairs(cli_json({ 'progress', id, '--json' }).points) do
      if p.kind == 'goal_changed' and p.status == 'complete' then
        return true
      end
    end
    vim.wait(300, function() return false end)
  end)
  vim.cmd('ArborProgress ' .. id:sub(1, 8))
  local pbuf = vim.fn.bufnr('arbor://progress/' .. id)
  wait_for(nil, 10000, function() return pbuf ~= -1 and text_of(pbuf):find('\ncost ', 1, true) ~= nil end)
  local ptext = text_of(pbuf)
  local cliprog = cli_json({ 'progress', id, '--json' })
  local cps, passes = 0, 0
  for _, p in ipairs(cliprog.points) do
    if p.kind == 'checkpoint' then
      cps = cps + 1
    elseif p.kind == 'verified' and p.status == 'passed' then
      passes = passes + 1
    end
  end
  local lastsp = cliprog.points[#cliprog.points].spend
  local vline = ptext:match('\n(verified  [^\n]*)')
  local tline = ptext:match('\n(tokens    [^\n]*)')
  local spark = vline and vline:match('^verified  (.-)  %d')
  -- A cumulative series: its cells never go down, it ends full and it rose on the way.
  local rising, prev, levels = true, 0, {}
  for i = 0, vim.fn.strchars(spark or '') - 1 do
    local c = vim.fn.strcharpart(spark, i, 1)
    local lvl = c == ' ' and 0 or (vim.fn.index({ '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█' }, c) + 1)
    rising = rising and lvl >= prev
    prev, levels[lvl] = lvl, true
  end
  if cps < 2 or passes < 1 or not spark or vim.fn.strchars(spark) ~= 40 or not rising or prev ~= 8 or vim.tbl_count(levels) < 2
    or not vline:find(string.format('  %d (%d checkpoints, %d check', cps + passes, cps, passes), 1, true)
    or not tline or not tline:find('[▁▂▃▄▅▆▇█]') or not ptext:find('(the session tree: 2 sessions)', 1, true)
    or not ptext:find('└─ helper  ' .. helper:sub(1, 8), 1, true) or not ptext:find(string.format('$%.4f', lastsp.costUSD), 1, true) then
    error(string.format(':ArborProgress summary (daemon: %d checkpoints, %d tokens):\n%s', cps, lastsp.tokens, ptext), 0)
  end
  screen('the cost–progress summary of a session tree')
  vim.cmd('close')
  table.insert(passed, ':ArborProgress: ' .. vline)

  -- The harness panel. Two sessions whose cell fails; "Refine now" (n) on the first into its
  -- session scope (policy apply): the note lands as an entry; its view lists the version with
  -- the trailers (refine, the trigger = the failed cell's seq); a second version, the diff of
  -- each, a rollback to the first (checked with git). Then a refine of each into the workspace
  -- scope (policy review): two pending proposals with their evidence; x rejects one, a accepts
  -- the other and the workspace gate passes it (checked with arbor proposals).
  -- (A refine reads what happened since the session's last refine: one session per refine.)
  local imp, imp2, imp3
  arbor.run('import a missing module', { on_created = function(x) imp = x end })
  arbor.run('import a missing module', { on_created = function(x) imp2 = x end })
  arbor.run('import a missing module', { on_created = function(x) imp3 = x end })
  wait_for('the import sessions did not start', 20000, function() return imp and imp2 and imp3 end)
  wait_for(nil, 90000, function()
    for _, x in ipairs({ imp, imp2, imp3 }) do
      local y = arbor.store.get(x.id)
      if not y or y.state ~= 'idle' then
        return false
      end
    end
    return true
  end)
  local function failed_cell(sid)
    for _, l in ipairs(vim.fn.systemlist({ bin, 'log', sid, '--json' })) do
      local ev = vim.fn.json_decode(l)
      if ev.type == 'tool_finished' and ev.data.status == 'error' then
        return ev.seq
      end
    end
    error('session ' .. sid .. ' has no failed cell', 0)
  end
  local failed_seq = failed_cell(imp.id)
  vim.cmd('ArborHarness ' .. imp.id:sub(1, 8))
  local hbuf = vim.fn.bufnr(require('arbor.harness').name)
  wait_for(nil, 10000, function() return hbuf ~= -1 and text_of(hbuf):find('session scope (' .. imp.id:sub(1, 8) .. ')', 1, true) ~= nil end)
  if hbuf == -1 or not text_of(hbuf):find('workspace scope  refs/arbor/harness/workspace', 1, true) then
    error(':ArborHarness did not list the session and workspace scopes:\n' .. text_of(hbuf), 0)
  end
  local select, input = vim.ui.select, vim.ui.input
  local function refine_into(scope, who)
    vim.ui.select = function(items, _, on_choice) on_choice(vim.tbl_contains(items, scope) and scope or nil) end
    vim.ui.input = function(_, on_confirm) on_confirm('missing imports') end
    vim.api.nvim_set_current_win(vim.fn.bufwinid(hbuf))
    local n = #said
    vim.api.nvim_feedkeys('n', 'x', false)
    local want = 'refine of ' .. who:sub(1, 8) .. ' (' .. scope .. ' scope'
    wait_for(nil, 60000, function()
      for i = n + 1, #said do
        if said[i]:find(want, 1, true) then
          return true
        end
      end
    end)
    vim.ui.select, vim.ui.input = select, input
    local msg = said_it(want)
    if not msg or not msg:find('1 proposed', 1, true) then
      error('refine now into the ' .. scope .. ' scope: ' .. vim.inspect(said), 0)
    end
    return msg
  end
  refine_into('session', imp.id)
  local erow
  wait_for(nil, 10000, function()
    erow = line_of(hbuf, '^  note%s+check%-imports%s+Check imports', false)
    return erow ~= nil
  end)
  if not erow then
    error('the applied note is not an entry of the session scope:\n' .. text_of(hbuf), 0)
  end
  vim.api.nvim_win_set_cursor(0, { erow, 0 })
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes('<CR>', true, false, true), 'x', false)
  local ebuf = vim.fn.bufnr('arbor://harness/session/note/check-imports')
  wait_for(nil, 10000, function() return ebuf ~= -1 and text_of(ebuf):find('Now:', 1, true) ~= nil end)
  local etext = text_of(ebuf)
  local trail = 'refine, session ' .. imp.id:sub(1, 8)
  if not etext:find(trail, 1, true) or not etext:find('trigger #' .. failed_seq, 1, true) or not etext:find('intended: no failed imports', 1, true)
    or not etext:find('Now:\n  Before importing a module, check it is installed.', 1, true) then
    error('the entry view lacks the trailers (refine, trigger #' .. failed_seq .. ', intended) or the body:\n' .. etext, 0)
  end
  -- A second version (as another client would write it), then the diff of each version.
  local st
  require('arbor.client').request('arbor/harness.get', { dir = vim.fn.getcwd(), scope = 'session', session = imp.id, kind = 'note', id = 'check-imports' },
    function(err, e)
      require('arbor.client').request('arbor/harness.put', { dir = vim.fn.getcwd(), scope = 'session', session = imp.id, base = e.version,
        entry = { kind = 'note', id = 'check-imports', title = 'Check imports', body = 'Import whatever you like.' } }, function(perr, res)
        st = { err = perr or err, res = res }
      end)
    end)
  wait_for(nil, 10000, function() return st ~= nil end)
  if st.err then
    error('harness.put: ' .. vim.inspect(st.err), 0)
  end
  vim.api.nvim_set_current_win(vim.fn.bufwinid(ebuf))
  vim.api.nvim_feedkeys('r', 'x', false)
  wait_for(nil, 10000, function() return text_of(ebuf):find('Now:\n  Import whatever you like.', 1, true) ~= nil end)
  -- Rows 5-6 are the newest version (its subject, its trailers), 7-8 the first.
  local v2, v1 = 5, 7
  local vrows = vim.api.nvim_buf_get_lines(ebuf, 4, 8, false)
  if not (vrows[1] or ''):match('^  %x+  ') or not (vrows[3] or ''):match('^  %x+  ') or not (vrows[4] or ''):find(trail, 1, true)
    or not (vrows[2] or ''):find('user', 1, true) then
    error('the entry view does not list two versions, newest first:\n' .. text_of(ebuf), 0)
  end
  local function diff_of(row)
    vim.api.nvim_set_current_win(vim.fn.bufwinid(ebuf))
    vim.api.nvim_win_set_cursor(0, { row, 0 })
    vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes('<CR>', true, false, true), 'x', false)
    local b
    wait_for(nil, 10000, function()
      b = vim.api.nvim_get_current_buf()
      return vim.api.nvim_buf_get_name(b):find('arbor://harness-diff/', 1, true) ~= nil and vim.bo[b].filetype == 'diff'
    end)
    local t = text_of(b)
    vim.cmd('close')
    return t
  end
  local d1, d2 = diff_of(v1), diff_of(v2)
  if not d1:find('\n+Before importing a module, check it is installed.', 1, true) or not d2:find('\n-Before importing a module, check it is installed.', 1, true)
    or not d2:find('\n+Import whatever you like.', 1, true) or not d1:find('# ' .. trail, 1, true) then
    error('the version diffs:\n' .. d1 .. '\n----\n' .. d2, 0)
  end
  -- R on the first version rolls back to it: a third version, the body as it was.
  vim.api.nvim_set_current_win(vim.fn.bufwinid(ebuf))
  vim.api.nvim_win_set_cursor(0, { v1, 0 })
  vim.api.nvim_feedkeys('R', 'x', false)
  wait_for(nil, 10000, function() return said_it('rolled note check-imports back to ') ~= nil and text_of(ebuf):find('Now:\n  Before importing', 1, true) ~= nil end)
  local ref = 'refs/arbor/harness/session/' .. imp.id
  local body = vim.fn.system({ 'git', 'show', ref .. ':notes/check-imports.md' })
  local count = vim.trim(vim.fn.system({ 'git', 'rev-list', '--count', ref }))
  if not body:find('Before importing a module, check it is installed.', 1, true) or tonumber(count) ~= 3 then
    error(string.format('after the rollback %s holds %q in %s commits', ref, body, count), 0)
  end
  screen('a harness entry: its versions with their trailers')
  vim.cmd('close')
  table.insert(passed, 'harness panel: refine now → entry, versions with trailers (trigger #' .. failed_seq .. '), diffs, rollback (3 commits)')

  -- Refines into the workspace scope: pending proposals with their evidence.
  for _, x in ipairs({ imp2, imp3 }) do
    vim.cmd('ArborHarness ' .. x.id:sub(1, 8))
    wait_for(nil, 10000, function() return text_of(hbuf):find('session scope (' .. x.id:sub(1, 8) .. ')', 1, true) ~= nil end)
    refine_into('workspace', x.id)
  end
  imp, imp2 = imp2, imp3
  failed_seq = failed_cell(imp.id)
  local function prow(sid)
    for i, l in ipairs(vim.api.nvim_buf_get_lines(hbuf, 0, -1, false)) do
      local pid = l:match('^  (p%x+)%s+pending%s+workspace%s+create note check%-imports')
      if pid and l:find('session ' .. sid:sub(1, 8), 1, true) then
        return i, pid
      end
    end
  end
  wait_for(nil, 10000, function() return prow(imp.id) and prow(imp2.id) end)
  local r1, pa = prow(imp.id)
  local r2, pb = prow(imp2.id)
  if not r1 or not r2 then
    error('the panel does not list both pending workspace proposals:\n' .. text_of(hbuf), 0)
  end
  local lines = vim.api.nvim_buf_get_lines(hbuf, r1, r1 + 6, false)
  local block = table.concat(lines, '\n')
  if not block:find('> the import failed', 1, true) or not block:find('evidence: #' .. failed_seq .. ' tool_finished: result (error)', 1, true)
    or not block:find('gate: not run yet', 1, true) then
    error('the pending proposal lacks its rationale, evidence (#' .. failed_seq .. ') or gate line:\n' .. text_of(hbuf), 0)
  end
  screen('the harness panel with two pending proposals')
  -- x rejects the second one with a reason.
  vim.api.nvim_set_current_win(vim.fn.bufwinid(hbuf))
  vim.api.nvim_win_set_cursor(0, { r2, 0 })
  local finput = vim.fn.input
  vim.fn.input = function() return 'one note is enough' end
  vim.api.nvim_feedkeys('x', 'x', false)
  vim.fn.input = finput
  wait_for(nil, 10000, function() return said_it('rejected ' .. pb) ~= nil and prow(imp2.id) == nil end)
  -- a accepts the first; the workspace gate judges it and passes it.
  r1 = prow(imp.id)
  vim.api.nvim_win_set_cursor(0, { r1, 0 })
  vim.api.nvim_feedkeys('a', 'x', false)
  wait_for(nil, 20000, function() return said_it(pa .. ' applied to the workspace harness as ') ~= nil and prow(imp.id) == nil end)
  local recs = {}
  for _, p in ipairs(cli_json({ 'proposals', '--status', 'all', '--json', '--dir', vim.fn.getcwd() })) do
    recs[p.id] = p
  end
  if not recs[pa] or recs[pa].status ~= 'applied' or type(recs[pa].gate) ~= 'table' or recs[pa].gate.passed ~= true
    or not recs[pb] or recs[pb].status ~= 'rejected' or recs[pb].reason ~= 'one note is enough' then
    error('arbor proposals records ' .. vim.inspect({ recs[pa], recs[pb] }), 0)
  end
  -- s lists decided ones too: the gate's verdict and the decision.
  vim.api.nvim_feedkeys('s', 'x', false)
  wait_for(nil, 10000, function() return text_of(hbuf):find('branch check `echo gate ok` passed (exit 0)', 1, true) ~= nil end)
  if not text_of(hbuf):find('branch check `echo gate ok` passed (exit 0)', 1, true) or not text_of(hbuf):find('rejected by user: one note is enough', 1, true) then
    error('the panel (all) does not show the gate verdict and the rejection:\n' .. text_of(hbuf), 0)
  end
  screen('the harness panel listing decided proposals')
  vim.cmd('close')
  table.insert(passed, 'harness panel: evidence #' .. failed_seq .. ', x rejected ' .. pb .. ', a accepted ' .. pa .. ' (gate passed)')

  -- The figure: attach → the whole transcript of the 5,000-event session rendered.
  if not bench then
    os.remove('arbor.json')
    vim.fn.confirm = confirm
    vim.wait(300, function() return false end, 50)
    if #complaints > 0 then
      error('the plugin showed warnings/errors: ' .. table.concat(complaints, ' | '), 0)
    end
    arbor.disconnect()
    return passed, figures
  end
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
  -- References in the same run: reading the same log with the CLI, and the transcript model
  -- alone on those events (no buffer, no request).
  local c0 = vim.loop.hrtime()
  local rawlog = vim.fn.systemlist({ bin, 'log', many.id, '--json' })
  local cli_ms = (vim.loop.hrtime() - c0) / 1e6
  local evs = vim.tbl_map(vim.fn.json_decode, rawlog)
  -- Every tool_output event of the log is in the transcript as streamed lines of its cell.
  local outputs, shown, seen = 0, 0, {}
  for _, ev in ipairs(evs) do
    if ev.type == 'tool_output' then
      outputs = outputs + 1
    end
  end
  for _, e in pairs(v.t.entries) do
    if e.type == 'tool_output' and not seen[e] then
      seen[e], shown = true, shown + 1
    end
  end
  if outputs < 1000 or shown ~= outputs then
    error(string.format('the log has %d tool_output events, the transcript shows %d', outputs, shown), 0)
  end
  local m0 = vim.loop.hrtime()
  log.render_log(evs, arbor.store.get(many.id), many.id)
  local model_ms = (vim.loop.hrtime() - m0) / 1e6
  table.insert(figures, string.format('attach → %d-event transcript rendered: %.0f ms (%d lines, %d streamed outputs; same run: '
    .. '`arbor log --json` of it %.0f ms, the transcript model alone %.0f ms)', v.t.last_seq, ms, nlines, shown, cli_ms, model_ms))
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
