-- Workspace trust for repositories: a create or fork in a repository whose arbor.json sets
-- guarded settings (commands, interpreter, sandbox, key routing) not trusted yet fails with
-- CodeUntrusted and the TrustState as data. The user is shown exactly those settings; a grant
-- names the hash of what was shown, so a file changed meanwhile is asked about again.
local P = require('arbor.protocol')

local M = {}

--- Asks the user; true to trust. vim.fn.confirm works on Neovim 0.7.2; tests replace it.
function M.confirm(msg)
  return vim.fn.confirm(msg, '&Trust and continue\n&Cancel', 2, 'Warning') == 1
end

--- The TrustState of a CodeUntrusted error, else nil.
function M.state(err)
  if type(err) ~= 'table' or err.code ~= P.CodeUntrusted then
    return nil
  end
  local d = err.data
  if type(d) ~= 'table' or type(d.repo) ~= 'string' or type(d.settings) ~= 'table' then
    return nil
  end
  return d
end

--- The prompt for st: every setting, its value and what it can do.
function M.prompt(st)
  local lines = {}
  if st.changed then
    table.insert(lines, st.file .. ' changed settings you trusted. It now sets:')
  else
    table.insert(lines, st.file .. ' sets what can run commands on your machine or send your keys elsewhere:')
  end
  for _, s in ipairs(st.settings) do
    table.insert(lines, '  ' .. s.name .. ' = ' .. s.value)
    table.insert(lines, '      ' .. s.why)
  end
  table.insert(lines, 'Only trust a repository whose arbor.json you have read (from a terminal: ' .. st.command .. ').')
  table.insert(lines, 'Trust ' .. st.repo .. '?')
  return table.concat(lines, '\n')
end

-- Rounds of asking before giving up: a file that keeps changing under the user is not trusted.
local max_rounds = 3

--- Sends method with params through request(method, params, cb) (client.request); when it fails
--- for trust, asks, grants exactly what was shown (arbor/trust.grant with its hash) and sends it
--- again. cb(err, result) as request's; a decline is an error saying nothing was started.
function M.request(request, method, params, cb)
  local round = 0
  local attempt, ask
  ask = function(st)
    -- Outside the LSP callback: confirm() blocks for input.
    vim.schedule(function()
      if not M.confirm(M.prompt(st)) then
        cb({ message = 'not trusted, so nothing was started; review ' .. st.file .. ' (' .. st.command .. ')' })
        return
      end
      request(P.MethodTrustGrant, { dir = st.repo, hash = st.hash }, function(gerr)
        if not gerr then
          attempt()
          return
        end
        local now = M.state(gerr)
        round = round + 1
        if now and round < max_rounds then
          ask(now)
        else
          cb(gerr)
        end
      end)
    end)
  end
  attempt = function()
    request(method, params, function(err, result)
      local st = M.state(err)
      round = round + 1
      if st and round <= max_rounds then
        ask(st)
      else
        cb(err, result)
      end
    end)
  end
  attempt()
end

return M
