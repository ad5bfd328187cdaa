package server

import "encoding/json"

// journalPolicy says whether a method is journalled and how its entry replays (see journal.go).
type journalPolicy int

const (
	policyUnset journalPolicy = iota // the zero value: a route nobody classified (a test fails)
	notJournalled
	replayKeyed // replayed unless a record carrying its key exists
	replayAsIs  // replayed: applying it twice is applying it once
	reportOnly  // not replayed: logged and shown in arbor/daemon.status
)

// journalRule is one method's line of the table.
type journalRule struct {
	policy journalPolicy
	// session names the session whose log carries a keyed request's key ("" when the request
	// makes a new session, whose session_created carries it), and the session a report
	// names; nil when the request names none.
	session func(params json.RawMessage) string
	why     string
}

func (r journalRule) journalled() bool {
	return r.policy == replayKeyed || r.policy == replayAsIs || r.policy == reportOnly
}

func none(why string) journalRule   { return journalRule{policy: notJournalled, why: why} }
func asIs(why string) journalRule   { return journalRule{policy: replayAsIs, why: why} }
func report(why string) journalRule { return journalRule{policy: reportOnly, why: why} }

// keyedNew is a request that makes a session: the key goes on its session_created.
func keyedNew(why string) journalRule {
	return journalRule{policy: replayKeyed, why: why, session: func(json.RawMessage) string { return "" }}
}

// keyedIn is a request to the session named by the params' field: the key goes on the record it
// adds to that session's log (or on the heartbeat it makes).
func keyedIn(field, why string) journalRule {
	return journalRule{policy: replayKeyed, why: why, session: paramField(field)}
}

// in names the params' field that holds the session a request is for, for its report.
func (r journalRule) in(field string) journalRule { r.session = paramField(field); return r }

func paramField(field string) func(json.RawMessage) string {
	return func(raw json.RawMessage) string {
		var m map[string]json.RawMessage
		var s string
		if json.Unmarshal(raw, &m) == nil {
			json.Unmarshal(m[field], &s)
		}
		return s
	}
}

const readOnly = "reads only"

// journalRules is the one table of what is journalled and how it replays, for every route of
// the method table (TestJournalRulesCoverRoutes). A new state-changing method is one line here;
// a keyed one also passes requestKey(ctx) into the record it makes.
var journalRules = map[string]journalRule{
	"initialize":               none("connection state: a new connection initializes again"),
	"shutdown":                 none("connection state"),
	"textDocument/codeAction":  none(readOnly),
	"workspace/executeCommand": none("runs another route through conn.serve, which journals that route's request"),

	MethodSessionCreate: keyedNew("a second session would be a second run of the task: the key on session_created finds the first"),
	MethodSessionFork:   keyedNew("a second fork would be a second session: the key on session_created finds the first"),
	MethodSessionSend:   keyedIn("id", "a message queued twice runs twice: the key on message_queued finds the first"),
	MethodSessionStop:   asIs("stopping a stopped session records nothing").in("id"),
	MethodSessionInterrupt: none("cancels the turn running now; after a restart that turn is gone (recovery " +
		"records it interrupted) and a replay would cancel a later one"),
	MethodSessionSetModel: asIs("switching to the model the session already runs records nothing").in("id"),
	MethodSessionDiscard: asIs("a discarded session is refused a second discard; a discard cut short " +
		"(stopped, not yet removed) is finished").in("id"),
	MethodSessionAccept: report("commits onto the user's current branch, which may have moved or changed since: " +
		"the user looks at the diff and accepts again").in("id"),
	MethodSessionMerge: report("merges into the parent's worktree, which may have changed since: the user merges again").in("id"),
	MethodSessionReject: report("reverts part of the session's change as reviewed, and the branch may have moved since: " +
		"the user looks at the diff and rejects again").in("id"),
	MethodSessionConflicts: none(readOnly + " (it checkpoints the parent's worktree first, which a later merge does anyway)"),
	MethodTrustGrant:       asIs("grants the hash the user reviewed; granting it twice is granting it once, and a changed file has another hash"),
	MethodEvalRun: report("starts a run of a whole suite; a second would measure again: the user looks at " +
		"`arbor eval results` and starts it again"),
	MethodEvalStop:    asIs("stopping a stopped run changes nothing"),
	MethodEvalResults: none(readOnly),
	MethodEvalCompare: none(readOnly),
	MethodTrustRevoke: asIs("revoking twice is revoking once"),
	MethodHarnessPut: asIs("the write names the version it read: one that landed is refused as stale the second time " +
		"(reported as such), never applied twice"),
	MethodHarnessDelete:   asIs("the delete names the version it read: a second one is refused as stale"),
	MethodHarnessRollback: asIs("restoring a version twice is restoring it once (the second makes no commit)"),
	MethodRefineRun:       report("spends model calls and would propose the same edits again: the user runs it again if wanted").in("session"),
	MethodRefineAccept:    asIs("a decided proposal is refused a second decision"),
	MethodRefineReject:    asIs("a decided proposal is refused a second decision"),
	MethodGoalSet:         keyedIn("session", "a goal set again would restart its budgets: the key on goal_set finds the first"),
	MethodGoalControl: asIs("pause, resume and clear each leave the goal in a state the same action is refused from: " +
		"a second one changes nothing").in("session"),
	MethodHeartbeatCreate: keyedIn("session", "a second heartbeat would tick twice: the key on the heartbeat finds the first"),
	MethodHeartbeatDelete: asIs("a deleted heartbeat is not found a second time"),

	MethodSessions:        none(readOnly),
	MethodModels:          none(readOnly),
	MethodSessionGet:      none(readOnly),
	MethodSessionAttach:   none("connection state: the subscription ends with the connection"),
	MethodSessionDetach:   none("connection state"),
	MethodSessionLog:      none(readOnly),
	MethodSessionDiff:     none(readOnly),
	MethodSessionFileAt:   none(readOnly),
	MethodDaemonStatus:    none(readOnly),
	MethodDaemonStop:      none("replayed, it would stop the restarted daemon; a stop that was cut short stopped it anyway"),
	MethodTrustGet:        none(readOnly),
	MethodHarnessList:     none(readOnly),
	MethodHarnessGet:      none(readOnly),
	MethodHarnessHistory:  none(readOnly),
	MethodHarnessDiff:     none(readOnly),
	MethodRefineProposals: none(readOnly),
	MethodRefineProposal:  none(readOnly),
	MethodGoalGet:         none(readOnly),
	MethodProgress:        none(readOnly),
	MethodHeartbeatList:   none(readOnly),
	MethodProfiles:        none(readOnly),
}
