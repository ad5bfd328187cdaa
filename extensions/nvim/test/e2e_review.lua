-- Review and merge as a user would, against the real `arbor lsp` (ARBOR_BIN) and the scripted
-- model set up by run.sh, in a repository of its own: accept a hunk in the patch buffer, a file,
-- reject a hunk in the side-by-side tab and a file, accept the rest; each step checked on the
-- user's branch and the session's branch with the git CLI. Then discard without ! keeps the work
-- under refs/arbor/archive/…, and a child merged into its parent conflicts, is resolved in the
-- merge tab and merged. Screens (each window of the tab) are printed as text. Ends with
-- :cquit 0 (pass) or :cquit 1 and the reason in $ARBOR_TEST_OUT.
local out = os.getenv('ARBOR_TEST_OUT') or '/dev/stderr'
local bin = assert(os.getenv('ARBOR_BIN'), 'ARBOR_BIN')
local tmp = os.getenv('ARBOR_TEST_TMP') or vim.fn.tempname()

local function finish(ok, msg)
  local f = io.open(out, 'w')
  f:write((ok and 'PASS ' or '') .. msg .. '\n')
  f:close()
  vim.cmd(ok and 'cquit 0' or 'cquit 1')
end

local function buffer_text(bufnr)
  if not bufnr or bufnr == -1 or not vim.api.nvim_buf_is_valid(bufnr) then
    return ''
  end
  return table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), '\n')
end

local function wait_for(what, timeout, fn)
  local ok = vim.wait(timeout, fn, 50)
  if not ok and what then
    error(what, 0)
  end
  return ok
end

-- The screen as text: every window of the current tab, its buffer's name and the rows it
-- shows from its top line (a closed fold, as diff mode makes of unchanged lines, is one row).
local function screen(label)
  local parts = { '', '=== screen: ' .. label }
  for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    local b = vim.api.nvim_win_get_buf(w)
    local height, width = vim.api.nvim_win_get_height(w), vim.api.nvim_win_get_width(w)
    table.insert(parts, string.format('--- %s [%dx%d]%s', vim.api.nvim_buf_get_name(b), width, height,
      w == vim.api.nvim_get_current_win() and ' (cursor ' .. vim.api.nvim_win_get_cursor(w)[1] .. ')' or ''))
    vim.api.nvim_win_call(w, function()
      local l, last, rows = vim.fn.line('w0'), vim.fn.line('$'), 0
      while rows < height and l <= last do
        local fold_end = vim.fn.foldclosedend(l)
        if fold_end ~= -1 then
          table.insert(parts, string.format('| +-- %d lines folded', fold_end - l + 1))
          l = fold_end + 1
        else
          table.insert(parts, '| ' .. vim.fn.getline(l):sub(1, width))
          l = l + 1
        end
        rows = rows + 1
      end
    end)
  end
  io.stdout:write(table.concat(parts, '\n') .. '\n')
end

-- Warnings fail the test, except those a step expects (expect()).
local complaints, said, expected = {}, {}, {}
local notify = vim.notify
vim.notify = function(msg, level, opts)
  table.insert(said, msg)
  if level and level >= vim.log.levels.WARN then
    local ok = false
    for _, e in ipairs(expected) do
      if msg:find(e, 1, true) then
        ok = true
      end
    end
    if not ok then
      table.insert(complaints, msg)
    end
  end
  return notify(msg, level, opts)
end
local function said_it(part)
  for i = #said, 1, -1 do
    if said[i]:find(part, 1, true) then
      return said[i]
    end
  end
end

local function hex(s)
  return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end))
end
-- A task or message the scripted model answers by running code (see extensions/test/fixture.sh).
local function py(code)
  return 'arbor-test-py ' .. hex(code)
end

local repo = tmp .. '/review-repo'
local function git(...)
  local out_ = vim.fn.system({ 'git', '-C', repo, ... })
  return out_, vim.v.shell_error
end
local function show(rev, path)
  local text, rc = git('show', rev .. ':' .. path)
  return rc == 0 and text or nil
