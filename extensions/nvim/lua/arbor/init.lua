-- Arbor for Neovim (0.7.2 and later): run recursive coding agents from the editor. The daemon
-- does the work; this plugin starts `arbor lsp` and shows the session tree, transcripts and diffs.
--
--   require('arbor').setup{ cmd = { 'arbor', 'lsp' } }
--   :ArborRun {task}   :ArborSessions   :ArborLog {id}   :ArborDiff {id}   :ArborStop {id}   :ArborSend {id} {text}
--   :ArborTrust [dir]  (a repository's commands, interpreter, sandbox and key routing run only once trusted)
--   :ArborProposals [status]   :ArborProposalAccept [pid]   :ArborProposalReject [pid [reason]]   :ArborRefine [focus]
--   :ArborGoal [id [objective]]   :ArborGoalPause/Resume/Clear [id]   :ArborGoalShow [id]   :ArborProgress [id]
--   :ArborHeartbeat [id [instruction]]   :ArborHeartbeats [id]   :ArborHeartbeatDelete [hid]
local P = require('arbor.protocol')
local client = require('arbor.client')
local store = require('arbor.store')

local M = {}

M.protocol = P
M.store = store

--- setup{cmd=, cmd_env=, model=, attach_buffers=}; every key is optional.
function M.setup(opts)
  client.config = vim.tbl_extend('force', client.config, opts or {})
  local group = vim.api.nvim_create_augroup('arbor', { clear = true })
  if client.config.attach_buffers then
    vim.api.nvim_create_autocmd('BufReadPost', {
      group = group,
      callback = function(args)
        if client.id() then
          client.attach_buffer(args.buf)
        end
      end,
    })
  end
end

local function warn(msg)
  client.notify(msg, vim.log.levels.WARN)
end

--- The warning for a daemon whose kernels cannot be sandboxed here (nil when they can).
function M.sandbox_warning(st)
  local sb = type(st) == 'table' and st.sandbox or nil
  if type(sb) ~= 'table' or sb.available then
    return nil
  end
  return "kernels run unsandboxed — model-written code has your user's full access. " .. (sb.reason or '')
end

-- On every (re)connect: say so when the daemon cannot sandbox kernels.
client.on_init(function()
  client.request(P.MethodDaemonStatus, {}, function(err, st)
    local note = not err and M.sandbox_warning(st)
    if note then
      warn(note)
    end
  end)
end)

--- The selection of a range command ({line1, line2} 1-based, inclusive) as a protocol Selection.
local function selection(line1, line2)
  local bufnr = vim.api.nvim_get_current_buf()
  local name = vim.api.nvim_buf_get_name(bufnr)
  if name == '' then
    return nil
  end
  local lines = vim.api.nvim_buf_get_lines(bufnr, line1 - 1, line2, false)
  return { uri = vim.uri_from_bufnr(bufnr), startLine = line1 - 1, endLine = line2 - 1, text = table.concat(lines, '\n') }
end

--- Why session s cannot take a subagent ("stopped", "failed", "discarded"), or nil when it can.
function M.parent_refusal(s)
  if type(s) ~= 'table' or store.can_parent(s) then
    return nil
  end
  return store.discarded(s) and 'discarded' or tostring(s.state)
end

-- The task of the last create that failed, offered again by the next prompt for a task.
M.kept_task = nil

--- Starts a session on task in the repository of the cwd. opts: parent, name, model, dir,
--- selection, range = {line1, line2}, on_created(session), on_error(err). Without a task it
--- asks for one (offering the task of a create that failed). A parent that is stopped, failed
--- or discarded is refused before anything is asked.
function M.run(task, opts)
  opts = opts or {}
  if opts.parent then
    local why = M.parent_refusal(store.find(opts.parent))
    if why then
      warn(string.format('%s is %s: a subagent needs a live parent (:ArborSessions shows which are)', opts.parent:sub(1, 8), why))
      return
    end
  end
  if task == nil or task == '' then
    vim.ui.input({ prompt = opts.parent and 'Subagent task: ' or 'Arbor task: ', default = M.kept_task }, function(input)
      if input and input ~= '' then
        M.run(input, opts)
      end
    end)
    return
  end
  local params = {
    task = task,
    dir = opts.dir or client.root_dir(),
    parent = opts.parent,
    name = opts.name,
    model = opts.model or client.config.model,
    selection = opts.selection or (opts.range and selection(opts.range[1], opts.range[2])) or nil,
  }
  require('arbor.trust').request(client.request, P.MethodSessionCreate, params, function(err, s)
    if err then
      M.kept_task = task
      client.notify('could not start the task: ' .. client.error_message(err)
        .. ' (the task is kept: :ArborRun without one offers it again)', vim.log.levels.ERROR)
      if opts.on_error then
        opts.on_error(err)
      end
      return
    end
    if M.kept_task == task then
      M.kept_task = nil
    end
    store.upsert(s)
    client.notify(string.format('started %s on %s', s.id:sub(1, 8), s.branch or '?'))
    if opts.on_created then
      opts.on_created(s)
    end
  end)
end

--- Fetches the session list (arbor/sessions) into the store.
function M.refresh(cb)
  client.request(P.MethodSessions, {}, function(err, res)
    if err then
      warn('sessions: ' .. client.error_message(err))
    else
      -- Upserted, not replaced: a session created after the list was read may already be
      -- in the store (its tree delta can overtake this reply), and sessions are never deleted.
      store.apply({ full = false, sessions = (res or {}).sessions or {} })
    end
    if cb then
      cb(err)
    end
  end)
end

--- Opens the session tree; it follows arbor/sessionTree notifications from then on.
function M.sessions()
  client.start()
  local bufnr = require('arbor.tree').open(M)
  M.refresh()
  return bufnr
end

--- Calls cb with id, else the session under the cursor in the tree, else the session of the
--- transcript in the current window, else one the user picks (of those keep(s) accepts, when given).
local function resolve(id, what, cb, keep)
  if id and id ~= '' then
    cb(id)
    return
  end
  if vim.bo.filetype == 'arbor-sessions' then
    local cur = require('arbor.tree').current()
    if cur then
      cb(cur)
      return
    end
  end
  local shown = vim.api.nvim_buf_get_name(0):match('^arbor://log/(.+)$')
  if shown then
    cb(shown)
    return
  end
  local list = vim.tbl_filter(keep or function()
    return true
  end, store.all())
  if #list == 0 then
    warn('no sessions to choose from; give an id')
    return
  end
  vim.ui.select(list, {
    prompt = what,
    format_item = function(s)
      return string.format('%s  %-8s %s', s.id:sub(1, 8), s.state, store.title(s))
    end,
  }, function(s)
    if s then
      cb(s.id)
    end
  end)
end

function M.log(id)
  resolve(id, 'Transcript of:', function(x)
    require('arbor.log').open(x)
  end)
end

function M.diff(id)
  resolve(id, 'Diff of:', function(x)
    require('arbor.diff').open(x)
  end)
end

function M.stop(id)
  resolve(id, 'Stop:', function(x)
    client.request(P.MethodSessionStop, { id = x }, function(err)
      if err then
        warn('stop: ' .. client.error_message(err))
      else
        client.notify('stopped ' .. x:sub(1, 8))
      end
    end)
  end, function(s)
    return P.live_states[s.state] == true
  end)
end

function M.send(id, text, mode)
  resolve(id, 'Send to:', function(x)
    if not text or text == '' then
      vim.ui.input({ prompt = 'Message to ' .. x:sub(1, 8) .. ': ' }, function(input)
        if input and input ~= '' then
          M.send(x, input, mode)
        end
      end)
      return
    end
    client.request(P.MethodSessionSend, { id = x, text = text, mode = mode or 'auto' }, function(err, res)
      if err then
        warn('send: ' .. client.error_message(err))
      else
        client.notify('message ' .. ((res or {}).status or 'sent'))
      end
    end)
  end)
end

--- Forks session id (default: the current one) at event at_seq (default: its latest);
--- on_done(fork) after (a fork from a transcript opens the fork's transcript there).
function M.fork(id, at_seq, on_done)
  resolve(id, 'Fork:', function(x)
    require('arbor.trust').request(client.request, P.MethodSessionFork, { id = x, atSeq = at_seq }, function(err, s)
      if err then
        warn('fork: ' .. client.error_message(err))
      elseif type(s) == 'table' and s.id then
        store.upsert(s)
        client.notify('forked ' .. x:sub(1, 8) .. (at_seq and (' at event #' .. at_seq) or '') .. ' as ' .. s.id:sub(1, 8)
          .. ' on ' .. (s.branch or '?'))
        if on_done then
          on_done(s)
        end
      end
    end)
  end)
end

--- :ArborFork [id] [seq]: in a transcript a lone number (or @N, #N) is the event to fork at,
--- and the fork's transcript opens there.
function M.fork_command(args)
  local words = vim.split(vim.trim(args or ''), '%s+', { trimempty = true })
  local id, seq = words[1], words[2]
  local in_log = require('arbor.log').session_of() ~= nil
  if #words == 1 and (id:match('^[@#]%d+$') or (in_log and id:match('^%d+$'))) then
    id, seq = nil, id
  end
  if seq then
    local n = tonumber((seq:gsub('^[@#]', '')))
    if not n then
      warn('fork: the event must be a seq number (as the transcript shows it, #N), not ' .. seq)
      return
    end
    seq = n
  end
  M.fork(id, seq, (in_log or seq) and function(s) require('arbor.log').open(s.id) end or nil)
end

--- Merges child session id (default: the current one) into its parent's branch.
function M.merge(id)
  resolve(id, 'Merge into its parent:', function(x)
    require('arbor.merge').merge(x)
  end, function(s)
    return type(s.parent) == 'string' and s.parent ~= '' and not store.discarded(s)
  end)
end

--- Sends the resolved results of the pending merge of id (default: the merge of the current
--- tab, or the only one) again: arbor/session.merge {id, resolutions}.
function M.merge_retry(id)
  require('arbor.merge').retry(id)
end

--- What discarding a session will do, for the question asked first: res is its remaining
--- diff (nil when it could not be read). Without force, work no other branch holds is kept
--- under refs/arbor/archive/…; with force it is dropped.
function M.discard_prompt(short, res, force)
  local files = {}
  for _, f in ipairs((type(res) == 'table' and res.files) or {}) do
    table.insert(files, f.path)
  end
  local what = ''
  if #files > 0 then
    local list = table.concat(vim.list_slice(files, 1, 3), ', ') .. (#files > 3 and ', …' or '')
    what = string.format(' It has unaccepted changes in %d file%s (%s).', #files, #files == 1 and '' or 's', list)
  end
  if force then
    return string.format('Discard session %s and its worktree?%s With ! its commits are DROPPED, not archived.', short, what)
  end
  return string.format('Discard session %s and its worktree?%s Commits no other branch holds are kept under refs/arbor/archive/.', short, what)
end

--- The message after a discard. archived is checked first: the branch is deleted then too,
--- but its work is kept under that ref.
function M.discard_message(short, res, force)
  res = type(res) == 'table' and res or {}
  local where
  if type(res.archived) == 'string' and res.archived ~= '' then
    where = 'its work is kept at ' .. res.archived .. ' (git log ' .. res.archived .. ')'
  elseif res.branchDeleted then
    where = force and 'branch deleted with its work (forced)' or 'branch deleted (another branch holds its commits)'
  else
    where = 'branch kept'
  end
  return 'discarded ' .. short .. '; ' .. where
end

--- Discards session id: asks first, saying what happens to its unaccepted work (see
--- discard_prompt). Without force that work is archived, with force dropped.
--- opts.on_done(err, res) is called with the daemon's answer.
function M.discard(id, force, opts)
  opts = opts or {}
  resolve(id, 'Discard:', function(x)
    local short = x:sub(1, 8)
    client.request(P.MethodSessionDiff, { id = x }, function(_, diff)
      if vim.fn.confirm(M.discard_prompt(short, diff, force), force and '&Drop it\n&Cancel' or '&Discard, keep the work archived\n&Cancel', 2) ~= 1 then
        return
      end
      client.request(P.MethodSessionDiscard, { id = x, force = force or nil }, function(err, res)
        if err then
          warn('discard: ' .. client.error_message(err))
        else
          res = type(res) == 'table' and res or {}
          if type(res.session) == 'table' then
            store.upsert(res.session)
          end
          client.notify(M.discard_message(short, res, force))
        end
        if opts.on_done then
          opts.on_done(err, res)
        end
      end)
    end)
  end, function(s)
    return not store.discarded(s)
  end)
end

--- Runs /refine on session id (default: the current one, see resolve) with focus (optional):
--- a model proposes harness edits from what went wrong since the last refine; the scope's
--- policy applies them or leaves them for review (:ArborProposals). opts: scope, on_done(err, res).
function M.refine(focus, id, opts)
  opts = opts or {}
  resolve(id, 'Refine:', function(x)
    client.notify('refining ' .. x:sub(1, 8) .. (focus and focus ~= '' and (' on ' .. focus) or '') .. '…')
    local params = { session = x, focus = focus ~= '' and focus or nil, scope = opts.scope }
    client.request(P.MethodRefineRun, params, function(err, res)
      if err then
        warn('refine: ' .. client.error_message(err))
      else
        client.notify(require('arbor.proposals').refined(x, res))
        if require('arbor.proposals').bufnr() then
          require('arbor.proposals').refresh()
        end
      end
      if opts.on_done then
        opts.on_done(err, res)
      end
    end)
  end)
end

--- Opens the harness panel (entries per scope and kind, their versions, diffs and rollback, the
--- proposals with evidence and gate verdict, "Refine now"): of session id, else of the session
--- under the cursor in the tree or of the transcript in the window, else without a session scope.
function M.harness(id, opts)
  client.start()
  opts = opts or {}
  if not id or id == '' then
    if vim.bo.filetype == 'arbor-sessions' then
      id = require('arbor.tree').current()
    end
    id = id or require('arbor.log').session_of()
  end
  return require('arbor.harness').open(vim.tbl_extend('force', opts, { session = id ~= '' and id or nil }))
end

--- Opens the list of harness proposals (status: pending by default, applied, rejected or all).
function M.proposals(status)
  return require('arbor.proposals').open({ status = status })
end

--- Accepts proposal pid (default: the one under the cursor in the proposals list or of the diff buffer).
function M.accept_proposal(pid)
  local props = require('arbor.proposals')
  pid = (pid and pid ~= '') and pid or (props.current() or {}).id
  if not pid then
    warn('accept: give a proposal id (:ArborProposals lists them)')
    return
  end
  props.accept(pid)
end

--- Rejects proposal pid (default: the one under the cursor in the proposals list or of the diff
--- buffer) with reason (optional).
function M.reject_proposal(pid, reason)
  local props = require('arbor.proposals')
  pid = (pid and pid ~= '') and pid or (props.current() or {}).id
  if not pid then
    warn('reject: give a proposal id (:ArborProposals lists them)')
    return
  end
  props.reject(pid, reason)
end

--- Reviews the guarded settings of the repository of dir (default: the cwd's) and trusts them
--- once the user confirms.
function M.trust(dir)
  local trust = require('arbor.trust')
  client.request(P.MethodTrustGet, { dir = dir or client.root_dir() }, function(err, st)
    if err then
      warn('trust: ' .. client.error_message(err))
      return
    end
    if #st.settings == 0 then
      client.notify(st.file .. ' sets nothing that needs trust')
      return
    end
    if st.trusted then
      client.notify(st.repo .. ' is trusted with its current settings')
      return
    end
    vim.schedule(function()
      if not trust.confirm(trust.prompt(st)) then
        return
      end
      client.request(P.MethodTrustGrant, { dir = st.repo, hash = st.hash }, function(gerr)
        if gerr then
          warn('trust: ' .. client.error_message(gerr))
        else
          client.notify('trusted ' .. st.repo)
        end
      end)
    end)
  end)
end

--- :ArborStatus: the daemon's pid, version, socket, sessions, clients and sandbox, as a message.
function M.daemon_status()
  client.request(P.MethodDaemonStatus, {}, function(err, st)
    if err then
      warn('status: ' .. client.error_message(err))
      return
    end
    local sb = type(st.sandbox) == 'table' and st.sandbox or {}
    local sandbox = sb.available and 'kernels sandboxed (bwrap)' or ('kernels UNSANDBOXED: ' .. (sb.reason or 'unknown'))
    client.notify(string.format('daemon %s pid %d: %d live of %d sessions, %d clients, socket %s; %s',
      st.version or '?', st.pid or 0, st.live or 0, st.sessions or 0, st.clients or 0, st.socket or '?', sandbox))
  end)
end

--- The selection a code action carries, with its text read from the buffer when the file is
--- loaded: the daemon reads the file on disk, which lacks what was typed and not saved. Lines
--- startLine..endLine (0-based, inclusive), each ending in a newline, as the daemon sends them.
function M.selection_from_buffer(sel)
  if type(sel) ~= 'table' or type(sel.uri) ~= 'string' then
    return sel
  end
  local ok, bufnr = pcall(vim.uri_to_bufnr, sel.uri)
  if not ok or not vim.api.nvim_buf_is_loaded(bufnr) then
    return sel
  end
  local n = vim.api.nvim_buf_line_count(bufnr)
  local first = math.max(0, math.min(sel.startLine or 0, n - 1))
  local last = math.max(first, math.min(sel.endLine or first, n - 1))
  local lines = vim.api.nvim_buf_get_lines(bufnr, first, last + 1, false)
  return vim.tbl_extend('force', sel, { text = table.concat(lines, '\n') .. '\n' })
end

-- Code actions from the daemon ("Refactor with agent…", "Spawn subagent on selection") carry the
-- arbor/session.create params; run them here so an empty task can be asked for first, with the
-- selection's text as the buffer holds it. Only live sessions are offered as parents.
local function code_action(parent_needed)
  return function(command)
    local a = (command.arguments or {})[1] or {}
    local opts = { dir = a.dir, selection = M.selection_from_buffer(a.selection), parent = a.parent, name = a.name, model = a.model }
    if parent_needed and not opts.parent then
      resolve(nil, 'Subagent of:', function(p)
        opts.parent = p
        M.run(a.task, opts)
      end, store.can_parent)
      return
    end
    M.run(a.task, opts)
  end
end
vim.lsp.commands[P.CmdNewTask] = code_action(false)
vim.lsp.commands[P.CmdSpawnSubagent] = code_action(true)

--- Gives session id (default: the current one, see resolve) a goal: the objective (asked for when
--- not given), budgets in the CLI's --budget grammar (tokens=N,turns=N,wall=2h,cost=5; asked for,
--- checked here, asked again while wrong) and an end condition (a command; asked for). A goal that
--- still holds the session (active or paused) is replaced only once the user confirms.
--- opts: budget, until (skip those questions), on_done(err, goal).
function M.goal(id, objective, opts)
  opts = opts or {}
  local goal = require('arbor.goal')
  local function done(err, g)
    if opts.on_done then
      opts.on_done(err, g)
    end
  end
  resolve(id, 'Goal for:', function(x)
    local function send(params)
      client.request(P.MethodGoalSet, params, function(err, g)
        if err then
          warn('goal: ' .. client.error_message(err))
        else
          client.notify(string.format('goal %s on %s: %s', g.status, x:sub(1, 8), g.objective))
          goal.refresh(x)
        end
        done(err, g)
      end)
    end
    local function ask_until(params)
      local function go(cmd)
        if cmd == nil then
          return
        end
        params['until'] = vim.trim(cmd) ~= '' and vim.trim(cmd) or nil
        client.request(P.MethodGoalGet, { session = x }, function(err, res)
          local held = not err and type(res) == 'table' and type(res.goal) == 'table' and res.goal or nil
          if held and goal.holds(held) then
            vim.schedule(function()
              local prompt = string.format('Session %s already has a goal (%s): %s. Replace it?', x:sub(1, 8), held.status, held.objective)
              if vim.fn.confirm(prompt, '&Replace\n&Keep it', 2) ~= 1 then
                return
              end
              params.replace = true
              send(params)
            end)
            return
          end
          send(params)
        end)
      end
      if opts['until'] ~= nil then
        go(opts['until'])
      else
        vim.ui.input({ prompt = 'End condition (a command run in the worktree after each turn; empty for none): ' }, go)
      end
    end
    local function ask_budget(params, default)
      local function go(text)
        if text == nil then
          return
        end
        local b, berr = goal.parse_budget(text)
        if not b then
          warn('goal: ' .. berr)
          if opts.budget ~= nil then
            done({ message = berr })
            return
          end
          vim.schedule(function() ask_budget(params, text) end)
          return
        end
        ask_until(vim.tbl_extend('force', params, b))
      end
      if opts.budget ~= nil then
        go(opts.budget)
      else
        vim.ui.input({ prompt = 'Budgets (tokens=N,turns=N,wall=2h,cost=5; empty for no limit): ', default = default }, go)
      end
    end
    local function with_objective(text)
      if text and text ~= '' then
        ask_budget({ session = x, objective = text })
      end
    end
    if objective and objective ~= '' then
      with_objective(objective)
    else
      vim.ui.input({ prompt = 'Goal for ' .. x:sub(1, 8) .. ': ' }, with_objective)
    end
  end)
end

--- Pauses, resumes or clears (action) the goal of session id (default: the current one).
function M.goal_control(action, id, on_done)
  local keep = {
    pause = function(s) return type(s.goal) == 'table' and s.goal.status == 'active' end,
    resume = function(s)
      return type(s.goal) == 'table' and vim.tbl_contains({ 'paused', 'stalled', 'budget_limited' }, s.goal.status)
    end,
    clear = function(s) return type(s.goal) == 'table' end,
  }
  resolve(id, 'Goal to ' .. action .. ':', function(x)
    client.request(P.MethodGoalControl, { session = x, action = action }, function(err, g)
      if err then
        warn('goal ' .. action .. ': ' .. client.error_message(err))
      else
        local what = action == 'clear' and 'cleared' or g.status:gsub('_', ' ')
        client.notify(string.format('goal of %s %s: %s', x:sub(1, 8), what, g.objective))
        require('arbor.goal').refresh(x)
      end
      if on_done then
        on_done(err, g)
      end
    end)
  end, keep[action])
end

--- Shows the goal of session id (status, why, budgets, spending, claimed vs verified, checks).
function M.goal_show(id)
  resolve(id, 'Goal of:', function(x)
    x = (store.find(x) or { id = x }).id
    require('arbor.goal').follow()
    require('arbor.goal').open(x, 'goal', M)
  end)
end

--- Shows the cost–progress series of session id as a table.
function M.progress(id)
  resolve(id, 'Progress of:', function(x)
    x = (store.find(x) or { id = x }).id
    require('arbor.goal').follow()
    require('arbor.goal').open(x, 'progress')
  end)
end

--- Adds a heartbeat to session id (default: the current one): instruction (asked for when not
--- given) is sent to it as a message on the schedule, "every 10m" or a cron expression (asked for;
--- asked again while it is neither). opts: schedule (skips that question), on_done(err, hb).
function M.heartbeat(id, instruction, opts)
  opts = opts or {}
  local hbm = require('arbor.heartbeat')
  local function done(err, hb)
    if opts.on_done then
      opts.on_done(err, hb)
    end
  end
  resolve(id, 'Heartbeat for:', function(x)
    local function ask_schedule(text_instr, default)
      local function go(text)
        if text == nil or text == '' then
          return
        end
        local sched, serr = hbm.parse_schedule(text)
        if not sched then
          warn('heartbeat: ' .. serr)
          if opts.schedule ~= nil then
            done({ message = serr })
          else
            vim.schedule(function() ask_schedule(text_instr, text) end)
          end
          return
        end
        local params = vim.tbl_extend('force', { session = x, instruction = text_instr }, sched)
        client.request(P.MethodHeartbeatCreate, params, function(err, hb)
          if err then
            warn('heartbeat: ' .. client.error_message(err))
          else
            client.notify(string.format('heartbeat %s on %s, %s: %s', hb.id, x:sub(1, 8), hbm.schedule_text(hb), hbm.state_text(hb)))
            if hbm.bufnr() then
              hbm.refresh()
            end
          end
          done(err, hb)
        end)
      end
      if opts.schedule ~= nil then
        go(opts.schedule)
      else
        vim.ui.input({ prompt = 'Schedule (every 10m, or cron like */15 * * * *): ', default = default }, go)
      end
    end
    if instruction and instruction ~= '' then
      ask_schedule(instruction)
    else
      vim.ui.input({ prompt = 'Heartbeat instruction for ' .. x:sub(1, 8) .. ': ' }, function(text)
        if text and text ~= '' then
          ask_schedule(text)
        end
      end)
    end
  end)
end

--- Opens the list of heartbeats of session id (every session's when id is empty).
function M.heartbeats(id)
  client.start()
  local sess = id and id ~= '' and store.find(id) or nil
  return require('arbor.heartbeat').open(sess and sess.id or (id ~= '' and id or nil), M)
end

--- Deletes heartbeat hid (default: the one under the cursor in the list) after asking.
function M.heartbeat_delete(hid, on_done)
  local hbm = require('arbor.heartbeat')
  hid = (hid and hid ~= '') and hid or (hbm.current() or {}).id
  if not hid then
    warn('heartbeat delete: give a heartbeat id (:ArborHeartbeats lists them)')
    return
  end
  if vim.fn.confirm('Delete heartbeat ' .. hid .. '?', '&Yes\n&No', 2) ~= 1 then
    return
  end
  client.request(P.MethodHeartbeatDelete, { id = hid }, function(err, hb)
    if err then
      warn('heartbeat delete: ' .. client.error_message(err))
    else
      client.notify(string.format('deleted heartbeat %s after %d delivered runs', hb.id, hb.delivered or 0))
      if hbm.bufnr() then
        hbm.refresh()
      end
    end
    if on_done then
      on_done(err, hb)
    end
  end)
end

--- A statusline component: "arbor: 2 running, 1 waiting" (see |arbor-status|), "" before the
--- plugin has started or when no session is running or waiting.
function M.status()
  return require('arbor.status').line()
end

--- Stops the language client (running sessions continue in the daemon).
function M.disconnect()
  client.stop()
end

return M
