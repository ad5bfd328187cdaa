-- Drives the plugin as a user would, against the real `arbor lsp` (ARBOR_BIN) whose daemon talks
-- to the scripted model set up by run.sh. Ends with :cquit 0 (pass) or :cquit 1 and the reason
-- in $ARBOR_TEST_OUT.
local out = os.getenv('ARBOR_TEST_OUT') or '/dev/stderr'
local bin = assert(os.getenv('ARBOR_BIN'), 'ARBOR_BIN')

local function finish(ok, msg)
  local f = io.open(out, 'w')
  f:write((ok and 'PASS ' or '') .. msg .. '\n')
  f:close()
  vim.cmd(ok and 'cquit 0' or 'cquit 1')
end

local function buffer_text(bufnr)
  if not bufnr or not vim.api.nvim_buf_is_valid(bufnr) then
    return ''
  end
  return table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), '\n')
end

-- Whether tree line l is the row of session id: its id column, not a mention such as a fork's
-- "(fork of <id> @N)".
local function row_of(l, id)
  return l:find('] ' .. id:sub(1, 8), 1, true) ~= nil
end

-- Waits for fn; on timeout fails with `what`, or, when `what` is nil, returns and leaves the
-- check (with its own message) to the caller.
local function wait_for(what, timeout, fn)
  local ok = vim.wait(timeout, fn, 50)
  if not ok and what then
    error(what, 0)
  end
end

-- Any warning or error the plugin shows the user fails the test.
local complaints = {}
local notify = vim.notify
vim.notify = function(msg, level, opts)
  if level and level >= vim.log.levels.WARN then
    table.insert(complaints, msg)
  end
  return notify(msg, level, opts)
end

