-- :ArborMerge — a child session's branch merged into its parent's (arbor/session.merge).
local P = require('arbor.protocol')
local client = require('arbor.client')
local store = require('arbor.store')

local M = {}

local function short(id)
  return tostring(id):sub(1, 8)
end

--- The message after a merge of child into its parent.
function M.merged_message(child, res)
  local c = store.find(child)
  local parent = c and c.parent and store.find(c.parent)
  local files = (type(res) == 'table' and res.files) or {}
  return string.format('merged %s into %s%s as %s (%d file%s)', short(child), parent and short(parent.id) or 'its parent',
    parent and parent.branch and (' (' .. parent.branch .. ')') or '', short((res or {}).commit or ''), #files, #files == 1 and '' or 's')
end

--- Merges child into its parent. opts.on_done(err, res).
function M.merge(child, opts)
  opts = opts or {}
  client.request(P.MethodSessionMerge, { id = child }, function(err, res)
    if err then
      client.notify('merge: ' .. client.error_message(err), vim.log.levels.ERROR)
    else
      client.notify(M.merged_message(child, res))
    end
    if opts.on_done then
      opts.on_done(err, res)
    end
  end)
end

return M
