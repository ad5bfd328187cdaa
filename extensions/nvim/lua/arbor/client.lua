-- Starts `arbor lsp` with vim.lsp.start_client (Neovim 0.7 has no vim.lsp.start) and sends
-- arbor/* requests once the LSP handshake is done.
local P = require('arbor.protocol')
local store = require('arbor.store')

local M = {}

M.config = {
  cmd = { 'arbor', 'lsp' },
  cmd_env = nil,
  model = nil,
  attach_buffers = true, -- attach file buffers, for the agent code actions
  progress = true, -- echo the daemon's $/progress reports (false: only keep them for status)
}

local client_id = nil
local lsp_client = nil -- set in on_init: 0.7 lists a client in get_client_by_id only after on_init
local ready = false
local queue = {} -- requests sent before initialize finished
local event_listeners = {} -- session id -> { fn, ... }
local init_hooks = {} -- run after every (re)start's handshake
local reconnects = {} -- times of recent reconnects, to give up on a daemon that keeps going away

--- Calls fn after each start of `arbor lsp` (e.g. to re-attach transcripts after a restart).
function M.on_init(fn)
  table.insert(init_hooks, fn)
end

local function notify(msg, level)
  vim.notify('arbor: ' .. msg, level or vim.log.levels.INFO)
end
M.notify = notify

--- The message a user should read for a JSON-RPC error.
function M.error_message(err)
  if type(err) == 'table' then
    return err.message or vim.inspect(err)
  end
  return tostring(err)
end

--- The repository to work in: the git top level of dir (default: the cwd), else dir itself.
function M.root_dir(dir)
  dir = dir or vim.fn.getcwd()
  local out = vim.fn.systemlist({ 'git', '-C', dir, 'rev-parse', '--show-toplevel' })
  if vim.v.shell_error == 0 and out[1] and out[1] ~= '' then
    return out[1]
  end
  return dir
end

--- Calls fn for every arbor/event of session id (the session must be attached).
function M.on_event(id, fn)
  event_listeners[id] = event_listeners[id] or {}
  table.insert(event_listeners[id], fn)
end

function M.off_event(id)
  event_listeners[id] = nil
end

local handlers = {
  [P.NotifySessionTree] = function(_, params)
    store.apply(params or {})
  end,
  [P.NotifyEvent] = function(_, ev)
    if not ev then
      return
    end
    -- A state change of an attached session can beat its arbor/sessionTree delta: show it now.
    local s = store.get(ev.session)
    if s and ev.type == P.EventStateChanged and type(ev.data) == 'table' and type(ev.data.state) == 'string'
      and (s.lastSeq or 0) < (ev.seq or 0) then
      local next_s = vim.tbl_extend('force', s, { state = ev.data.state, lastSeq = ev.seq })
      next_s.error = type(ev.data.reason) == 'string' and ev.data.reason ~= '' and ev.data.reason or nil
      store.upsert(next_s)
    end
    for _, fn in ipairs(event_listeners[ev.session] or {}) do
      fn(ev)
    end
  end,
  [P.NotifyFellBehind] = function(_, params)
    -- Our queue overflowed in the daemon: re-attach from the last seq we showed.
    for _, fn in ipairs(event_listeners[params.session] or {}) do
      fn({ session = params.session, type = '_fell_behind', seq = params.lastSeq })
    end
  end,
}

-- Neovim 0.7.2 still dispatches messages read just before a client exited, and its own
-- progress handlers then complain "client has shut down after sending the message" (the daemon
-- ends its sessions' progress as it stops). Such late messages are dropped quietly.
for _, method in ipairs({ '$/progress', 'window/workDoneProgress/create' }) do
  handlers[method] = function(err, result, ctx, config)
    if not vim.lsp.get_client_by_id(ctx.client_id) then
      return vim.NIL
    end
    local ret = vim.lsp.handlers[method](err, result, ctx, config)
    if method == '$/progress' and not err then
      -- 0.7.2 stores the report and shows nothing: arbor.status shows it and keeps it.
      pcall(require('arbor.status').on_progress, result, M.config.progress)
    end
    return ret
  end
end

local function attach_buffer(bufnr)
  if not client_id or not M.config.attach_buffers then
    return
  end
  if vim.bo[bufnr].buftype ~= '' or vim.api.nvim_buf_get_name(bufnr) == '' then
    return
  end
  if not vim.lsp.buf_is_attached(bufnr, client_id) then
    vim.lsp.buf_attach_client(bufnr, client_id)
  end
end

--- Starts the client unless it runs; returns its id.
function M.start()
  if client_id then
    return client_id
  end
  ready, queue = false, {}
  local root = M.root_dir()
  local this_id
  this_id = vim.lsp.start_client({
    name = 'arbor',
    cmd = M.config.cmd,
    cmd_env = M.config.cmd_env,
    root_dir = root,
    workspace_folders = { { uri = vim.uri_from_fname(root), name = root } },
    init_options = { client = 'nvim' },
    handlers = handlers,
    on_init = function(c)
      lsp_client = c
      ready = true
      local q = queue
      queue = {}
      for _, fn in ipairs(q) do
        fn()
      end
      for _, fn in ipairs(init_hooks) do
        pcall(fn)
      end
    end,
    on_exit = function(code, signal)
      if client_id ~= this_id then
        return -- stopped by M.stop(), or an earlier client: nothing to reconnect
      end
      client_id, lsp_client, ready = nil, nil, false
      pcall(function() require('arbor.status').reset() end)
      for _, fn in ipairs(queue) do
        pcall(fn, true)
      end
      queue = {}
      vim.schedule(function()
        if vim.v.exiting ~= vim.NIL then
          return -- Neovim is quitting
        end
        -- The daemon stopped or restarted under us: reconnect (which starts a daemon if none
        -- runs), a few times a minute at most. The new connection brings the full tree and
        -- the on_init hooks reattach open transcripts.
        local now = vim.loop.now()
        local recent = {}
        for _, t in ipairs(reconnects) do
          if now - t < 60000 then
            table.insert(recent, t)
          end
        end
        reconnects = recent
        local why = string.format('`%s` exited (code %d, signal %d)', table.concat(M.config.cmd, ' '), code, signal)
        if #reconnects >= 3 then
          notify(why .. ' again; not reconnecting. See :lua vim.cmd("e " .. vim.lsp.get_log_path()); '
            .. ':ArborSessions tries again', vim.log.levels.WARN)
          return
        end
        table.insert(reconnects, now)
        notify(why .. '; reconnecting to the arbor daemon')
        vim.defer_fn(function()
          if not client_id then
            M.start()
          end
        end, 300)
      end)
    end,
  })
  client_id = this_id
  if not client_id then
    notify('could not start `' .. table.concat(M.config.cmd, ' ') .. '`: is arbor on $PATH? (setup{cmd=...})', vim.log.levels.ERROR)
    return nil
  end
  if M.config.attach_buffers then
    for _, b in ipairs(vim.api.nvim_list_bufs()) do
      if vim.api.nvim_buf_is_loaded(b) then
        attach_buffer(b)
      end
    end
  end
  return client_id
end

function M.attach_buffer(bufnr)
  attach_buffer(bufnr)
end

function M.id()
  return client_id
end

--- Sends an arbor/* request; cb(err, result) runs on the main loop. Starts the client if needed.
function M.request(method, params, cb)
  cb = cb or function(err)
    if err then
      notify(M.error_message(err), vim.log.levels.ERROR)
    end
  end
  -- An empty Lua table encodes as [], which the daemon (rightly) refuses as params object.
  if params == nil or (type(params) == 'table' and next(params) == nil) then
    params = vim.empty_dict()
  end
  if not M.start() then
    cb({ message = 'arbor is not running' })
    return
  end
  local function send(failed)
    local c = lsp_client
    if failed or not c then
      cb({ message = 'arbor lsp exited before it answered ' .. method })
      return
    end
    local ok = c.request(method, params, function(err, result)
      cb(err, result)
    end)
    if not ok then
      cb({ message = 'arbor lsp is not running' })
    end
  end
  if ready then
    send()
  else
    table.insert(queue, send)
  end
end

--- Stops the client (the daemon keeps running: sessions outlive the editor).
function M.stop()
  if client_id then
    vim.lsp.stop_client(client_id)
  end
  client_id, lsp_client, ready = nil, nil, false
end

return M
