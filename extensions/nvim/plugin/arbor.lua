-- User commands of the Arbor plugin. They start `arbor lsp` on first use with the defaults, or
-- with what require('arbor').setup{...} set.
if vim.g.loaded_arbor then
  return
end
vim.g.loaded_arbor = true

-- :help arbor needs doc/tags. The repository carries it (test/unit_review.lua checks that it
-- is current); a copy without it gets one here when its doc/ is writable.
do
  local doc = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h:h') .. '/doc'
  if vim.fn.filereadable(doc .. '/tags') == 0 and vim.fn.filewritable(doc) == 2 then
    pcall(vim.cmd, 'silent! helptags ' .. vim.fn.fnameescape(doc))
  end
end

local function arbor()
  return require('arbor')
end

local function complete_id(lead)
  local out = {}
  for _, id in ipairs(require('arbor.store').ids()) do
    if id:sub(1, #lead) == lead then
      table.insert(out, id)
    end
  end
  return out
end

local cmd = vim.api.nvim_create_user_command

cmd('ArborRun', function(o)
  arbor().run(o.args, { range = o.range > 0 and { o.line1, o.line2 } or nil })
end, { nargs = '*', range = true, desc = 'Arbor: start an agent on {task} (with a range: on the selection)' })

cmd('ArborSpawn', function(o)
  local id, task = o.args:match('^(%S+)%s*(.*)$')
  arbor().run(task, { parent = id, range = o.range > 0 and { o.line1, o.line2 } or nil })
end, { nargs = '+', range = true, complete = complete_id, desc = 'Arbor: start a subagent of {id} on {task}' })

cmd('ArborSessions', function()
  arbor().sessions()
end, { desc = 'Arbor: the session tree' })

cmd('ArborLog', function(o)
  arbor().log(o.args)
end, { nargs = '?', complete = complete_id, desc = 'Arbor: transcript of a session' })

cmd('ArborDiff', function(o)
  arbor().diff(o.args)
end, { nargs = '?', complete = complete_id, desc = "Arbor: a session's diff" })

cmd('ArborStop', function(o)
  arbor().stop(o.args)
end, { nargs = '?', complete = complete_id, desc = 'Arbor: stop a session' })

cmd('ArborSend', function(o)
  local id, text = o.args:match('^(%S+)%s*(.*)$')
  arbor().send(id, text)
end, { nargs = '*', complete = complete_id, desc = 'Arbor: send {text} to session {id}' })

cmd('ArborFork', function(o)
  arbor().fork_command(o.args)
end, { nargs = '*', complete = complete_id, desc = 'Arbor: fork a session [id] [at event seq]' })

cmd('ArborDiscard', function(o)
  arbor().discard(o.args, o.bang)
end, { nargs = '?', bang = true, complete = complete_id, desc = 'Arbor: discard a session (! drops unmerged work)' })

cmd('ArborMerge', function(o)
  arbor().merge(o.args)
end, { nargs = '?', complete = complete_id, desc = "Arbor: merge a child session into its parent's branch" })

cmd('ArborMergeTake', function(o)
  local side, path = o.args:match('^(%S+)%s*(.*)$')
  require('arbor.merge').take(side, path)
end, { nargs = '+', complete = function() return { 'ours', 'theirs' } end, desc = "Arbor: settle a conflicted file with the parent's (ours) or the child's (theirs) version" })

cmd('ArborMergeRetry', function(o)
  arbor().merge_retry(o.args)
end, { nargs = '?', complete = complete_id, desc = 'Arbor: send the resolved conflicts of a merge and merge again' })

cmd('ArborStatus', function()
  arbor().daemon_status()
end, { desc = 'Arbor: daemon status' })

cmd('ArborTrust', function(o)
  arbor().trust(o.args ~= '' and o.args or nil)
end, { nargs = '?', complete = 'dir', desc = "Arbor: review and trust a repository's arbor.json settings" })

local function complete_proposal(lead)
  local out = {}
  for _, id in ipairs(require('arbor.proposals').ids()) do
    if id:sub(1, #lead) == lead then
      table.insert(out, id)
    end
  end
  return out
end

cmd('ArborProposals', function(o)
  arbor().proposals(o.args)
end, {
  nargs = '?',
  complete = function(lead)
    return vim.tbl_filter(function(x) return x:sub(1, #lead) == lead end, require('arbor.proposals').statuses)
  end,
  desc = 'Arbor: review harness proposals (pending by default; applied, rejected or all)',
})

cmd('ArborProposalAccept', function(o)
  arbor().accept_proposal(o.args)
end, { nargs = '?', complete = complete_proposal, desc = 'Arbor: accept a harness proposal (its gate still decides)' })

cmd('ArborProposalReject', function(o)
  local id, reason = o.args:match('^(%S*)%s*(.*)$')
  arbor().reject_proposal(id, reason)
end, { nargs = '*', complete = complete_proposal, desc = 'Arbor: reject a harness proposal {pid} [reason]' })

cmd('ArborHarness', function(o)
  arbor().harness(o.args)
end, { nargs = '?', complete = complete_id, desc = 'Arbor: the harness panel (of session {id}): entries, versions, proposals, refine now' })

cmd('ArborRefine', function(o)
  arbor().refine(o.args)
end, { nargs = '*', desc = 'Arbor: /refine the current session [focus]: propose harness edits from what went wrong' })

cmd('ArborGoal', function(o)
  local id, objective = o.args:match('^(%S*)%s*(.*)$')
  arbor().goal(id, objective)
end, { nargs = '*', complete = complete_id, desc = 'Arbor: give session {id} a goal [objective] (asks for budgets and an end condition)' })

for action, name in pairs({ pause = 'ArborGoalPause', resume = 'ArborGoalResume', clear = 'ArborGoalClear' }) do
  cmd(name, function(o)
    arbor().goal_control(action, o.args)
  end, { nargs = '?', complete = complete_id, desc = 'Arbor: ' .. action .. ' the goal of a session' })
end

cmd('ArborGoalShow', function(o)
  arbor().goal_show(o.args)
end, { nargs = '?', complete = complete_id, desc = "Arbor: a session's goal: status, budgets, spending, claimed vs verified" })

cmd('ArborProgress', function(o)
  arbor().progress(o.args)
end, { nargs = '?', complete = complete_id, desc = 'Arbor: the cost–progress summary of a session tree (sparklines) and its series' })

cmd('ArborHeartbeat', function(o)
  local id, instruction = o.args:match('^(%S*)%s*(.*)$')
  arbor().heartbeat(id, instruction)
end, { nargs = '*', complete = complete_id, desc = 'Arbor: add a heartbeat to session {id} [instruction] (asks for the schedule)' })

cmd('ArborHeartbeats', function(o)
  arbor().heartbeats(o.args)
end, { nargs = '?', complete = complete_id, desc = 'Arbor: heartbeats of a session (all without one)' })

cmd('ArborHeartbeatDelete', function(o)
  arbor().heartbeat_delete(o.args)
end, { nargs = '?', desc = 'Arbor: delete a heartbeat {hid} (default: the one under the cursor)' })
