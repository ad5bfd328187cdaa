-- The arbor/* protocol as the plugin sees it: every constant and shape comes from protocol_gen.lua,
-- which `go generate ./server` writes from the Go types; this module adds only what the client
-- derives from them.
local gen = require('arbor.protocol_gen')

local M = {}
for k, v in pairs(gen) do
  M[k] = v
end

-- States in which a session can still be stopped.
M.live_states = {
  [gen.StateAdmitted] = true,
  [gen.StateRunning] = true,
  [gen.StateIdle] = true,
  [gen.StateInactive] = true,
}

return M