end

local function client_message(err)
  return type(err) == 'table' and tostring(err.message) or tostring(err)
end

local function key(k)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(k, true, false, true), 'x', false)
end

local function run()
  local passed = {}
  vim.fn.mkdir(repo, 'p')
  local body = {}
  for i = 1, 30 do
    table.insert(body, 'line ' .. i)
  end
  vim.fn.writefile(body, repo .. '/f.txt')
  for _, args in ipairs({ { 'init', '-q', '-b', 'main' }, { 'config', 'user.email', 'test@example.invalid' },
    { 'config', 'user.name', 'arbor test' }, { 'add', '.' }, { 'commit', '-q', '-m', 'thirty lines' } }) do
    local o, rc = git(unpack(args))
    if rc ~= 0 then
      error('git ' .. table.concat(args, ' ') .. ': ' .. o, 0)
    end
  end
  vim.cmd('cd ' .. vim.fn.fnameescape(repo))

  local arbor = require('arbor')
  local store = require('arbor.store')
  arbor.setup({ cmd = { bin, 'lsp' } })
  vim.cmd('ArborSessions')
  local tree = vim.fn.bufnr(require('arbor.tree').name)

  local function start(task, opts)
    local s
    opts = vim.tbl_extend('force', opts or {}, { on_created = function(x) s = x end })
    arbor.run(task, opts)
    wait_for('arbor/session.create did not answer within 20s', 20000, function() return s ~= nil end)
    return s
  end
  -- Waits for session id to be idle with done() true (its turn's checkpoint is on its branch).
  local function settled(id, done)
    wait_for(nil, 60000, function()
      local x = store.get(id)
      return x and (x.state == 'failed' or x.state == 'stopped' or (x.state == 'idle' and done(x)))
    end)
    local x = store.get(id)
    if x.state ~= 'idle' then
      error('session ' .. id:sub(1, 8) .. ' did not go idle: ' .. vim.inspect(x), 0)
    end
    return x
  end

  -- The session changes lines 2, 15 and 28 of f.txt (three hunks) and adds g.txt and h.txt.
  local s = start(py([[
lines = open('f.txt').read().split('\n')
lines[1], lines[14], lines[27] = 'LINE 2', 'LINE 15', 'LINE 28'
open('f.txt', 'w').write('\n'.join(lines))
open('g.txt', 'w').write('accept me\n')
open('h.txt', 'w').write('reject me\n')
]]), { name = 'three hunks' })
  s = settled(s.id, function(x) return show(x.branch, 'h.txt') ~= nil end)
  local branch = s.branch
  local session_f = show(branch, 'f.txt')
  if not session_f or not session_f:find('LINE 2\n', 1, true) or not show(branch, 'h.txt') then
    error('the scripted session did not commit its change on ' .. branch .. ': ' .. tostring(session_f), 0)
  end
  table.insert(passed, 'session ' .. s.id:sub(1, 8) .. ' changed f.txt in 3 places, added g.txt and h.txt')

  -- The patch buffer; `a` on a line of the second hunk accepts that hunk only.
  arbor.diff(s.id)
  local pb
  wait_for(':ArborDiff showed no patch with +LINE 15', 15000, function()
    pb = vim.fn.bufnr('arbor://diff/' .. s.id)
    return pb ~= -1 and buffer_text(pb):find('+LINE 15', 1, true) ~= nil
  end)
  vim.api.nvim_set_current_win(vim.fn.bufwinid(pb))
  local function at(text)
    for i, l in ipairs(vim.api.nvim_buf_get_lines(pb, 0, -1, false)) do
      if l == text or l:match(text) then
        vim.api.nvim_set_current_win(vim.fn.bufwinid(pb))
        vim.api.nvim_win_set_cursor(0, { i, 0 })
        return i
      end
    end
    error('the patch buffer has no line ' .. text .. ':\n' .. buffer_text(pb), 0)
  end
  local function acted(part, what)
    wait_for(what .. ': no message "' .. part .. '"', 15000, function() return said_it(part) ~= nil end)
  end
  screen('the patch buffer')
  at('+LINE 15')
  key('a')
  acted('accepted hunk 2 of f.txt onto your branch', '`a` on +LINE 15')
  wait_for('the patch buffer still shows +LINE 15 after its accept:\n' .. buffer_text(pb), 10000, function()
    return not buffer_text(pb):find('+LINE 15', 1, true) and buffer_text(pb):find('+LINE 2', 1, true) ~= nil
  end)
  local main_f = show('main', 'f.txt')
  if not main_f:find('\nLINE 15\n', 1, true) or main_f:find('LINE 2\n', 1, true) or main_f:find('LINE 28', 1, true) or show('main', 'g.txt') then
    error('after accepting hunk 2, main has:\n' .. main_f, 0)
  end
  if show(branch, 'f.txt') ~= session_f then
    error('accepting a hunk changed the session branch', 0)
  end
  screen('after accepting hunk 2 of f.txt')
  table.insert(passed, '`a` accepted hunk 2: main has LINE 15 only, the remaining diff lacks it')

  -- `A` on g.txt's line accepts the file.
  at('^added%s+g.txt')
  key('A')
  acted('accepted g.txt onto your branch', '`A` on g.txt')
  wait_for('the patch buffer still lists g.txt', 10000, function() return not buffer_text(pb):find('g.txt', 1, true) end)
  if show('main', 'g.txt') ~= 'accept me\n' or show('main', 'h.txt') then
    error('after `A` on g.txt main has g.txt=' .. tostring(show('main', 'g.txt')) .. ' h.txt=' .. tostring(show('main', 'h.txt')), 0)
  end
  table.insert(passed, '`A` accepted g.txt')

  -- <CR> on f.txt opens base and head side by side; `x` on LINE 2 in the head pane rejects it.
  at('^modified%s+f.txt')
  local tab = vim.api.nvim_get_current_tabpage()
  key('<CR>')
  local head = vim.fn.bufnr('arbor://head/' .. s.id:sub(1, 8) .. '/f.txt')
  local base = vim.fn.bufnr('arbor://base/' .. s.id:sub(1, 8) .. '/f.txt')
  wait_for('<CR> on f.txt opened no tab with its head', 10000, function()
    head = vim.fn.bufnr('arbor://head/' .. s.id:sub(1, 8) .. '/f.txt')
    return vim.api.nvim_get_current_tabpage() ~= tab and head ~= -1 and buffer_text(head):find('LINE 2', 1, true) ~= nil
  end)
  base = vim.fn.bufnr('arbor://base/' .. s.id:sub(1, 8) .. '/f.txt')
  if not buffer_text(base):find('\nLINE 15\n', 1, true) or buffer_text(base):find('LINE 2\n', 1, true) then
    error('the base side is not the remaining diff\'s base (main after the accept):\n' .. buffer_text(base), 0)
  end
  vim.api.nvim_set_current_win(vim.fn.bufwinid(head))
  vim.api.nvim_win_set_cursor(0, { 2, 0 })
  screen('side by side, cursor on LINE 2')
  local before = git('rev-parse', branch)
  key('x')
  acted("rejected hunk 1 of f.txt: reverted on the session's branch", '`x` on LINE 2')
  wait_for('the head pane still shows LINE 2 after its reject:\n' .. buffer_text(head), 10000, function()
    return vim.api.nvim_buf_get_lines(head, 1, 2, false)[1] == 'line 2'
  end)
  local sf = show(branch, 'f.txt')
  if git('rev-parse', branch) == before or not sf:find('\nline 2\n', 1, true) or not sf:find('LINE 28', 1, true) or not sf:find('LINE 15', 1, true) then
    error('after rejecting hunk 1 the session branch has:\n' .. sf, 0)
  end
  if show('main', 'f.txt') ~= main_f then
    error('rejecting a hunk changed main', 0)
  end
  screen('after rejecting LINE 2')
  table.insert(passed, '`x` in the side-by-side tab rejected LINE 2: a new checkpoint on ' .. branch .. ' reverts it, main untouched')

  -- `X` on h.txt rejects the file on the session's branch.
  vim.api.nvim_set_current_tabpage(tab)
  at('^added%s+h.txt')
  key('X')
  acted("rejected h.txt: reverted on the session's branch", '`X` on h.txt')
  wait_for('the patch buffer still lists h.txt', 10000, function() return not buffer_text(pb):find('h.txt', 1, true) end)
  if show(branch, 'h.txt') or show('main', 'h.txt') then
    error('after `X` on h.txt it is still on ' .. (show(branch, 'h.txt') and branch or 'main'), 0)
  end
  table.insert(passed, '`X` rejected h.txt')

  -- With f.txt edited and not committed in the user's worktree the accept is refused, and the
  -- warning names the file (the daemon's ConflictData), not just "dirty".
  local confirm = vim.fn.confirm
  vim.fn.confirm = function() return 1 end
  local user_f = vim.fn.readfile(repo .. '/f.txt')
  vim.fn.writefile(vim.list_extend(vim.deepcopy(user_f), { 'typed by the user' }), repo .. '/f.txt')
  table.insert(expected, 'uncommitted changes in')
  local main_before = git('rev-parse', 'main')
  at('+LINE 28')
  key('ga')
  acted('uncommitted changes in', '`ga` over an uncommitted f.txt')
  local refusal = said_it('uncommitted changes in')
  if not refusal:find('f.txt', 1, true) or git('rev-parse', 'main') ~= main_before then
    error('the refused accept: ' .. refusal .. '; main moved: ' .. tostring(git('rev-parse', 'main') ~= main_before), 0)
  end
  vim.fn.writefile(user_f, repo .. '/f.txt')
  table.insert(passed, 'an accept over the user\'s uncommitted f.txt is refused naming it: ' .. refusal)

  -- `ga` accepts what is left (LINE 28); nothing is left to review and the f.txt tab closes.
  at('+LINE 28')
  key('ga')
  vim.fn.confirm = confirm
  acted('accepted the whole change onto your branch', '`ga`')
  wait_for('the patch buffer does not say nothing is left:\n' .. buffer_text(pb), 10000, function()
    return buffer_text(pb):find('nothing left to review', 1, true) ~= nil
  end)
  main_f = show('main', 'f.txt')
  if not main_f:find('\nLINE 28', 1, true) or not main_f:find('\nline 2\n', 1, true) or not main_f:find('\nLINE 15\n', 1, true) then
    error('after `ga` main has:\n' .. main_f, 0)
  end
  wait_for('the f.txt tab stayed open with nothing left in it', 5000, function() return #vim.api.nvim_list_tabpages() == 1 end)
  screen('nothing left to review')
  table.insert(passed, '`ga` accepted the rest: main has line 2, LINE 15, LINE 28 and g.txt')

  -- `gx` rejects the whole remaining change of another session: its branch is back at its base.
  local r = start(py("open('r.txt', 'w').write('take it back\\n')"), { name = 'reject all' })
  r = settled(r.id, function(x) return show(x.branch, 'r.txt') ~= nil end)
  arbor.diff(r.id)
  local rb
  wait_for(':ArborDiff showed no r.txt', 15000, function()
    rb = vim.fn.bufnr('arbor://diff/' .. r.id)
    return rb ~= -1 and buffer_text(rb):find('+take it back', 1, true) ~= nil
  end)
  vim.api.nvim_set_current_win(vim.fn.bufwinid(rb))
  vim.fn.confirm = function() return 1 end
  key('gx')
  vim.fn.confirm = confirm
  acted("rejected the whole change: reverted on the session's branch", '`gx`')
  wait_for('the patch buffer of ' .. r.id:sub(1, 8) .. ' does not say nothing is left', 10000, function()
    return buffer_text(rb):find('nothing left to review', 1, true) ~= nil
  end)
  if show(r.branch, 'r.txt') or show('main', 'r.txt') then
    error('after `gx` r.txt is still on ' .. (show(r.branch, 'r.txt') and r.branch or 'main'), 0)
  end
  pcall(vim.cmd, 'bwipeout ' .. rb)
  table.insert(passed, '`gx` rejected everything of ' .. r.id:sub(1, 8) .. ': r.txt gone from ' .. r.branch)

  -- :ArborDiscard (no !) asks, naming nothing unaccepted, and keeps the commits no branch holds
  -- under refs/arbor/archive/…; the tree marks the session discarded.
  local asked
  vim.fn.confirm = function(msg)
    asked = msg
    return 1
  end
  vim.cmd('ArborDiscard ' .. s.id:sub(1, 8))
  wait_for('no discard message', 15000, function() return said_it('discarded ' .. s.id:sub(1, 8)) ~= nil end)
  vim.fn.confirm = confirm
  local dmsg = said_it('discarded ' .. s.id:sub(1, 8))
  local ref = dmsg:match('its work is kept at (refs/arbor/archive/%S+)')
  if not ref or not asked or asked:find('unaccepted', 1, true) then
    error('discard without !: asked ' .. tostring(asked) .. '; said ' .. dmsg, 0)
  end
  local _, rc = git('rev-parse', '--verify', '-q', ref)
  local _, brc = git('rev-parse', '--verify', '-q', 'refs/heads/' .. branch)
  if rc ~= 0 or brc == 0 then
    error('after the discard ' .. ref .. ' should exist and ' .. branch .. ' not', 0)
  end
  wait_for(nil, 10000, function()
    return buffer_text(tree):find('⊘ discarded', 1, true) and buffer_text(tree):find('(work kept at ' .. ref .. ')', 1, true)
  end)
  if not buffer_text(tree):find('(work kept at ' .. ref .. ')', 1, true) then
    error('the tree does not mark the session discarded with its archive:\n' .. buffer_text(tree), 0)
  end
  table.insert(passed, ':ArborDiscard: "' .. dmsg .. '", tree marks it ⊘ discarded')

  -- A child and its parent change conflict.txt apart: :ArborMerge conflicts; the quickfix list
  -- opens the merge tab; the result is edited and :ArborMergeRetry merges it into the parent.
  local function has(path, text)
    return function(x) return show(x.branch, path) == text end
  end
  local parent = settled(start(py("open('conflict.txt', 'w').write('base\\n')"), { name = 'parent' }).id, has('conflict.txt', 'base\n'))
  local child = settled(start(py("open('conflict.txt', 'w').write('child\\n')"), { parent = parent.id, name = 'child' }).id,
    has('conflict.txt', 'child\n'))
  vim.cmd('ArborSend ' .. parent.id:sub(1, 8) .. ' ' .. py("open('conflict.txt', 'w').write('parent\\n')"))
  -- The message's own record moves lastSeq on before its turn runs: wait for the turn's checkpoint.
  wait_for(nil, 60000, function()
    return show(parent.branch, 'conflict.txt') == 'parent\n' and store.get(parent.id).state == 'idle'
  end)
  if show(parent.branch, 'conflict.txt') ~= 'parent\n' or show(child.branch, 'conflict.txt') ~= 'child\n' then
    error(string.format('conflict.txt: parent %q, child %q', tostring(show(parent.branch, 'conflict.txt')), tostring(show(child.branch, 'conflict.txt'))), 0)
  end
  table.insert(expected, 'in conflict (conflict.txt)')
  local parent_head = git('rev-parse', parent.branch)
  -- `M` on the child's row in the tree (what :ArborMerge {id} runs).
  vim.api.nvim_set_current_win(vim.fn.bufwinid(tree))
  for i, l in ipairs(vim.api.nvim_buf_get_lines(tree, 0, -1, false)) do
    if l:find('] ' .. child.id:sub(1, 8), 1, true) then
      vim.api.nvim_win_set_cursor(0, { i, 0 })
    end
  end
  key('M')
  wait_for('no conflict message after :ArborMerge', 15000, function() return said_it('in conflict (conflict.txt)') ~= nil end)
  local qf = vim.fn.getqflist({ items = 0, title = 0 })
  if #qf.items ~= 1 or not vim.api.nvim_buf_get_name(qf.items[1].bufnr):find('conflict.txt', 1, true) then
    error('the quickfix list does not hold conflict.txt: ' .. vim.inspect(qf), 0)
  end
  if git('rev-parse', parent.branch) ~= parent_head then
    error('the conflicted merge moved the parent branch', 0)
  end
  vim.cmd('cfirst')
  if not wait_for(nil, 5000, function() return vim.t.arbor_merge ~= nil end) then
    screen(':cfirst opened no merge tab')
    error(':cfirst opened no merge tab; messages: ' .. vim.fn.execute('messages'), 0)
  end
  local short = child.id:sub(1, 8)
  local function pane(side)
    return buffer_text(vim.fn.bufnr('arbor://merge/' .. short .. '/' .. side .. '/conflict.txt'))
  end
  local result = vim.fn.bufnr('arbor://merge/' .. short .. '/conflict.txt')
  if pane('ours') ~= 'parent' or pane('theirs') ~= 'child' or not buffer_text(result):find('<<<<<<<', 1, true)
    or vim.api.nvim_get_current_buf() ~= result or #vim.api.nvim_tabpage_list_wins(0) ~= 4 then
    error(string.format('the merge tab: ours %q, base %q, theirs %q, result %q', pane('ours'), pane('base'), pane('theirs'), buffer_text(result)), 0)
  end
  screen('the merge tab')
  vim.api.nvim_buf_set_lines(result, 0, -1, false, { 'resolved' })
  vim.cmd('ArborMergeRetry')
  wait_for('no merge message after :ArborMergeRetry', 15000, function() return said_it('merged ' .. short .. ' into ') ~= nil end)
  if show(parent.branch, 'conflict.txt') ~= 'resolved\n' then
    error('after the retry the parent has conflict.txt = ' .. tostring(show(parent.branch, 'conflict.txt')), 0)
  end
  if #vim.api.nvim_list_tabpages() ~= 1 or #vim.fn.getqflist() ~= 0 then
    error('the merge tab or the quickfix list stayed after the merge', 0)
  end
  table.insert(passed, 'merge conflict on conflict.txt resolved in the merge tab: ' .. said_it('merged ' .. short .. ' into '))

  -- The statusline counts the busy sessions of the daemon (other tests' too): running, or
  -- admitted and waiting for a slot; idle and discarded ones are not counted; $/progress
  -- reached the plugin on this Neovim.
  local function want_status()
    local waiting, running = 0, 0
    for _, x in ipairs(store.all()) do
      if not x.discarded and x.state == 'admitted' then
        waiting = waiting + 1
      elseif not x.discarded and x.state == 'running' then
        running = running + 1
      end
    end
    local parts = {}
    if running > 0 then
      table.insert(parts, running .. ' running')
    end
    if waiting > 0 then
      table.insert(parts, waiting .. ' waiting')
    end
    return #parts > 0 and ('arbor: ' .. table.concat(parts, ', ')) or '', waiting
  end
  arbor.refresh()
  wait_for(nil, 10000, function() return arbor.status() == want_status() and store.get(parent.id).state == 'idle' end)
  local st = require('arbor.status')
  local want, waiting = want_status()
  if arbor.status() ~= want or not store.get(s.id).discarded or store.get(s.id).state ~= 'stopped'
    or not st.last or not st.last:find(': idle$') or #st.active() ~= 0 then
    error(string.format('status() %q (want %q); last progress %q; active %s', arbor.status(), want, tostring(st.last), vim.inspect(st.active())), 0)
  end
  table.insert(passed, 'status() "' .. arbor.status() .. '"; $/progress last shown "' .. st.last:sub(-40) .. '"')

  -- `c` in the tree on the discarded session is refused before a task is asked for.
  local ui_input, asked_input = vim.ui.input, nil
  vim.ui.input = function(o, cb_)
    asked_input = o
    cb_(nil)
  end
  table.insert(expected, 'is discarded: a subagent needs a live parent')
  vim.api.nvim_set_current_win(vim.fn.bufwinid(tree))
  for i, l in ipairs(vim.api.nvim_buf_get_lines(tree, 0, -1, false)) do
    if l:find('] ' .. s.id:sub(1, 8), 1, true) then
      vim.api.nvim_win_set_cursor(0, { i, 0 })
    end
  end
  key('c')
  if asked_input or not said_it(s.id:sub(1, 8) .. ' is discarded: a subagent needs a live parent') then
    error('`c` on the discarded session: asked ' .. vim.inspect(asked_input) .. '; said ' .. tostring(said[#said]), 0)
  end
  -- A create the daemon refuses keeps the typed task for the next prompt.
  vim.fn.mkdir(tmp .. '/not-a-repo', 'p')
  table.insert(expected, 'could not start the task')
  local refused
  arbor.run('a task for nowhere', { dir = tmp .. '/not-a-repo', on_error = function(e) refused = e end })
  wait_for('the create in a directory outside git was not refused', 15000, function() return refused ~= nil end)
  arbor.run()
  if not asked_input or asked_input.default ~= 'a task for nowhere' then
    error('after the refused create the prompt offers ' .. vim.inspect(asked_input) .. ' (refusal: ' .. client_message(refused) .. ')', 0)
  end
  vim.ui.input = ui_input
  table.insert(passed, '`c` on a discarded session refused; a refused create (' .. client_message(refused) .. ') keeps its task')

  -- "Refactor with agent…" from the real daemon sends the buffer's unsaved lines.
  vim.cmd('edit ' .. vim.fn.fnameescape(repo .. '/f.txt'))
  local buf = vim.api.nvim_get_current_buf()
  vim.api.nvim_buf_set_lines(buf, 0, 1, false, { 'UNSAVED first line' })
  require('arbor.client').attach_buffer(buf)
  local answers = vim.lsp.buf_request_sync(buf, 'textDocument/codeAction', {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    range = { start = { line = 0, character = 0 }, ['end'] = { line = 1, character = 0 } },
    context = { diagnostics = {} },
  }, 10000) or {}
  local refactor
  for _, a in pairs(answers) do
    for _, action in ipairs(a.result or {}) do
      if action.title == 'Refactor with agent…' then
        refactor = action
      end
    end
  end
  if not refactor then
    error('the daemon offered no "Refactor with agent…": ' .. vim.inspect(answers), 0)
  end
  vim.ui.input = function(_, cb_) cb_('look at the selection') end
  vim.lsp.commands[refactor.command.command](refactor.command, { bufnr = buf })
  vim.ui.input = ui_input
  local looked
  wait_for('"Refactor with agent…" started no session', 20000, function()
    for _, x in ipairs(store.all()) do
      if x.task == 'look at the selection' then
        looked = x
        return true
      end
    end
  end)
  local first = vim.fn.json_decode(vim.fn.systemlist({ bin, 'log', looked.id, '--json' })[1])
  local selection = type(first.data) == 'table' and first.data.selection or ''
  if first.type ~= 'session_created' or not selection:find('UNSAVED first line\nline 2\n', 1, true) then
    error('the session got the selection ' .. vim.inspect(selection) .. ', not the unsaved buffer text', 0)
  end
  vim.cmd('bwipeout!')
  table.insert(passed, '"Refactor with agent…" sent the unsaved line: ' .. vim.inspect(selection))

  vim.wait(300, function() return false end, 50)
  if #complaints > 0 then
    error('the plugin showed warnings/errors: ' .. table.concat(complaints, ' | '), 0)
  end
  table.insert(passed, 'no warnings')
  arbor.disconnect()
  return passed
end

local ok, res = xpcall(run, debug.traceback)
if ok then
  finish(true, #res .. ' passed, 0 failed: ' .. table.concat(res, '; '))
else
  finish(false, tostring(res))
end