local function run()
  local arbor = require('arbor')
  arbor.setup({ cmd = { bin, 'lsp' } })
  local passed = {}

  -- The tree buffer, opened before the task, must follow arbor/sessionTree on its own.
  vim.cmd('ArborSessions')
  local tree = vim.fn.bufnr(require('arbor.tree').name)
  if tree == -1 then
    error(':ArborSessions opened no arbor://sessions buffer', 0)
  end
  if vim.bo[tree].buftype ~= 'nofile' or vim.bo[tree].modifiable then
    error('the tree buffer must be buftype=nofile and nomodifiable', 0)
  end
  table.insert(passed, 'tree buffer')

  local created
  local t0 = vim.loop.hrtime()
  vim.cmd('ArborRun add one and one')
  -- ArborRun's callback stores the session; catch its id from the store.
  local client = require('arbor.client')
  wait_for('arbor/session.create did not answer within 20s (is the daemon up? see the log above)', 20000, function()
    if not client.id() then
      error('`' .. bin .. ' lsp` exited before arbor/session.create answered (see the log above)', 0)
    end
    for _, s in ipairs(arbor.store.all()) do
      if s.task == 'add one and one' then
        created = s
        return true
      end
    end
  end)
  table.insert(passed, 'ArborRun created ' .. created.id:sub(1, 8))

  local line
  wait_for(nil, 60000, function()
    for _, l in ipairs(vim.api.nvim_buf_get_lines(tree, 0, -1, false)) do
      if row_of(l, created.id) then
        line = l
        local s = arbor.store.get(created.id)
        if s and (s.state == 'failed' or s.state == 'stopped') then
          return true
        end
        return l:find(' idle ', 1, true) ~= nil and l:find('arbor/', 1, true) ~= nil
      end
    end
  end)
  local s = arbor.store.get(created.id)
  if not line or not line:find(' idle ', 1, true) then
    error(string.format('the tree never showed the session idle within 60s; last line: %q; session: %s',
      line or '(none)', vim.inspect(s)), 0)
  end
  if not line:find('arbor/', 1, true) then
    error('the tree line has no arbor/… branch: ' .. line, 0)
  end
  table.insert(passed, string.format('tree shows idle on %s after %d ms', s.branch, (vim.loop.hrtime() - t0) / 1e6))

  -- The kernel's rlm('write the tests', name='tests') started a subagent: a child row below.
  local child
  wait_for(nil, 30000, function()
    for _, l in ipairs(vim.api.nvim_buf_get_lines(tree, 0, -1, false)) do
      if l:find('└─', 1, true) and l:find('tests', 1, true) and l:find('arbor/', 1, true) then
        child = l
        return true
      end
    end
  end)
  if not child then
    error('the tree shows no child row for the subagent "tests":\n' .. buffer_text(tree), 0)
  end
  table.insert(passed, 'subagent row')

  -- The transcript replays the session's events: the kernel printed 2 and the model answered.
  local log = require('arbor.log').open(created.id)
  wait_for(nil, 15000, function()
    local text = buffer_text(log)
    return text:find('the sum is two', 1, true) ~= nil and text:find('\n2\n', 1, true) ~= nil
  end)
  local text = buffer_text(log)
  if not text:find('the sum is two', 1, true) then
    error('the transcript lacks the final answer "the sum is two":\n' .. text, 0)
  end
  if not text:find('\n2\n', 1, true) then
    error('the transcript lacks the kernel output "2" of print(1+1):\n' .. text, 0)
  end
  table.insert(passed, 'transcript')

  -- The diff against the merge-base shows the file the kernel wrote in the worktree.
  arbor.diff(created.id)
  local diffbuf
  wait_for(nil, 15000, function()
    diffbuf = vim.fn.bufnr('arbor://diff/' .. created.id)
    return diffbuf ~= -1 and buffer_text(diffbuf):find('sum.txt', 1, true) ~= nil
  end)
  if diffbuf == -1 or not buffer_text(diffbuf):find('sum.txt', 1, true) then
    error(':ArborDiff did not show sum.txt: ' .. buffer_text(diffbuf ~= -1 and diffbuf or nil), 0)
  end
  table.insert(passed, 'diff')

  -- <CR> on the file line opens base and head side by side in a new tab, in diff mode.
  vim.api.nvim_set_current_win(vim.fn.bufwinid(diffbuf))
  for i, l in ipairs(vim.api.nvim_buf_get_lines(diffbuf, 0, -1, false)) do
    if l:match('^added%s+sum.txt') then
      vim.api.nvim_win_set_cursor(0, { i, 0 })
      break
    end
  end
  local tab = vim.api.nvim_get_current_tabpage()
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes('<CR>', true, false, true), 'x', false)
  wait_for(nil, 10000, function()
    return vim.api.nvim_get_current_tabpage() ~= tab
  end)
  local head = vim.fn.bufnr('arbor://head/' .. created.id:sub(1, 8) .. '/sum.txt')
  if vim.api.nvim_get_current_tabpage() == tab or head == -1 then
    error('<CR> on the file did not open base and head side by side', 0)
  end
  if buffer_text(head) ~= '2' or not vim.wo[vim.fn.bufwinid(head)].diff then
    error(string.format('the head side shows %q (want "2") or is not in diff mode', buffer_text(head)), 0)
  end
  vim.cmd('tabclose')
  table.insert(passed, 'side-by-side diff')

  -- `a` on the diff's first line accepts everything onto the user's branch (main of the repo).
  vim.api.nvim_set_current_win(vim.fn.bufwinid(diffbuf))
  vim.api.nvim_win_set_cursor(0, { 1, 0 })
  local confirm = vim.fn.confirm
  vim.fn.confirm = function() return 1 end
  vim.api.nvim_feedkeys('a', 'x', false)
  vim.fn.confirm = confirm
  local shown
  wait_for(nil, 15000, function()
    shown = vim.fn.system({ 'git', 'show', 'HEAD:sum.txt' })
    return vim.v.shell_error == 0
  end)
  if shown ~= '2\n' then
    error('accept from the diff buffer did not bring sum.txt onto the branch: git show says ' .. vim.inspect(shown), 0)
  end
  table.insert(passed, 'accept')

  -- :ArborFork makes a new session on its own branch, shown in the tree.
  local before = #arbor.store.all()
  vim.cmd('ArborFork ' .. created.id)
  local fork
  wait_for(nil, 15000, function()
    for _, x in ipairs(arbor.store.all()) do
      if x.id ~= created.id and x.task == created.task and x.branch ~= created.branch then
        fork = x
        return true
      end
    end
  end)
  if not fork or #arbor.store.all() <= before then
    error(':ArborFork made no new session', 0)
  end
  local origin = 'fork of ' .. created.id:sub(1, 8) .. ' @'
  wait_for(nil, 5000, function()
    for _, l in ipairs(vim.api.nvim_buf_get_lines(tree, 0, -1, false)) do
      if row_of(l, fork.id) and l:find(origin, 1, true) then
        return true
      end
    end
  end)
  if not buffer_text(tree):find(origin, 1, true) then
    error('the tree does not say where the fork came from ("' .. origin .. '…"):\n' .. buffer_text(tree), 0)
  end
  table.insert(passed, 'fork ' .. fork.id:sub(1, 8))

  -- :ArborDiscard! removes the fork's worktree.
  local confirm2 = vim.fn.confirm
  vim.fn.confirm = function() return 1 end
  vim.cmd('ArborDiscard! ' .. fork.id)
  wait_for(nil, 15000, function()
    return fork.worktree and vim.fn.isdirectory(fork.worktree) == 0
  end)
  vim.fn.confirm = confirm2 -- asked once the remaining diff is read
  if vim.fn.isdirectory(fork.worktree) == 1 then
    error(':ArborDiscard! left the worktree ' .. fork.worktree, 0)
  end
  table.insert(passed, 'discard')

  -- Code actions on a selection of a file: the daemon offers the agent actions, and running
  -- "Refactor with agent…" asks for the task and starts a session carrying the selection.
  vim.cmd('edit calc.py')
  local buf = vim.api.nvim_get_current_buf()
  require('arbor.client').attach_buffer(buf)
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    range = { start = { line = 0, character = 0 }, ['end'] = { line = 1, character = 0 } },
    context = { diagnostics = {} },
  }
  local answers = vim.lsp.buf_request_sync(buf, 'textDocument/codeAction', params, 10000) or {}
  local actions = {}
  for _, a in pairs(answers) do
    vim.list_extend(actions, a.result or {})
  end
  local titles = vim.tbl_map(function(a) return a.title end, actions)
  local refactor
  for _, a in ipairs(actions) do
    if a.title == 'Refactor with agent…' then
      refactor = a
    end
  end
  if not refactor or not vim.tbl_contains(titles, 'Spawn subagent on selection') then
    error('code actions on a selection: got ' .. vim.inspect(titles), 0)
  end
  local input = vim.ui.input
  vim.ui.input = function(_, on_confirm) on_confirm('add one and one') end
  vim.lsp.commands[refactor.command.command](refactor.command, { bufnr = buf })
  vim.ui.input = input
  local second
  wait_for(nil, 20000, function()
    for _, x in ipairs(arbor.store.all()) do
      if x.id ~= created.id and x.id ~= fork.id and x.task == 'add one and one' then
        second = x
        return true
      end
    end
  end)
  if not second then
    error('"Refactor with agent…" started no session', 0)
  end
  table.insert(passed, 'code action started ' .. second.id:sub(1, 8))

  -- :ArborSend reaches the first session (it answers again), :ArborStop stops it.
  -- The message's own record already moves lastSeq on, so wait for the turn it starts to end:
  -- the transcript shows the session running and then idle again after the message.
  local before = #vim.api.nvim_buf_get_lines(log, 0, -1, false)
  local function ran_again()
    local after = table.concat(vim.api.nvim_buf_get_lines(log, before, -1, false), '\n')
    local msg = after:find('and once more', 1, true)
    local running = msg and after:find('→ running', msg, true)
    return running and after:find('→ idle', running, true) and arbor.store.get(created.id).state == 'idle'
  end
  vim.cmd('ArborSend ' .. created.id:sub(1, 8) .. ' and once more')
  wait_for(nil, 30000, ran_again)
  if not ran_again() then
    error(':ArborSend: the session did not run again:\n' .. buffer_text(log), 0)
  end
  vim.cmd('ArborStop ' .. created.id:sub(1, 8))
  wait_for(nil, 20000, function()
    for _, l in ipairs(vim.api.nvim_buf_get_lines(tree, 0, -1, false)) do
      if row_of(l, created.id) and l:find(' stopped ', 1, true) then
        return true
      end
    end
  end)
  if arbor.store.get(created.id).state ~= 'stopped' then
    error(':ArborStop: the tree does not show the session stopped: ' .. vim.inspect(arbor.store.get(created.id))
      .. '\n' .. buffer_text(tree), 0)
  end
  table.insert(passed, 'send + stop')

  -- Harness review. Under the default "review" policy the kernel's writes to the workspace
  -- harness are proposals: :ArborProposals lists them, <CR> shows one as a diff, `x` rejects it
  -- with a reason; the daemon records the user's rejection and the workspace harness stays as it
  -- was. :ArborProposalAccept applies the other one.
  local repo = client.root_dir()
  local ruled
  arbor.run('write the team rules', { on_created = function(x) ruled = x end })
  wait_for('arbor/session.create of "write the team rules" did not answer within 20s', 20000, function()
    return ruled ~= nil
  end)
  wait_for(nil, 60000, function()
    local x = arbor.store.get(ruled.id)
    return x and (x.state == 'idle' or x.state == 'failed' or x.state == 'stopped')
  end)
  if arbor.store.get(ruled.id).state ~= 'idle' then
    error('the session writing the team rules did not go idle: ' .. vim.inspect(arbor.store.get(ruled.id)), 0)
  end
  vim.cmd('ArborProposals')
  local plist = vim.fn.bufnr(require('arbor.proposals').name)
  if plist == -1 or vim.bo[plist].buftype ~= 'nofile' or vim.bo[plist].modifiable then
    error(':ArborProposals opened no nomodifiable scratch buffer ' .. require('arbor.proposals').name, 0)
  end
  local function proposal_row(what)
    for i, l in ipairs(vim.api.nvim_buf_get_lines(plist, 0, -1, false)) do
      local id = l:match('^(p%x+)%s+pending%s+workspace%s+create note ' .. what:gsub('%-', '%%-'))
      if id then
        return i, id, l
      end
    end
  end
  wait_for(nil, 10000, function()
    return proposal_row('team-rule') and proposal_row('style-rule')
  end)
  local row, pid, pline = proposal_row('team-rule')
  local _, pid2 = proposal_row('style-rule')
  if not row or not pid2 then
    error(':ArborProposals does not list the two pending workspace notes:\n' .. buffer_text(plist), 0)
  end
  if not pline:find('session ' .. ruled.id:sub(1, 8), 1, true) or not pline:find('(Team rule)', 1, true) then
    error('the proposal row lacks its title or session ' .. ruled.id:sub(1, 8) .. ': ' .. pline, 0)
  end
  table.insert(passed, ':ArborProposals lists ' .. pid .. ' and ' .. pid2)

  -- <CR> on its row opens the proposal as a unified diff of the harness.
  vim.api.nvim_set_current_win(vim.fn.bufwinid(plist))
  vim.api.nvim_win_set_cursor(0, { row, 0 })
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes('<CR>', true, false, true), 'x', false)
  local pdiff
  wait_for(nil, 10000, function()
    pdiff = vim.fn.bufnr('arbor://proposal/' .. pid)
    return pdiff ~= -1 and buffer_text(pdiff):find('+Run the tests.', 1, true) ~= nil
  end)
  if pdiff == -1 then
    error('<CR> on the proposal opened no arbor://proposal/' .. pid .. ' buffer', 0)
  end
  local dlines = vim.api.nvim_buf_get_lines(pdiff, 0, -1, false)
  if not vim.tbl_contains(dlines, '+Run the tests.') or not vim.tbl_contains(dlines, '+++ b/notes/team-rule.md') then
    error('the proposal diff lacks "+++ b/notes/team-rule.md" and "+Run the tests.":\n' .. buffer_text(pdiff), 0)
  end
  if vim.bo[pdiff].filetype ~= 'diff' or vim.fn.bufwinid(pdiff) == -1 then
    error('the proposal diff is not shown with filetype=diff: ' .. vim.bo[pdiff].filetype, 0)
  end
  table.insert(passed, 'proposal diff')

  -- `x` on its row in the list asks for a reason and rejects it.
  local said = {}
  local notify_before = vim.notify
  vim.notify = function(msg, level, opts)
    table.insert(said, msg)
    return notify_before(msg, level, opts)
  end
  vim.api.nvim_set_current_win(vim.fn.bufwinid(plist))
  row = proposal_row('team-rule')
  vim.api.nvim_win_set_cursor(0, { row, 0 })
  local input, asked = vim.fn.input, nil
  vim.fn.input = function(o)
    asked = o
    return 'not a rule we keep'
  end
  vim.api.nvim_feedkeys('x', 'x', false)
  vim.fn.input = input
  local function said_it(want)
    for _, m in ipairs(said) do
      if m:find(want, 1, true) then
        return m
      end
    end
  end
  wait_for(nil, 10000, function()
    return said_it('rejected ' .. pid) and not proposal_row('team-rule') and proposal_row('style-rule')
  end)
  if type(asked) ~= 'table' or not tostring(asked.prompt):find(pid, 1, true) then
    error('`x` did not ask for a reason naming ' .. pid .. ': ' .. vim.inspect(asked), 0)
  end
  if not said_it('rejected ' .. pid) or not said_it('not a rule we keep') then
    error('no message said ' .. pid .. ' was rejected with the reason: ' .. vim.inspect(said), 0)
  end
  if proposal_row('team-rule') or not proposal_row('style-rule') then
    error('after the reject the list should hold only the style rule:\n' .. buffer_text(plist), 0)
  end
  if not buffer_text(pdiff):find('# rejected by user: not a rule we keep', 1, true) then
    error('the open diff buffer does not show the rejection:\n' .. buffer_text(pdiff), 0)
  end
  -- The daemon's record, read with the CLI: rejected by the user, with the reason; nothing applied.
  local function recorded(id)
    local raw = vim.fn.system({ bin, 'proposals', '--status', 'all', '--json', '--dir', repo })
    if vim.v.shell_error ~= 0 then
      error('arbor proposals --status all --json: ' .. raw, 0)
    end
    for _, p in ipairs(vim.fn.json_decode(raw)) do
      if p.id == id then
        return p
      end
    end
    error('arbor proposals --status all does not list ' .. id .. ': ' .. raw, 0)
  end
  local rec = recorded(pid)
  if rec.status ~= 'rejected' or rec.decidedBy ~= 'user' or rec.reason ~= 'not a rule we keep' or (rec.applied or '') ~= '' then
    error('arbor proposals records ' .. pid .. ' as ' .. vim.inspect(rec), 0)
  end
  local refs = vim.fn.system({ 'git', '-C', repo, 'for-each-ref', 'refs/arbor/harness/workspace' })
  if vim.v.shell_error ~= 0 or refs ~= '' then
    error('the workspace harness ref moved after a reject: ' .. vim.inspect(refs), 0)
  end
  -- The proposing session's transcript has the rejection too.
  local rlog = require('arbor.log').open(ruled.id)
  wait_for(nil, 10000, function()
    return buffer_text(rlog):find('harness proposal ' .. pid .. ' rejected by user: not a rule we keep', 1, true) ~= nil
  end)
  if not buffer_text(rlog):find('harness proposal ' .. pid .. ' rejected by user: not a rule we keep', 1, true) then
    error('the transcript does not show the rejection of ' .. pid .. ':\n' .. buffer_text(rlog), 0)
  end
  table.insert(passed, 'reject ' .. pid .. ' from the list: recorded rejected by user, harness ref unmoved')

  -- :ArborProposalAccept applies the other one (no gate is configured): the ref now holds it.
  vim.cmd('ArborProposalAccept ' .. pid2)
  wait_for(nil, 15000, function()
    return said_it(pid2 .. ' applied to the workspace harness as ') ~= nil
  end)
  rec = recorded(pid2)
  local head_ref = vim.fn.system({ 'git', '-C', repo, 'rev-parse', '--verify', '-q', 'refs/arbor/harness/workspace' }):gsub('%s+$', '')
  if rec.status ~= 'applied' or rec.decidedBy ~= 'user' or rec.applied == nil or head_ref ~= rec.applied then
    error(string.format('accept of %s: recorded %s; workspace ref %q', pid2, vim.inspect(rec), head_ref), 0)
  end
  local msg = said_it(pid2 .. ' applied to the workspace harness as ')
  if not msg:find(rec.applied:sub(1, 10), 1, true) then
    error('the accept message does not name the commit ' .. rec.applied:sub(1, 10) .. ': ' .. msg, 0)
  end
  local note = vim.fn.system({ 'git', '-C', repo, 'show', 'refs/arbor/harness/workspace:notes/style-rule.md' })
  vim.fn.system({ 'git', '-C', repo, 'cat-file', '-e', 'refs/arbor/harness/workspace:notes/team-rule.md' })
  if not note:find('Keep functions short.', 1, true) or vim.v.shell_error == 0 then
    error('the workspace harness should hold the style rule and not the rejected team rule: ' .. note, 0)
  end
  table.insert(passed, 'accept ' .. pid2 .. ' applied as ' .. rec.applied:sub(1, 10))

  -- :ArborRefine in the session's transcript refines that session. The scripted model answers
  -- no refine JSON, so the daemon reports why it proposed nothing, and the plugin says so.
  vim.api.nvim_set_current_win(vim.fn.bufwinid(rlog))
  vim.cmd('ArborRefine the team rules')
  local want = 'refine of ' .. ruled.id:sub(1, 8) .. ' (session scope'
  wait_for(nil, 60000, function() return said_it(want) ~= nil end)
  local rmsg = said_it(want)
  if not rmsg or not said_it('refining ' .. ruled.id:sub(1, 8) .. ' on the team rules') or rmsg:find(' 0 model calls', 1, true) then
    error(':ArborRefine in the transcript did not report a refine of ' .. ruled.id:sub(1, 8) .. ': ' .. vim.inspect(said), 0)
  end
  vim.notify = notify_before
  table.insert(passed, ':ArborRefine: ' .. rmsg)

  -- The daemon goes away under the editor (`arbor daemon stop`): the plugin reconnects, which
  -- starts a new daemon, and the tree comes back from it with the sessions as they were.
  local before_id = client.id()
  local out = vim.fn.system({ bin, 'daemon', 'stop' })
  if vim.v.shell_error ~= 0 then
    error('arbor daemon stop: ' .. out, 0)
  end
  wait_for(nil, 20000, function()
    local x = arbor.store.get(created.id)
    return client.id() ~= nil and client.id() ~= before_id and x ~= nil and x.state == 'stopped'
      and vim.fn.bufnr(require('arbor.tree').name) ~= -1
  end)
  if client.id() == nil or client.id() == before_id then
    error('the plugin did not reconnect after the daemon stopped', 0)
  end
  local listed
  arbor.refresh(function(err) listed = err == nil end)
  wait_for(nil, 10000, function() return listed ~= nil end)
  if not listed or not arbor.store.get(second.id) then
    error('after reconnecting, arbor/sessions did not list the sessions', 0)
  end
  table.insert(passed, 'reconnect after the daemon stopped')

  -- An arbor.json with a setup command: the create is refused until trusted; the prompt shows
  -- the command; "Trust and continue" grants it and the create runs, and so does the command.
  -- The command runs in the session's sandbox, where only its worktree is writable: the marker
  -- is left there, and there is no worktree before trust.
  vim.fn.writefile({ vim.fn.json_encode({ worktree = { command = 'touch setup-ran' } }) }, 'arbor.json')
  local trust = require('arbor.trust')
  local shown = {}
  trust.confirm = function(msg)
    table.insert(shown, msg)
    return true
  end
  local trusted_session
  arbor.run('add one and one', { on_created = function(x) trusted_session = x end })
  wait_for('the create in the untrusted repository did not succeed after trusting it', 30000, function()
    return trusted_session ~= nil
  end)
  if #shown ~= 1 or not shown[1]:find('touch setup-ran', 1, true) then
    error('the trust prompt did not show the command once: ' .. vim.inspect(shown), 0)
  end
  if vim.fn.filereadable(trusted_session.worktree .. '/setup-ran') ~= 1 then
    error('the trusted setup command did not run', 0)
  end
  os.remove('arbor.json')
  table.insert(passed, 'trust prompt')

  -- A workspace gate that fails: `a` on a pending proposal accepts it, the gate still judges it
  -- and turns it down; the plugin warns with the gate's reason and the harness ref stays put.
  vim.fn.writefile({ vim.fn.json_encode({ harness = { workspace = { gate = 'echo the suite failed; exit 3' } } }) }, 'arbor.json')
  local gated
  arbor.run('write the team rules', { on_created = function(x) gated = x end })
  wait_for('the session under a gated workspace did not start', 30000, function() return gated ~= nil end)
  wait_for(nil, 60000, function()
    local x = arbor.store.get(gated.id)
    return x and (x.state == 'idle' or x.state == 'failed' or x.state == 'stopped')
  end)
  vim.cmd('ArborProposals')
  local grow, gpid
  local function gated_row()
    for i, l in ipairs(vim.api.nvim_buf_get_lines(plist, 0, -1, false)) do
      local id = l:match('^(p%x+)%s+pending%s+workspace%s+create note team%-rule')
      if id and l:find('session ' .. gated.id:sub(1, 8), 1, true) then
        return i, id
      end
    end
  end
  wait_for(nil, 10000, function()
    grow, gpid = gated_row()
    return grow ~= nil
  end)
  if not grow then
    error('no pending team-rule proposal of ' .. gated.id:sub(1, 8) .. ' in the list:\n' .. buffer_text(plist), 0)
  end
  said = {}
  vim.notify = function(msg, level, opts)
    table.insert(said, msg)
    if level and level >= vim.log.levels.WARN and msg:find(gpid .. ' was not applied', 1, true) then
      return -- the warning this step expects; any other still fails the test
    end
    return notify_before(msg, level, opts)
  end
  vim.api.nvim_set_current_win(vim.fn.bufwinid(plist))
  vim.api.nvim_win_set_cursor(0, { grow, 0 })
  vim.fn.confirm = function() return 1 end
  vim.api.nvim_feedkeys('a', 'x', false)
  vim.fn.confirm = confirm
  local gmsg
  wait_for(nil, 60000, function()
    gmsg = said_it(gpid .. ' was not applied: rejected by the branch check: ')
    return gmsg ~= nil
  end)
  vim.notify = notify_before
  if not gmsg or not gmsg:find('exit 3', 1, true) then
    error('the accept the gate failed did not warn with the gate\'s reason: ' .. vim.inspect(said), 0)
  end
  rec = recorded(gpid)
  if rec.status ~= 'rejected' or rec.decidedBy ~= 'branch-check' or type(rec.gate) ~= 'table' or rec.gate.passed ~= false
    or rec.gate.exitCode ~= 3 then
    error('arbor proposals records the gated accept of ' .. gpid .. ' as ' .. vim.inspect(rec), 0)
  end
  local after = vim.fn.system({ 'git', '-C', repo, 'rev-parse', '--verify', '-q', 'refs/arbor/harness/workspace' }):gsub('%s+$', '')
  if after ~= head_ref then
    error('the workspace harness ref moved after the gate refused: ' .. head_ref .. ' -> ' .. after, 0)
  end
  -- `:ArborProposals all` lists it decided; `d` shows the gate's verdict and output over its diff.
  vim.cmd('ArborProposals all')
  local drow
  wait_for(nil, 10000, function()
    for i, l in ipairs(vim.api.nvim_buf_get_lines(plist, 0, -1, false)) do
      if l:match('^' .. gpid .. '%s+rejected%s+workspace') then
        drow = i
        return true
      end
    end
  end)
  if not drow or not buffer_text(plist):find('rejected by the branch check: branch check `echo the suite failed; exit 3` failed (exit 3)', 1, true) then
    error(':ArborProposals all does not show ' .. gpid .. ' rejected by the gate:\n' .. buffer_text(plist), 0)
  end
  vim.api.nvim_set_current_win(vim.fn.bufwinid(plist))
  vim.api.nvim_win_set_cursor(0, { drow, 0 })
  vim.api.nvim_feedkeys('d', 'x', false)
  local gdiff
  wait_for(nil, 10000, function()
    gdiff = vim.fn.bufnr('arbor://proposal/' .. gpid)
    return gdiff ~= -1 and buffer_text(gdiff):find('#   the suite failed', 1, true) ~= nil
  end)
  if gdiff == -1 or not vim.tbl_contains(vim.api.nvim_buf_get_lines(gdiff, 0, -1, false), '+Run the tests.') then
    error('`d` on the gated proposal does not show the gate output over the diff:\n' .. buffer_text(gdiff ~= -1 and gdiff or nil), 0)
  end
  os.remove('arbor.json')
  table.insert(passed, 'gate refuses an accepted ' .. gpid .. ': ' .. gmsg)

  -- Goals. :ArborGoal asks for the objective, the budgets (checked here: a bad item is named and
  -- asked again) and an end condition; pause and resume reach the daemon; a second goal asks
  -- before it replaces the first; the session then writes done.txt, the end condition passes and
  -- the goal is complete, claimed and verified. Each step is checked in the daemon (`arbor goal
  -- ID --json`), the tree, the goal view, the progress table and the transcript.
  local chased
  arbor.run('chase a goal', { on_created = function(x) chased = x end })
  wait_for('arbor/session.create of "chase a goal" did not answer within 20s', 20000, function() return chased ~= nil end)
  wait_for(nil, 60000, function()
    local x = arbor.store.get(chased.id)
    return x and x.state == 'idle'
  end)
  local cid = chased.id
  local function daemon_goal()
    local raw = vim.fn.system({ bin, 'goal', cid, '--json' })
    if vim.v.shell_error ~= 0 then
      error('arbor goal ' .. cid .. ' --json: ' .. raw, 0)
    end
    local d = vim.fn.json_decode(raw)
    if d.objective then
      return d
    end
    return d.goal ~= vim.NIL and d.goal or nil
  end
  local function tree_row(id)
    for _, l in ipairs(vim.api.nvim_buf_get_lines(tree, 0, -1, false)) do
      if row_of(l, id) then
        return l
      end
    end
    return ''
  end
  local heard, prompts, answers = {}, {}, {}
  local function heard_it(part)
    for _, m in ipairs(heard) do
      if m:find(part, 1, true) then
        return m
      end
    end
  end
  vim.notify = function(msg, level, opts)
    table.insert(heard, msg)
    if level and level >= vim.log.levels.WARN and (msg:find('budget item 1 "tokens=5k"', 1, true)
      or msg:find("goal is complete, not paused or stalled or budget_limited", 1, true)
      or msg:find('heartbeat: schedule "every 10q"', 1, true) or msg:find('field 4 (month) "13"', 1, true)) then
      return -- the warnings these steps expect; any other still fails the test
    end
    return notify_before(msg, level, opts)
  end
  local ui_input = vim.ui.input
  vim.ui.input = function(o, on_confirm)
    table.insert(prompts, o.prompt)
    on_confirm(table.remove(answers, 1))
  end
  answers = { 'keep going', 'tokens=5k', 'tokens=50000,turns=20,wall=2h,cost=5', '' }
  vim.cmd('ArborGoal ' .. cid:sub(1, 8))
  wait_for(nil, 15000, function() return heard_it('goal active on ' .. cid:sub(1, 8) .. ': keep going') ~= nil end)
  local g = daemon_goal()
  if not g or g.status ~= 'active' or g.objective ~= 'keep going' or g.tokenBudget ~= 50000 or g.turnBudget ~= 20
    or g.wallBudgetMs ~= 7200000 or g.costBudget ~= 5 or (g['until'] or '') ~= '' then
    error(':ArborGoal: the daemon records ' .. vim.inspect(g) .. '; said ' .. vim.inspect(heard), 0)
  end
  local bad = heard_it('budget item 1 "tokens=5k": want a whole number of tokens above zero')
  local asked = 0
  for _, pr in ipairs(prompts) do
    if pr:find('Budgets', 1, true) then
      asked = asked + 1
    end
  end
  if not bad or asked ~= 2 or #answers ~= 0 then
    error(':ArborGoal did not name the bad budget item and ask again: prompts ' .. vim.inspect(prompts) .. '; said ' .. vim.inspect(heard), 0)
  end
  wait_for(nil, 10000, function() return tree_row(cid):find('◎ goal active', 1, true) or tree_row(cid):find('◎ goal backing off', 1, true) end)
  if not tree_row(cid):find('◎ goal', 1, true) then
    error('the tree row does not show the goal: ' .. tree_row(cid), 0)
  end
  table.insert(passed, ':ArborGoal set keep going (bad budget item named, asked again): ' .. tree_row(cid):match('◎ [^\n]*'))

  vim.cmd('ArborGoalPause ' .. cid:sub(1, 8))
  wait_for(nil, 10000, function() return heard_it('goal of ' .. cid:sub(1, 8) .. ' paused') ~= nil end)
  g = daemon_goal()
  if not g or g.status ~= 'paused' then
    error(':ArborGoalPause: the daemon records ' .. vim.inspect(g), 0)
  end
  wait_for(nil, 10000, function() return tree_row(cid):find('◎ goal paused', 1, true) end)
  if not tree_row(cid):find('◎ goal paused', 1, true) then
    error('the tree row does not show the goal paused: ' .. tree_row(cid), 0)
  end
  vim.cmd('ArborGoalResume ' .. cid:sub(1, 8))
  wait_for(nil, 10000, function() return heard_it('goal of ' .. cid:sub(1, 8) .. ' active') ~= nil end)
  g = daemon_goal()
  if not g or g.status ~= 'active' then
    error(':ArborGoalResume: the daemon records ' .. vim.inspect(g), 0)
  end
  -- The resumed goal takes a turn that changes nothing and backs off.
  wait_for(nil, 30000, function()
    g = daemon_goal()
    return g and g.turns >= 2 and g.waiting == 'backoff'
  end)
  if not g or g.turns < 2 or g.waiting ~= 'backoff' then
    error('the resumed goal took no turn and did not back off: ' .. vim.inspect(g), 0)
  end
  table.insert(passed, ':ArborGoalPause / :ArborGoalResume: paused, then active, ' .. g.turns .. ' turns, backing off')

  local confirm_prompts = {}
  vim.fn.confirm = function(msg)
    table.insert(confirm_prompts, msg)
    return 1
  end
  answers = { 'turns=5', 'test -f done.txt' }
  vim.cmd('ArborGoal ' .. cid:sub(1, 8) .. ' write done.txt')
  wait_for(nil, 15000, function() return heard_it(' on ' .. cid:sub(1, 8) .. ': write done.txt') ~= nil end)
  vim.fn.confirm = confirm
  if #confirm_prompts ~= 1 or not confirm_prompts[1]:find('already has a goal (active): keep going', 1, true) then
    error(':ArborGoal over an active goal did not ask to replace it: ' .. vim.inspect(confirm_prompts), 0)
  end
  wait_for(nil, 60000, function()
    g = daemon_goal()
    return g and g.status ~= 'active'
  end)
  if not g or g.status ~= 'complete' or g.objective ~= 'write done.txt' or g.claimed ~= true or g.verified ~= true
    or g.evidence ~= 'done.txt written' or g.turnBudget ~= 5 or g['until'] ~= 'test -f done.txt' then
    error('the replacing goal did not end complete, claimed and verified: ' .. vim.inspect(g), 0)
  end
  wait_for(nil, 10000, function() return tree_row(cid):find('◎ goal complete', 1, true) end)
  if not tree_row(cid):find('◎ goal complete', 1, true) then
    error('the tree row does not show the goal complete: ' .. tree_row(cid), 0)
  end
  table.insert(passed, ':ArborGoal replaced it after asking; complete, claimed and verified')

  vim.cmd('ArborGoalShow ' .. cid:sub(1, 8))
  local gbuf = vim.fn.bufnr('arbor://goal/' .. cid)
  local gwant = { 'objective: write done.txt', 'status:    complete', 'budget:    5 turns', 'until:     `test -f done.txt`',
    'success:   claimed by the model: yes; verified: yes', 'evidence:  done.txt written', 'last check: `test -f done.txt` passed', 'set by:    user' }
  wait_for(nil, 10000, function() return gbuf ~= -1 and buffer_text(gbuf):find('last check:', 1, true) ~= nil end)
  for _, want in ipairs(gwant) do
    if gbuf == -1 or not buffer_text(gbuf):find(want, 1, true) then
      error(':ArborGoalShow lacks ' .. vim.inspect(want) .. ':\n' .. buffer_text(gbuf ~= -1 and gbuf or nil), 0)
    end
  end
  if vim.bo[gbuf].buftype ~= 'nofile' or vim.bo[gbuf].modifiable then
    error('the goal view must be a nomodifiable scratch buffer', 0)
  end
  table.insert(passed, ':ArborGoalShow')

  vim.cmd('ArborProgress ' .. cid:sub(1, 8))
  local pbuf = vim.fn.bufnr('arbor://progress/' .. cid)
  local cli = vim.fn.json_decode(vim.fn.system({ bin, 'progress', cid, '--json' }))
  wait_for(nil, 10000, function() return pbuf ~= -1 and buffer_text(pbuf):find('SEQ', 1, true) ~= nil end)
  local rows, kinds = 0, {}
  for _, l in ipairs(vim.api.nvim_buf_get_lines(pbuf, 0, -1, false)) do
    local kind = l:match('^%s*%d+%s+%d+:%d+:%d+%s+(%S+)')
    if kind then
      rows = rows + 1
      kinds[kind] = (kinds[kind] or 0) + 1
    end
  end
  local text_p = buffer_text(pbuf)
  if rows < #cli.points or not kinds.goal_set or not kinds.verified or not kinds.goal_changed
    or not text_p:find('verified%s+passed%s+%d+%s+%$%d') then
    error(string.format(':ArborProgress shows %d rows (the daemon has %d points), kinds %s:\n%s', rows, #cli.points,
      vim.inspect(kinds), text_p), 0)
  end
  table.insert(passed, ':ArborProgress: ' .. rows .. ' rows')

  local glog = require('arbor.log').open(cid)
  local lwant = { '◎ goal (set by user): keep going — budget 50000 tokens, 20 turns, 2h, $5.00',
    '◎ goal (set by user): write done.txt — budget 5 turns; done when `test -f done.txt` passes; replaces the previous goal',
    '◎ goal paused: paused by the user', '◎ goal backs off ', '✓ end condition `test -f done.txt` passed',
    '(after the model claimed success)', '◎ goal complete' }
  wait_for(nil, 10000, function() return buffer_text(glog):find('◎ goal complete', 1, true) ~= nil end)
  for _, want in ipairs(lwant) do
    if not buffer_text(glog):find(want, 1, true) then
      error('the transcript lacks ' .. vim.inspect(want) .. ':\n' .. buffer_text(glog), 0)
    end
  end
  table.insert(passed, 'transcript renders the goal events')

  -- A resume the daemon refuses: its message is shown in full.
  vim.cmd('ArborGoalResume ' .. cid:sub(1, 8))
  wait_for(nil, 10000, function() return heard_it('goal resume: ') ~= nil end)
  local refusal = heard_it('goal resume: ')
  if not refusal or not refusal:find("goal is complete, not paused or stalled or budget_limited", 1, true) then
    error('the refused resume did not show the daemon\'s reason: ' .. vim.inspect(heard), 0)
  end
  vim.cmd('ArborGoalClear ' .. cid:sub(1, 8))
  wait_for(nil, 10000, function() return heard_it('goal of ' .. cid:sub(1, 8) .. ' cleared') ~= nil end)
  if daemon_goal() ~= nil then
    error(':ArborGoalClear: the daemon still has a goal: ' .. vim.inspect(daemon_goal()), 0)
  end
  wait_for(nil, 10000, function() return not tree_row(cid):find('◎', 1, true) end)
  if tree_row(cid):find('◎', 1, true) then
    error('the tree row still shows a goal after the clear: ' .. tree_row(cid), 0)
  end
  -- Heartbeats: a schedule that is neither an interval nor a cron expression is named and asked
  -- again; one the daemon refuses shows its reason; "every 2s" is created and delivered; the list
  -- shows it; `x` on its row deletes it. Each step is checked with `arbor heartbeats ID --json`.
  local function daemon_heartbeats()
    local raw = vim.fn.system({ bin, 'heartbeats', cid, '--json' })
    if vim.v.shell_error ~= 0 then
      error('arbor heartbeats --json: ' .. raw, 0)
    end
    local d = vim.fn.json_decode(raw).heartbeats
    return d ~= vim.NIL and d or {}
  end
  prompts = {}
  answers = { 'every 10q', '*/15 * * 13 *' }
  vim.cmd('ArborHeartbeat ' .. cid:sub(1, 8) .. ' look at the build')
  wait_for(nil, 10000, function() return heard_it('field 4 (month) "13"') ~= nil end)
  local named = heard_it('heartbeat: schedule "every 10q": want "every 10m"')
  local refused = heard_it('field 4 (month) "13"')
  if not named or not refused or #prompts ~= 2 or #daemon_heartbeats() ~= 0 then
    error(':ArborHeartbeat: the bad schedule was not named and asked again, or the daemon\'s refusal not shown: '
      .. vim.inspect({ prompts = prompts, heard = heard, daemon = daemon_heartbeats() }), 0)
  end
  answers = { 'every 2s' }
  vim.cmd('ArborHeartbeat ' .. cid:sub(1, 8) .. ' look at the build')
  wait_for(nil, 10000, function() return heard_it(' on ' .. cid:sub(1, 8) .. ', every 2s: next due ') ~= nil end)
  local beats = daemon_heartbeats()
  if #beats ~= 1 or beats[1].every ~= '2s' or beats[1].instruction ~= 'look at the build' or beats[1].scheduled ~= true then
    error(':ArborHeartbeat: the daemon records ' .. vim.inspect(beats) .. '; said ' .. vim.inspect(heard), 0)
  end
  local hid = beats[1].id
  wait_for(nil, 20000, function()
    beats = daemon_heartbeats()
    return #beats == 1 and beats[1].delivered >= 1
  end)
  if #beats ~= 1 or beats[1].delivered < 1 then
    error('the heartbeat was never delivered: ' .. vim.inspect(beats), 0)
  end
  vim.cmd('ArborHeartbeats ' .. cid:sub(1, 8))
  local hlist = vim.fn.bufnr('arbor://heartbeats')
  local hrow
  wait_for(nil, 10000, function()
    for i, l in ipairs(vim.api.nvim_buf_get_lines(hlist, 0, -1, false)) do
      if l:find('^' .. hid .. '  ' .. cid:sub(1, 8) .. '  every 2s%s+next due %d+:%d+:%d+ · %d+/%d+ runs delivered · %d+ pending$') then
        hrow = i
        return true
      end
    end
  end)
  if not hrow or not buffer_text(hlist):find('    look at the build', 1, true) then
    error(':ArborHeartbeats does not list ' .. hid .. ':\n' .. buffer_text(hlist ~= -1 and hlist or nil), 0)
  end
  vim.api.nvim_set_current_win(vim.fn.bufwinid(hlist))
  vim.api.nvim_win_set_cursor(0, { hrow, 0 })
  vim.fn.confirm = function() return 1 end
  vim.api.nvim_feedkeys('x', 'x', false)
  vim.fn.confirm = confirm
  wait_for(nil, 10000, function() return heard_it('deleted heartbeat ' .. hid) ~= nil end)
  if #daemon_heartbeats() ~= 0 then
    error('`x` in the heartbeat list did not delete it: ' .. vim.inspect(daemon_heartbeats()), 0)
  end
  wait_for(nil, 10000, function() return buffer_text(hlist):find('no heartbeats', 1, true) ~= nil end)
  if not buffer_text(hlist):find('no heartbeats', 1, true) then
    error('the heartbeat list was not redrawn after the delete:\n' .. buffer_text(hlist), 0)
  end
  table.insert(passed, ':ArborHeartbeat (bad schedule named, daemon refusal shown), delivered ' .. beats[1].delivered
    .. ' run(s), :ArborHeartbeats, x deleted ' .. hid)

  vim.ui.input = ui_input
  vim.notify = notify_before
  table.insert(passed, 'refused resume shown (' .. refusal .. '); :ArborGoalClear')

  -- Give late answers (e.g. the tree's arbor/sessions) a moment, then check nothing went wrong.
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
