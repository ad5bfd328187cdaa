-- Unit checks of the review, merge, status and UX parts of the plugin (no daemon), run after
-- unit.lua in the same headless Neovim. Fails with :cquit 1 and a reason in $ARBOR_TEST_OUT.
local out = os.getenv('ARBOR_TEST_OUT') or '/dev/stderr'

local function fail(msg)
  local f = io.open(out, 'w')
  f:write('unit_review: ' .. msg .. '\n')
  f:close()
  vim.cmd('cquit 1')
end

local function check(cond, msg)
  if not cond then
    fail(msg)
  end
end

local arbor = require('arbor')
local store = require('arbor.store')
local client = require('arbor.client')
local saved_sessions = store.all()
local P = require('arbor.protocol')

-- The tree marks forks "fork of <short> @<seq>" and discarded sessions "⊘ discarded" with the
-- archive; only live, undiscarded sessions can take a subagent; the statusline counts running
-- and waiting ones only.
store.replace({
  { id = 'aaaa1111xxxx', task = 'root', state = 'idle', model = 'm', branch = 'arbor/root', created = '1' },
  { id = 'bbbb2222yyyy', task = 'forked', state = 'running', model = 'm', branch = 'arbor/f', created = '2',
    forkOf = 'aaaa1111xxxx', forkSeq = 7 },
  { id = 'cccc3333zzzz', task = 'gone', state = 'stopped', model = 'm', branch = 'arbor/g', created = '3',
    discarded = true, archived = 'refs/arbor/archive/arbor/g' },
  { id = 'dddd4444wwww', task = 'halted', state = 'stopped', model = 'm', branch = 'arbor/h', created = '4' },
  { id = 'eeee5555vvvv', task = 'queued', state = 'admitted', model = 'm', branch = 'arbor/q', created = '5' },
  { id = 'ffff6666uuuu', task = 'broke', state = 'failed', model = 'm', branch = 'arbor/b', created = '6' },
  { id = 'gggg7777tttt', task = 'dozing', state = 'inactive', model = 'm', branch = 'arbor/d', created = '7' },
})
local lines = store.render()
local tree = table.concat(lines, '\n')
check(lines[2]:find('(fork of aaaa1111 @7)', 1, true), 'fork marker: ' .. lines[2])
check(lines[3]:find('^⊘ discarded gone') and lines[3]:find('(work kept at refs/arbor/archive/arbor/g)', 1, true)
  and not lines[3]:find('stopped', 1, true), 'discarded marker: ' .. lines[3])
check(lines[4]:find('^■ stopped  halted'), 'a stopped session stays stopped: ' .. lines[4])
local parents = {}
for _, s in ipairs(store.all()) do
  if store.can_parent(s) then
    table.insert(parents, s.task)
  end
end
check(table.concat(parents, ',') == 'root,forked,queued,dozing', 'can_parent: ' .. table.concat(parents, ',') .. '\n' .. tree)
check(arbor.parent_refusal(store.get('cccc3333zzzz')) == 'discarded' and arbor.parent_refusal(store.get('dddd4444wwww')) == 'stopped'
  and arbor.parent_refusal(store.get('ffff6666uuuu')) == 'failed' and arbor.parent_refusal(store.get('aaaa1111xxxx')) == nil,
  'parent_refusal')
local running, waiting = store.counts()
check(running == 1 and waiting == 1, 'counts: ' .. running .. ' running, ' .. waiting .. ' waiting')
check(arbor.status() == 'arbor: 1 running, 1 waiting', 'status(): ' .. arbor.status())
store.replace({ { id = 'x1', task = 't', state = 'stopped', created = '1' } })
check(arbor.status() == '', 'status() with nothing live: ' .. vim.inspect(arbor.status()))

