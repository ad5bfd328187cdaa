-- Unit checks of the plugin's pure parts (store, tree rendering, transcript rendering), run
-- before e2e.lua in the same headless Neovim. Fails with :cquit 1 and a reason in $ARBOR_TEST_OUT.
local out = os.getenv('ARBOR_TEST_OUT') or '/dev/stderr'

local function fail(msg)
  local f = io.open(out, 'w')
  f:write('unit: ' .. msg .. '\n')
  f:close()
  vim.cmd('cquit 1')
end

local function check(cond, msg)
  if not cond then
    fail(msg)
  end
end

local P = require('arbor.protocol')
check(P.MethodSessionCreate == 'arbor/session.create', 'protocol.MethodSessionCreate')
check(vim.fn.exists(':ArborRun') == 2 and vim.fn.exists(':ArborSessions') == 2, 'plugin/arbor.lua did not define :ArborRun and :ArborSessions')

local store = require('arbor.store')
store.replace({
  { id = 'aaaa1111xxxx', task = 'root task', state = 'idle', model = 'scripted', branch = 'arbor/root-aaaa1111',
    created = '2026-01-01T00:00:00Z', total = { inputTokens = 1200, outputTokens = 34 } },
  { id = 'bbbb2222yyyy', parent = 'aaaa1111xxxx', task = 'child\nsecond line', state = 'running', model = 'scripted',
    branch = 'arbor/child-bbbb2222', created = '2026-01-01T00:00:01Z', total = {} },
})
local lines, ids = store.render()
check(#lines == 2 and ids[1] == 'aaaa1111xxxx' and ids[2] == 'bbbb2222yyyy', 'render order: ' .. vim.inspect(lines))
check(lines[1]:find('idle', 1, true) and lines[1]:find('1.2k tok', 1, true) and lines[1]:find('arbor/root-aaaa1111', 1, true),
  'root line: ' .. lines[1])
check(lines[2]:find('└─', 1, true) and lines[2]:find('running', 1, true) and not lines[2]:find('second line', 1, true),
  'child line: ' .. lines[2])
store.apply({ full = false, sessions = { { id = 'bbbb2222yyyy', parent = 'aaaa1111xxxx', task = 'child', state = 'failed',
  error = 'boom', branch = 'b', created = '2026-01-01T00:00:01Z' } } })
lines = store.render()
check(lines[2]:find('failed', 1, true) and lines[2]:find('! boom', 1, true), 'upsert: ' .. lines[2])
check(store.find('bbbb') and store.find('bbbb').id == 'bbbb2222yyyy', 'find by prefix')
-- A record older than the one held (lower lastSeq) does not replace it, in a delta or a full list.
store.apply({ full = false, sessions = { { id = 'cccc3333zzzz', task = 'late', state = 'stopped', lastSeq = 9 } } })
store.apply({ full = false, sessions = { { id = 'cccc3333zzzz', task = 'late', state = 'idle', lastSeq = 8 } } })
check(store.get('cccc3333zzzz').state == 'stopped', 'an older delta replaced a newer record')
store.replace({ { id = 'cccc3333zzzz', task = 'late', state = 'idle', lastSeq = 7 } })
check(#store.all() == 1 and store.get('cccc3333zzzz').state == 'stopped', 'an older full list replaced a newer record')
store.apply({ full = false, sessions = { { id = 'cccc3333zzzz', task = 'late', state = 'idle', lastSeq = 9 } } })
check(store.get('cccc3333zzzz').state == 'idle', 'a record with the same lastSeq is applied')
store.apply({ full = true, sessions = {} })
check(#store.all() == 0, 'full=true replaces the list')

local ev = require('arbor.log').render_event({ session = 'x', seq = 3, ts = '2026-01-01T10:11:12.5Z', type = 'tool_finished',
  data = { output = '2\n' } })
check(ev[1]:find('tool_finished', 1, true) and ev[1]:find('10:11:12', 1, true) and vim.tbl_contains(ev, '2'),
  'render_event: ' .. vim.inspect(ev))
local unknown = require('arbor.log').render_event({ seq = 4, type = 'something_new', data = { k = 1 } })
check(table.concat(unknown, '\n'):find('- k: 1', 1, true), 'unknown event shows its data: ' .. vim.inspect(unknown))
local nested = require('arbor.log').render_event({ seq = 5, type = 'something_new', data = { k = { x = 1 } } })
check(table.concat(nested, '\n'):find('"x"', 1, true), 'nested data shows as JSON: ' .. vim.inspect(nested))
io.stdout:write('unit: ok\n')