-- $/progress: begin and end of a turn, as the daemon sends them, shown and kept.
local st = require('arbor.status')
local shown = st.on_progress({ token = 'arbor/s1/3', value = { kind = 'begin', title = 'Arbor: add one', message = 'running on arbor/add' } }, false)
check(shown == 'add one — running on arbor/add', 'progress begin: ' .. tostring(shown))
check(#st.active() == 1 and st.active()[1].token == 'arbor/s1/3' and st.active()[1].message == 'running on arbor/add', 'active: ' .. vim.inspect(st.active()))
check(st.on_progress({ token = 'arbor/s1/3', value = { kind = 'report', percentage = 40 } }, false) == 'add one — running on arbor/add (40%)',
  'progress report: ' .. tostring(st.last))
check(st.on_progress({ token = 'arbor/s1/3', value = { kind = 'end', message = 'idle' } }, false) == 'add one: idle'
  and #st.active() == 0 and st.last == 'add one: idle', 'progress end: ' .. tostring(st.last))
check(st.on_progress({ token = 'x', value = { kind = 'report' } }, false) == nil and st.on_progress({ token = 'y' }, false) == nil,
  'a report for no begun progress, or no value, shows nothing')

-- Discard: the question names the unaccepted files and what happens to them; the message
-- checks archived before branchDeleted (which is true then too).
local diff = { files = { { path = 'a.py' }, { path = 'b.py' }, { path = 'c.py' }, { path = 'd.py' } } }
local q = arbor.discard_prompt('aaaa1111', diff, false)
check(q:find('unaccepted changes in 4 files (a.py, b.py, c.py, …)', 1, true) and q:find('kept under refs/arbor/archive/', 1, true), 'prompt: ' .. q)
q = arbor.discard_prompt('aaaa1111', { files = {} }, true)
check(not q:find('unaccepted', 1, true) and q:find('DROPPED', 1, true), 'forced prompt: ' .. q)
local m = arbor.discard_message('aaaa1111', { branchDeleted = true, archived = 'refs/arbor/archive/arbor/x', worktreeRemoved = true }, false)
check(m == 'discarded aaaa1111; its work is kept at refs/arbor/archive/arbor/x (git log refs/arbor/archive/arbor/x)', 'archived: ' .. m)
m = arbor.discard_message('aaaa1111', { branchDeleted = true }, false)
check(m == 'discarded aaaa1111; branch deleted (another branch holds its commits)', 'deleted: ' .. m)
m = arbor.discard_message('aaaa1111', { branchDeleted = true }, true)
check(m:find('forced', 1, true), 'forced delete: ' .. m)

-- :ArborDiscard without ! asks (naming the files) and sends force=false; with ! force=true.
local sent = {}
local request = client.request
client.request = function(method, params, cb)
  table.insert(sent, { method = method, params = params })
  if method == 'arbor/session.diff' then
    cb(nil, { files = { { path = 'sum.txt' } } })
  elseif method == 'arbor/session.discard' then
    cb(nil, { branchDeleted = true, archived = 'refs/arbor/archive/arbor/r', session = { id = 'x1', task = 't', state = 'stopped', created = '1', lastSeq = 1 } })
  else
    cb({ message = 'unexpected ' .. method })
  end
end
local confirm, asked = vim.fn.confirm, {}
vim.fn.confirm = function(msg, choices)
  table.insert(asked, { msg = msg, choices = choices })
  return 1
end
local notes = {}
local notify = vim.notify
vim.notify = function(msg) table.insert(notes, msg) end
vim.cmd('ArborDiscard x1')
check(#asked == 1 and asked[1].msg:find('unaccepted changes in 1 file (sum.txt)', 1, true) and asked[1].choices:find('keep the work archived', 1, true),
  ':ArborDiscard asked ' .. vim.inspect(asked))
check(sent[2] and sent[2].method == 'arbor/session.discard' and sent[2].params.force == nil, ':ArborDiscard sent ' .. vim.inspect(sent))
check(notes[#notes]:find('its work is kept at refs/arbor/archive/arbor/r', 1, true), ':ArborDiscard said ' .. vim.inspect(notes))
sent, asked = {}, {}
vim.cmd('ArborDiscard! x1')
check(#asked == 1 and asked[1].msg:find('DROPPED', 1, true) and sent[2].params.force == true, ':ArborDiscard! ' .. vim.inspect({ asked, sent }))
-- Declining sends nothing.
sent = {}
vim.fn.confirm = function() return 2 end
vim.cmd('ArborDiscard x1')
check(#sent == 1 and sent[1].method == 'arbor/session.diff', 'a declined discard sent ' .. vim.inspect(sent))

-- A stopped parent is refused before the task is asked for; a failed create keeps the typed
-- task for the next prompt.
store.replace({ { id = 'dddd4444wwww', task = 'halted', state = 'stopped', created = '4' },
  { id = 'aaaa1111xxxx', task = 'root', state = 'idle', created = '1' } })
local inputs = {}
local ui_input = vim.ui.input
vim.ui.input = function(o, cb)
  table.insert(inputs, o)
  cb(o.answer_with)
end
notes, sent = {}, {}
arbor.run(nil, { parent = 'dddd4444' })
check(#inputs == 0 and #sent == 0 and notes[1]:find('dddd4444 is stopped: a subagent needs a live parent', 1, true),
  'stopped parent: ' .. vim.inspect({ inputs, sent, notes }))
client.request = function(method, params, cb)
  table.insert(sent, { method = method, params = params })
  cb({ code = -32006, message = 'session aaaa1111 is busy' })
end
vim.ui.input = function(o, cb)
  table.insert(inputs, o)
  cb('rename Foo to Bar')
end
arbor.run(nil, { parent = 'aaaa1111xxxx' })
check(#sent == 1 and sent[1].params.task == 'rename Foo to Bar' and sent[1].params.parent == 'aaaa1111xxxx', 'create sent ' .. vim.inspect(sent))
check(arbor.kept_task == 'rename Foo to Bar' and notes[#notes]:find('the task is kept', 1, true), 'kept: ' .. vim.inspect({ arbor.kept_task, notes }))
inputs = {}
vim.ui.input = function(o, cb)
  table.insert(inputs, o)
end
arbor.run()
check(inputs[1] and inputs[1].default == 'rename Foo to Bar', 'the next prompt offers the kept task: ' .. vim.inspect(inputs))
arbor.kept_task = nil

-- Code actions: the selection's text comes from the buffer (unsaved lines included).
local tmp = vim.fn.tempname() .. '.py'
vim.fn.writefile({ 'def add(a, b):', '    return a + b' }, tmp)
vim.cmd('edit ' .. vim.fn.fnameescape(tmp))
local buf = vim.api.nvim_get_current_buf()
vim.api.nvim_buf_set_lines(buf, 1, 2, false, { '    return a - b  # unsaved' })
local sel = arbor.selection_from_buffer({ uri = vim.uri_from_bufnr(buf), startLine = 0, endLine = 1, text = 'def add(a, b):\n    return a + b\n' })
check(sel.text == 'def add(a, b):\n    return a - b  # unsaved\n' and sel.startLine == 0 and sel.endLine == 1, 'selection_from_buffer: ' .. vim.inspect(sel))
local created
client.request = function(method, params, cb)
  created = params
  cb({ message = 'no daemon here' })
end
vim.ui.input = function(_, cb) cb('refactor it') end
vim.lsp.commands['arbor.newTask']({ arguments = { { task = '', dir = '/tmp', selection = { uri = vim.uri_from_bufnr(buf), startLine = 1, endLine = 1, text = '    return a + b\n' } } } }, { bufnr = buf })
check(created and created.selection.text == '    return a - b  # unsaved\n', '"Refactor with agent…" sent ' .. vim.inspect(created))
vim.cmd('bwipeout!')
-- "Spawn subagent on selection" offers only live sessions as parents.
local offered
local select = vim.ui.select
vim.ui.select = function(items, _, cb)
  offered = vim.tbl_map(function(s) return s.id end, items)
  cb(nil)
end
vim.lsp.commands['arbor.spawnSubagent']({ arguments = { { task = '', dir = '/tmp' } } }, {})
check(offered and #offered == 1 and offered[1] == 'aaaa1111xxxx', 'parents offered: ' .. vim.inspect(offered))
vim.ui.select = select
vim.ui.input = ui_input
arbor.kept_task = nil

-- The tree's <CR> and d reuse the window the previous one opened.
local buffers = require('arbor.buffers')
vim.cmd('tabnew')
local opened = {}
local function view(kind)
  return function(id)
    local b = buffers.scratch('arbor://unit-' .. kind .. '/' .. id)
    table.insert(opened, buffers.show(b, 'botright vsplit'))
  end
end
local tree_mod = require('arbor.tree')
local tb = tree_mod.open({ log = view('log'), diff = view('diff'), stop = view('x'), send = view('x'), fork = view('x'), run = view('x'),
  goal = view('x'), goal_show = view('x'), progress = view('x'), heartbeat = view('x'), heartbeats = view('x'), refresh = function() end,
  merge = view('x') })
vim.cmd('only')
local tree_win = vim.fn.bufwinid(tb)
local function press(row, key)
  vim.api.nvim_set_current_win(tree_win)
  vim.api.nvim_win_set_cursor(tree_win, { row, 0 })
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(key, true, false, true), 'x', false)
end
press(3, '<CR>')
press(4, '<CR>')
press(3, 'd')
press(4, 'd')
local wins = #vim.api.nvim_tabpage_list_wins(0)
check(#opened == 4 and wins == 2 and opened[1] == opened[2] and opened[2] == opened[3] and opened[3] == opened[4] and opened[1] ~= tree_win,
  'the tree opened ' .. wins .. ' windows for 4 views: ' .. vim.inspect(opened))
-- When the user closed that window, the next view opens one again (and that one is reused).
vim.api.nvim_win_close(opened[4], true)
press(3, '<CR>')
press(4, 'd')
check(#vim.api.nvim_tabpage_list_wins(0) == 2 and opened[5] == opened[6] and opened[5] ~= opened[4], 'after closing the view window: ' .. vim.inspect(opened))
vim.cmd('tabclose!')

-- :help arbor works, and doc/tags is what :helptags makes of doc/arbor.txt now.
local here = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h')
local doc = vim.fn.fnamemodify(here, ':h') .. '/doc'
local copy = vim.fn.tempname()
vim.fn.mkdir(copy, 'p')
vim.fn.writefile(vim.fn.readfile(doc .. '/arbor.txt', 'b'), copy .. '/arbor.txt', 'b')
vim.cmd('helptags ' .. vim.fn.fnameescape(copy))
local want, have = vim.fn.readfile(copy .. '/tags'), vim.fn.filereadable(doc .. '/tags') == 1 and vim.fn.readfile(doc .. '/tags') or {}
check(vim.deep_equal(want, have), 'doc/tags is stale: run `nvim --headless --clean -c "helptags extensions/nvim/doc" -c q` and commit it')
for _, topic in ipairs({ 'arbor', 'arbor-status', ':ArborDiscard' }) do
  local ok, err = pcall(vim.cmd, 'help ' .. topic)
  check(ok and vim.bo.filetype == 'help', ':help ' .. topic .. ': ' .. tostring(err))
  vim.cmd('helpclose')
end

-- Review by hunk. hunk_at maps a cursor line of either side to the hunk covering it.
local diff = require('arbor.diff')
local fdiff = { path = 'f.txt', status = 'modified', additions = 3, deletions = 2, hunks = {
  { oldStart = 1, oldLines = 5, newStart = 1, newLines = 5, lines = {} },   -- line 2 changed
  { oldStart = 12, oldLines = 7, newStart = 12, newLines = 8, lines = {} }, -- line 15 changed, one added
  { oldStart = 27, oldLines = 1, newStart = 28, newLines = 0, lines = {} }, -- line 27 removed
} }
check(diff.hunk_at(fdiff, 'head', 2) == 0 and diff.hunk_at(fdiff, 'head', 5) == 0 and diff.hunk_at(fdiff, 'head', 6) == nil, 'hunk_at head 1')
check(diff.hunk_at(fdiff, 'head', 19) == 1 and diff.hunk_at(fdiff, 'base', 18) == 1 and diff.hunk_at(fdiff, 'base', 19) == nil, 'hunk_at 2')
check(diff.hunk_at(fdiff, 'base', 27) == 2 and diff.hunk_at(fdiff, 'head', 28) == 2 and diff.hunk_at(fdiff, 'head', 29) == 2
  and diff.hunk_at(fdiff, 'head', 30) == nil, 'hunk_at a removal')
check(diff.hunk_at({ path = 'g', hunks = { { oldStart = 0, oldLines = 0, newStart = 1, newLines = 2 } } }, 'base', 1) == 0, 'hunk_at an added file')
-- The params of each action.
local method, params = diff.action('accept', 'hunk', 'S1', 'h1', { path = 'f.txt', index = 1 })
check(method == 'arbor/session.accept' and vim.deep_equal(params, { id = 'S1', head = 'h1', accepted = '', hunks = { 'f.txt#1' } }), 'accept hunk: ' .. vim.inspect(params))
method, params = diff.action('reject', 'file', 'S1', 'h1', { path = 'g.txt' }, 'acc1')
check(method == 'arbor/session.reject' and vim.deep_equal(params, { id = 'S1', head = 'h1', accepted = 'acc1', files = { 'g.txt' } }), 'reject file: ' .. vim.inspect({ method, params }))
method, params = diff.action('reject', 'session', 'S1', 'h1', {})
check(method == 'arbor/session.reject' and vim.deep_equal(params, { id = 'S1', head = 'h1', accepted = '' }), 'reject all: ' .. vim.inspect(params))
check(diff.done_message('reject', 'hunk', { path = 'f.txt', index = 0 }, { commit = 'abcdef1234' })
  == "rejected hunk 1 of f.txt: reverted on the session's branch as abcdef12 (the agent is told at its next turn)", 'reject message')
check(diff.error_text('accept', { code = P.CodeConflict, message = 'your working tree has uncommitted changes',
  data = { kind = 'dirty', into = '/repo', files = { 'a.py', 'b.py' } } })
  == 'accept: your working tree has uncommitted changes — uncommitted changes in /repo: a.py, b.py', 'error_text dirty')
check(diff.error_text('accept', { code = P.CodeConflict, message = '/repo has uncommitted changes in a.py',
  data = { kind = 'dirty', into = '/repo', files = { 'a.py' } } }) == 'accept: /repo has uncommitted changes in a.py', 'error_text: named already')
-- The patch buffer: each line's file and hunk.
local patch = table.concat({
  'diff --git a/f.txt b/f.txt', 'index 1..2 100644', '--- a/f.txt', '+++ b/f.txt',
  '@@ -1,5 +1,5 @@', ' line 1', '-line 2', '+LINE 2', ' line 3',
  '@@ -12,7 +12,8 @@', ' line 12', '-line 15', '+LINE 15', '+extra',
  'diff --git a/g.txt b/g.txt', 'new file mode 100644', '--- /dev/null', '+++ b/g.txt', '@@ -0,0 +1 @@', '+new', '' }, '\n')
local gdiff = { path = 'g.txt', status = 'added', additions = 1, deletions = 0, hunks = { { oldStart = 0, oldLines = 0, newStart = 1, newLines = 1 } } }
local res1 = { base = 'b0b0b0b0b0', head = 'h1h1h1h1h1', files = { fdiff, gdiff }, patch = patch }
local plines, powners, phunks = diff.render('the task', res1)
local function row_of_text(lines_, text)
  for i, l in ipairs(lines_) do
    if l == text then
      return i
    end
  end
end
local r15 = row_of_text(plines, '+LINE 15')
check(phunks[r15] and phunks[r15].file == fdiff and phunks[r15].index == 1, 'render: +LINE 15 is hunk 1 of f.txt: ' .. vim.inspect(phunks[r15]))
check(phunks[row_of_text(plines, '+LINE 2')].index == 0 and phunks[row_of_text(plines, '+new')].file == gdiff
  and phunks[row_of_text(plines, '+new')].index == 0 and not phunks[row_of_text(plines, '+++ b/g.txt')]
  and powners[row_of_text(plines, '+++ b/g.txt')] == gdiff, 'render: hunks of the patch lines')
check(plines[1]:find('2 files, b0b0b0b0..h1h1h1h1', 1, true), 'render header: ' .. plines[1])
local none = diff.render('t', { base = 'a', head = 'a', files = {}, patch = '', accepted = 'c0ffee00aa' })
check(table.concat(none, '\n'):find('nothing left to review', 1, true) and none[1]:find('accept of c0ffee00', 1, true), 'empty remaining diff: ' .. vim.inspect(none))

-- The review keys send those params with the head shown, then diff again and redraw.
local remaining = { res1, { base = 'acc1acc1', head = 'h1h1h1h1h1', accepted = 'acc1acc1', files = { fdiff }, patch = table.concat(vim.list_slice(vim.split(patch, '\n'), 1, 14), '\n') } }
sent = {}
client.request = function(m_, p_, cb)
  table.insert(sent, { method = m_, params = p_ })
  if m_ == 'arbor/session.diff' then
    cb(nil, remaining[1])
    if #remaining > 1 then
      table.remove(remaining, 1)
    end
  elseif m_ == 'arbor/session.fileAt' then
    cb(nil, { content = p_.side .. ' of ' .. p_.path .. '\nline 2\n' })
  else
    cb(nil, { commit = 'c0c0c0c0c0', files = { 'g.txt' } })
  end
end
notes = {}
store.replace({ { id = 'S1S1S1S1xx', task = 'the task', state = 'idle', branch = 'arbor/t', created = '1' } })
vim.cmd('tabnew')
diff.open('S1S1S1S1xx')
local pb = vim.fn.bufnr('arbor://diff/S1S1S1S1xx')
check(pb ~= -1 and vim.fn.bufwinid(pb) ~= -1, 'diff.open shows arbor://diff/S1S1S1S1xx')
vim.api.nvim_set_current_win(vim.fn.bufwinid(pb))
local function at(text)
  local row = row_of_text(vim.api.nvim_buf_get_lines(pb, 0, -1, false), text)
  check(row, 'the patch buffer lacks ' .. text .. ':\n' .. table.concat(vim.api.nvim_buf_get_lines(pb, 0, -1, false), '\n'))
  vim.api.nvim_win_set_cursor(0, { row, 0 })
end
local function key(k)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(k, true, false, true), 'x', false)
end
at('+LINE 15')
sent = {}
key('a')
check(sent[1] and sent[1].method == 'arbor/session.accept' and vim.deep_equal(sent[1].params, { id = 'S1S1S1S1xx', head = 'h1h1h1h1h1', accepted = '', hunks = { 'f.txt#1' } })
  and sent[2] and sent[2].method == 'arbor/session.diff', '`a` on a hunk line sent ' .. vim.inspect(sent))
check(notes[#notes]:find('accepted hunk 2 of f.txt onto your branch as c0c0c0c0', 1, true), '`a` said ' .. vim.inspect(notes))
check(vim.api.nvim_buf_get_lines(pb, 0, 1, false)[1]:find('accept of acc1acc1', 1, true) and not row_of_text(vim.api.nvim_buf_get_lines(pb, 0, -1, false), '+new'),
  'the patch buffer was not redrawn from the remaining diff')
at('+LINE 2')
sent = {}
key('X')
check(sent[1].method == 'arbor/session.reject' and vim.deep_equal(sent[1].params.files, { 'f.txt' }), '`X` sent ' .. vim.inspect(sent))
-- <CR> opens the side-by-side tab; `x` there rejects the hunk under the cursor of that side.
at('+LINE 2')
key('<CR>')
local hb = vim.fn.bufnr('arbor://head/S1S1S1S/f.txt')
hb = vim.fn.bufnr('arbor://head/S1S1S1S1/f.txt')
check(hb ~= -1 and vim.fn.bufwinid(hb) ~= -1 and vim.api.nvim_buf_get_lines(hb, 0, 1, false)[1] == 'head of f.txt', 'side-by-side head pane')
vim.api.nvim_set_current_win(vim.fn.bufwinid(hb))
vim.api.nvim_win_set_cursor(0, { 2, 0 })
sent = {}
key('x')
check(sent[1].method == 'arbor/session.reject' and vim.deep_equal(sent[1].params, { id = 'S1S1S1S1xx', head = 'h1h1h1h1h1', accepted = 'acc1acc1', hunks = { 'f.txt#0' } }),
  '`x` in the head pane sent ' .. vim.inspect(sent))
check(sent[3] and sent[3].method == 'arbor/session.fileAt', 'the tab was not drawn again after the reject: ' .. vim.inspect(sent))
-- ga asks first; declined, nothing is sent.
vim.fn.confirm = function() return 2 end
sent = {}
key('ga')
check(#sent == 0, 'a declined ga sent ' .. vim.inspect(sent))
vim.cmd('tabonly!')

-- Merge conflicts: the list, the tab of the three versions over the result, the retry.
local merge = require('arbor.merge')
check(merge.marker_line({ 'a', '<<<<<<< ours', 'x', '=======', 'y', '>>>>>>> theirs' }) == 2 and merge.marker_line({ 'a', '=======' }) == nil, 'marker_line')
local rdone, rleft = merge.resolutions({ ['a.txt'] = { 'resolved' }, ['b.txt'] = { '<<<<<<< HEAD', 'x', '=======', 'y', '>>>>>>> child' }, ['c.txt'] = {} })
check(vim.deep_equal(rdone, { ['a.txt'] = 'resolved\n', ['c.txt'] = '' }) and vim.deep_equal(rleft, { 'b.txt' }), 'resolutions: ' .. vim.inspect({ rdone, rleft }))
store.replace({ { id = 'PPPP0000pp', task = 'parent', state = 'idle', branch = 'arbor/parent', created = '1' },
  { id = 'CCCC1111cc', parent = 'PPPP0000pp', task = 'child', state = 'idle', branch = 'arbor/child', created = '2' } })
local conflict = { child = 'CCCC1111cc', parent = 'PPPP0000pp', files = {
  { path = 'conflict.txt', base = 'base\n', ours = 'parent\n', theirs = 'child\n',
    merged = '<<<<<<< ours\nparent\n=======\nchild\n>>>>>>> theirs\n' } } }
local merges = 0
sent = {}
client.request = function(m_, p_, cb)
  table.insert(sent, { method = m_, params = p_ })
  if m_ == 'arbor/session.merge' then
    merges = merges + 1
    if merges == 1 then
      cb({ code = P.CodeConflict, message = 'merge conflict', data = { kind = 'conflict', into = 'arbor/parent', files = { 'conflict.txt' } } })
    else
      cb(nil, { commit = 'm3m3m3m3m3', files = { 'conflict.txt' } })
    end
  else
    cb(nil, conflict)
  end
end
notes = {}
vim.cmd('ArborMerge CCCC1111') -- a prefix, as typed
check(sent[2] and sent[2].method == P.MethodSessionConflicts and sent[2].params.id == 'CCCC1111cc', 'conflicts asked: ' .. vim.inspect(sent))
local qf = vim.fn.getqflist({ items = 0, title = 0, context = 0 })
check(#qf.items == 1 and qf.title:find('1 file in conflict', 1, true) and qf.context.arbor_merge == 'CCCC1111cc' and qf.items[1].lnum == 1
  and vim.api.nvim_buf_get_name(qf.items[1].bufnr):find('arbor://merge/CCCC1111/conflict.txt', 1, true), 'quickfix: ' .. vim.inspect(qf))
check(notes[#notes]:find('1 file in conflict (conflict.txt)', 1, true), 'conflict message: ' .. vim.inspect(notes))
-- Retrying with the markers still there sends nothing and names the file.
sent = {}
vim.cmd('ArborMergeRetry')
check(#sent == 0 and notes[#notes]:find('conflict.txt still has conflict markers', 1, true), 'retry with markers: ' .. vim.inspect({ sent, notes }))
-- :cfirst shows the result; its tab opens with ours, base and theirs read-only.
vim.cmd('cfirst')
vim.wait(1000, function() return vim.t.arbor_merge ~= nil end, 10)
local tabwins = vim.api.nvim_tabpage_list_wins(0)
local names = {}
for _, w in ipairs(tabwins) do
  local b = vim.api.nvim_win_get_buf(w)
  table.insert(names, vim.api.nvim_buf_get_name(b):match('arbor://merge/CCCC1111/(.*)') .. (vim.bo[b].modifiable and ' (editable)' or ''))
end
table.sort(names)
check(vim.t.arbor_merge == 'CCCC1111cc:conflict.txt' and vim.deep_equal(names, { 'base/conflict.txt', 'conflict.txt (editable)', 'ours/conflict.txt', 'theirs/conflict.txt' }),
  'the merge tab: ' .. vim.inspect(names))
local ours = vim.fn.bufnr('arbor://merge/CCCC1111/ours/conflict.txt')
check(vim.api.nvim_buf_get_lines(ours, 0, -1, false)[1] == 'parent' and vim.bo[ours].buftype == 'nofile', 'ours pane')
local resb = vim.api.nvim_get_current_buf()
check(vim.api.nvim_buf_get_name(resb):find('arbor://merge/CCCC1111/conflict.txt', 1, true) and vim.api.nvim_win_get_cursor(0)[1] == 1, 'cursor on the result')
vim.api.nvim_buf_set_lines(resb, 0, -1, false, { 'resolved' })
vim.cmd('write')
check(not vim.bo[resb].modified, ':w keeps the result')
sent = {}
vim.cmd('ArborMergeRetry')
check(sent[1] and sent[1].method == 'arbor/session.merge' and vim.deep_equal(sent[1].params, { id = 'CCCC1111cc', resolutions = { ['conflict.txt'] = 'resolved\n' } }),
  'retry sent ' .. vim.inspect(sent))
check(notes[#notes]:find('merged CCCC1111 into PPPP0000 (arbor/parent) as m3m3m3m3', 1, true) and #vim.api.nvim_list_tabpages() == 1
  and vim.fn.bufnr('arbor://merge/CCCC1111/conflict.txt') == -1 and #vim.fn.getqflist() == 0, 'after the merge: ' .. vim.inspect(notes))
vim.cmd('silent! only')

-- A binary conflict has no text to resolve: the retry asks for a side; :ArborMergeTake gives
-- it, and the retry sends it with the heads in conflict and no resolutions.
local bconflict = { child = 'CCCC1111cc', parent = 'PPPP0000pp', parentHead = 'p4p4p4p4', childHead = 'c5c5c5c5',
  files = { { path = 'logo.bin', binary = true, merged = '' } } }
merges = 0
client.request = function(m_, p_, cb)
  table.insert(sent, { method = m_, params = p_ })
  if m_ == 'arbor/session.merge' then
    merges = merges + 1
    if merges == 1 then
      cb({ code = P.CodeConflict, message = 'merge conflict', data = { kind = 'conflict', into = 'arbor/parent', files = { 'logo.bin' } } })
    else
      cb(nil, { commit = 'm4m4m4m4m4', files = { 'logo.bin' } })
    end
  else
    cb(nil, bconflict)
  end
end
vim.cmd('ArborMerge CCCC1111')
sent = {}
vim.cmd('ArborMergeRetry')
check(#sent == 0 and notes[#notes]:find('logo.bin is binary', 1, true), 'retry of an untaken binary file: ' .. vim.inspect({ sent, notes[#notes] }))
vim.cmd('ArborMergeTake mine logo.bin')
check(notes[#notes]:find('want ours or theirs', 1, true), 'take with a bad side: ' .. notes[#notes])
vim.cmd('ArborMergeTake theirs logo.bin')
vim.cmd('ArborMergeRetry')
check(sent[1] and vim.deep_equal(sent[1].params, { id = 'CCCC1111cc', take = { ['logo.bin'] = 'theirs' }, parentHead = 'p4p4p4p4', childHead = 'c5c5c5c5' }),
  'retry with a side taken sent ' .. vim.inspect(sent))
vim.cmd('silent! only')

client.request = request
vim.fn.confirm = confirm
vim.notify = notify
store.replace(saved_sessions)
io.stdout:write('unit_review: ok\n')
