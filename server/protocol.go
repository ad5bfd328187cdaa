package server

import (
	"encoding/json"
	"time"

	"github.com/arborhq/arbor/agents/eval"
	"github.com/arborhq/arbor/agents/event"
)

//go:generate go run ./gen

// This file and methods.go are the single source of the arbor/* protocol: method names,
// params and results, notifications, states and error codes; agents/event holds the event
// payloads. `go generate ./server` writes the editors' mirrors from them
// (extensions/vscode/src/protocol.gen.ts, extensions/nvim/lua/arbor/protocol_gen.lua), and
// server/gen's tests fail when those are stale.

// Requests, client → daemon.
const (
	MethodSessionCreate    = "arbor/session.create"
	MethodSessions         = "arbor/sessions"
	MethodSessionGet       = "arbor/session.get"
	MethodSessionAttach    = "arbor/session.attach"
	MethodSessionDetach    = "arbor/session.detach"
	MethodSessionLog       = "arbor/session.log"
	MethodSessionSend      = "arbor/session.send"
	MethodSessionStop      = "arbor/session.stop"
	MethodSessionInterrupt = "arbor/session.interrupt"
	MethodSessionSetModel  = "arbor/session.setModel"
	MethodModels           = "arbor/models"
	MethodSessionFork      = "arbor/session.fork"
	MethodSessionDiff      = "arbor/session.diff"
	MethodSessionFileAt    = "arbor/session.fileAt"
	MethodSessionAccept    = "arbor/session.accept"
	MethodSessionMerge     = "arbor/session.merge"
	MethodSessionReject    = "arbor/session.reject"
	MethodSessionConflicts = "arbor/session.conflicts"
	MethodSessionDiscard   = "arbor/session.discard"
	MethodDaemonStatus     = "arbor/daemon.status"
	MethodDaemonStop       = "arbor/daemon.stop"
	MethodTrustGet         = "arbor/trust.get"
	MethodTrustGrant       = "arbor/trust.grant"
	MethodTrustRevoke      = "arbor/trust.revoke"
	MethodProfiles         = "arbor/profiles"
	MethodHarnessList      = "arbor/harness.list"
	MethodHarnessGet       = "arbor/harness.get"
	MethodHarnessPut       = "arbor/harness.put"
	MethodHarnessDelete    = "arbor/harness.delete"
	MethodHarnessHistory   = "arbor/harness.history"
	MethodHarnessDiff      = "arbor/harness.diff"
	MethodHarnessRollback  = "arbor/harness.rollback"
	MethodRefineRun        = "arbor/refine.run"
	MethodRefineProposals  = "arbor/refine.proposals"
	MethodRefineProposal   = "arbor/refine.proposal"
	MethodRefineAccept     = "arbor/refine.accept"
	MethodRefineReject     = "arbor/refine.reject"
	MethodGoalSet          = "arbor/goal.set"
	MethodGoalGet          = "arbor/goal.get"
	MethodGoalControl      = "arbor/goal.control"
	MethodProgress         = "arbor/progress"
	MethodHeartbeatCreate  = "arbor/heartbeat.create"
	MethodHeartbeatList    = "arbor/heartbeat.list"
	MethodHeartbeatDelete  = "arbor/heartbeat.delete"
	MethodEvalRun          = "arbor/eval.run"
	MethodEvalResults      = "arbor/eval.results"
	MethodEvalCompare      = "arbor/eval.compare"
	MethodEvalStop         = "arbor/eval.stop"
)

// Notifications, daemon → client.
const (
	NotifyEvent       = "arbor/event"
	NotifySessionTree = "arbor/sessionTree"
	NotifyFellBehind  = "arbor/fellBehind"
)

// Session states as they appear on the wire.
const (
	StateAdmitted = "admitted"
	StateRunning  = "running"
	StateIdle     = "idle"
	StateInactive = "inactive"
	StateStopped  = "stopped"
	StateFailed   = "failed"
)

// Usage is accounting for one session (own) or a subtree (total).
type Usage struct {
	ModelCalls         int64   `json:"modelCalls"`
	InputTokens        int64   `json:"inputTokens"`
	CachedInputTokens  int64   `json:"cachedInputTokens"` // the part of InputTokens the endpoint served from its prompt cache
	OutputTokens       int64   `json:"outputTokens"`
	CostUSD            float64 `json:"costUSD"`
	KernelExecs        int64   `json:"kernelExecs"`
	Messages           int64   `json:"messages"`
	HumanInterventions int64   `json:"humanInterventions"`
	Retries            int64   `json:"retries"`
	HarnessEdits       int64   `json:"harnessEdits"` // changes to the harness that applied
	// Refine calls and their tokens, apart from the task's.
	RefineCalls        int64   `json:"refineCalls"`
	RefineInputTokens  int64   `json:"refineInputTokens"`
	RefineOutputTokens int64   `json:"refineOutputTokens"`
	RefineCostUSD      float64 `json:"refineCostUSD"`
}

// Session describes one session. Usage is the session's own; Total adds every descendant.
type Session struct {
	ID         string      `json:"id"`
	Parent     string      `json:"parent,omitempty"`
	Name       string      `json:"name,omitempty"`
	Task       string      `json:"task"`
	State      event.State `json:"state"`
	Error      string      `json:"error,omitempty"` // why it failed
	Model      string      `json:"model"`
	Branch     string      `json:"branch"`
	Worktree   string      `json:"worktree"`
	BaseCommit string      `json:"baseCommit"`
	ForkOf     string      `json:"forkOf,omitempty"`  // the session this one was forked from
	ForkSeq    uint64      `json:"forkSeq,omitempty"` // the event of ForkOf's log it was forked at
	Workspace  string      `json:"workspace"`
	Created    time.Time   `json:"created"`
	LastSeq    uint64      `json:"lastSeq"`
	Usage      Usage       `json:"usage"`
	Total      Usage       `json:"total"`
	Children   []string    `json:"children,omitempty"`
	Goal       *GoalBrief  `json:"goal,omitempty"`    // the session's goal, when it has one
	Profile    string      `json:"profile,omitempty"` // the profile it runs with (see SessionCreateParams)
	// Discarded is set once the session was discarded (it stays known, stopped); Archived is
	// the ref that keeps its work then (refs/arbor/archive/…), empty when another branch held
	// its commits or the discard was forced.
	Discarded bool   `json:"discarded,omitempty"`
	Archived  string `json:"archived,omitempty"`
	// WorktreeReleased is set while the session holds no worktree: it was given up under
	// arbor.json's "worktrees" bounds, its work kept on the branch, and is checked out again
	// at the session's next use.
	WorktreeReleased bool `json:"worktreeReleased,omitempty"`
	// WorktreeQueued is set while a child's worktree is not written yet: it waits for a run
	// slot (maxRunning), and its files are written when it gets one.
	WorktreeQueued bool `json:"worktreeQueued,omitempty"`
	// WorktreeWriting is set while a new session's files are being written in the background:
	// its branch can be read and diffed, and its first cell waits for them.
	WorktreeWriting bool `json:"worktreeWriting,omitempty"`
}

// GoalBrief is a session's goal as the tree shows it.
type GoalBrief struct {
	Objective string `json:"objective"`
	Status    string `json:"status"` // active, paused, budget_limited, stalled or complete
	Waiting   string `json:"waiting,omitempty"`
	Until     string `json:"until,omitempty"` // the end condition of an autonomous run
}

// GoalSetParams gives a session a goal. Budgets are optional (none = no limit); one that is
// given must be above zero. Until makes it an autonomous run: the command runs in the
// session's worktree after each turn and only its pass completes the goal.
type GoalSetParams struct {
	Session      string   `json:"session"`
	Objective    string   `json:"objective"`
	TokenBudget  *int64   `json:"tokenBudget,omitempty"`
	TurnBudget   *int     `json:"turnBudget,omitempty"`
	WallBudget   string   `json:"wallBudget,omitempty"` // a Go duration: "2h", "90m"
	CostBudget   *float64 `json:"costBudget,omitempty"` // USD
	Until        string   `json:"until,omitempty"`
	CheckTimeout string   `json:"checkTimeout,omitempty"` // a Go duration bounding Until
	Replace      bool     `json:"replace,omitempty"`      // replace an active or paused goal
}

// GoalRef names the session whose goal is meant.
type GoalRef struct {
	Session string `json:"session"`
}

// GoalControlParams pauses, resumes or clears a goal.
type GoalControlParams struct {
	Session string `json:"session"`
	Action  string `json:"action"` // pause, resume or clear
}

// Goal is a session's goal in full. Spent counts the subtree's spending since it was set.
// Claimed is the model's own claim of success (goal.complete), Verified the end condition's
// pass: they are different numbers.
type Goal struct {
	Session      string          `json:"session"`
	Objective    string          `json:"objective"`
	Status       string          `json:"status"`
	Reason       string          `json:"reason,omitempty"`
	Limit        string          `json:"limit,omitempty"` // the budget that ended it: tokens, turns, wall or cost
	By           string          `json:"by"`
	TokenBudget  int64           `json:"tokenBudget,omitempty"`
	TurnBudget   int             `json:"turnBudget,omitempty"`
	WallBudgetMs int64           `json:"wallBudgetMs,omitempty"`
	CostBudget   float64         `json:"costBudget,omitempty"`
	Until        string          `json:"until,omitempty"`
	Set          time.Time       `json:"set"`
	Turns        int             `json:"turns"`
	IdleTurns    int             `json:"idleTurns,omitempty"`
	Spent        event.Spend     `json:"spent"`
	Claimed      bool            `json:"claimed"`
	Verified     bool            `json:"verified"`
	Evidence     string          `json:"evidence,omitempty"`
	Checks       int             `json:"checks,omitempty"`
	LastCheck    *event.Verified `json:"lastCheck,omitempty"`
	Waiting      string          `json:"waiting,omitempty"` // children, message or backoff
}

// GoalResult is a session's goal, or none.
type GoalResult struct {
	Goal *Goal `json:"goal"`
}

// ProgressParams names the session whose cost–progress series is asked for.
type ProgressParams struct {
	Session string `json:"session"`
}

// ProgressPoint is a verifier outcome, a checkpoint or a goal change with the subtree's
// cumulative spending when it was recorded.
type ProgressPoint struct {
	Seq    uint64      `json:"seq"`
	Time   time.Time   `json:"time"`
	Kind   string      `json:"kind"`             // checkpoint, goal_set, goal_changed, verified or gate
	Status string      `json:"status,omitempty"` // a goal's status; passed, failed or skipped for a verifier
	Detail string      `json:"detail,omitempty"`
	Spend  event.Spend `json:"spend"`
}

// ProgressResult is the series, oldest first.
type ProgressResult struct {
	Session string          `json:"session"`
	Points  []ProgressPoint `json:"points"`
}

// Selection is editor context attached to a task: the text a user selected.
type Selection struct {
	URI       string `json:"uri"`
	StartLine int    `json:"startLine"` // 0-based, as in LSP
	EndLine   int    `json:"endLine"`
	Text      string `json:"text"`
}

// SessionCreateParams starts a root session (or a child, with Parent) in the repository
// containing Dir.
type SessionCreateParams struct {
	Task      string     `json:"task"`
	Dir       string     `json:"dir"`
	Parent    string     `json:"parent,omitempty"`
	Name      string     `json:"name,omitempty"`
	Model     string     `json:"model,omitempty"`
	Selection *Selection `json:"selection,omitempty"`
	// Goal starts the session with a goal (its Session is ignored; its Objective defaults to
	// the task).
	Goal *GoalSetParams `json:"goal,omitempty"`
	// Autonomous makes the run autonomous (arbor run --autonomous): its goal must have an end
	// condition, from Goal.Until or the profile's "until", or the session is refused.
	Autonomous bool `json:"autonomous,omitempty"`
	// Profile names a profile of arbor.json or the user config to run with ("profiles"); a
	// child runs with its parent's.
	Profile string `json:"profile,omitempty"`
	// Open starts a root session without a task (Task empty): it is idle until its first
	// arbor/session.send, whose first line then names it (arbor acp's session/new).
	Open bool `json:"open,omitempty"`
}

// SessionRef names one session by id (a unique prefix is accepted).
type SessionRef struct {
	ID string `json:"id"`
}

// SessionsParams filters the session list; Dir limits it to one repository.
type SessionsParams struct {
	Dir string `json:"dir,omitempty"`
}

// SessionsResult lists sessions, parents before children.
type SessionsResult struct {
	Sessions []Session `json:"sessions"`
}

// AttachParams subscribes the connection to a session's events: first every event with
// seq >= SinceSeq, then live ones, as arbor/event notifications.
type AttachParams struct {
	ID       string `json:"id"`
	SinceSeq uint64 `json:"sinceSeq"`
}

// AttachResult is the session at the moment of attaching.
type AttachResult struct {
	Session Session `json:"session"`
}

// LogParams reads a session's events without subscribing.
type LogParams struct {
	ID       string `json:"id"`
	SinceSeq uint64 `json:"sinceSeq"`
	Limit    int    `json:"limit,omitempty"`
}

// LogResult holds events in seq order.
type LogResult struct {
	Events []Event `json:"events"`
}

// Event is one event-log record of a session; also the arbor/event notification.
type Event struct {
	Session string          `json:"session"`
	Seq     uint64          `json:"seq"`
	TS      time.Time       `json:"ts"`
	Type    string          `json:"type"`
	Data    json.RawMessage `json:"data"`
}

// SendParams delivers a user message to a session. Mode is "auto", "steer" or "follow_up".
type SendParams struct {
	ID   string `json:"id"`
	Text string `json:"text"`
	Mode string `json:"mode,omitempty"`
}

// SendResult says whether the message reached a running turn or waits in the queue. Seq is its
// message_queued record: the user_message that delivers it names that seq (queuedSeq).
type SendResult struct {
	Status string `json:"status"` // "delivered" or "queued"
	Seq    uint64 `json:"seq,omitempty"`
}

// ForkParams forks a session at an event seq (0 = its latest checkpoint).
type ForkParams struct {
	ID    string `json:"id"`
	AtSeq uint64 `json:"atSeq,omitempty"`
	Name  string `json:"name,omitempty"`
}

// DaemonStatusResult describes the running daemon.
type DaemonStatusResult struct {
	PID        int       `json:"pid"`
	Version    string    `json:"version"`
	Socket     string    `json:"socket"`
	Started    time.Time `json:"started"`
	Sessions   int       `json:"sessions"`
	Live       int       `json:"live"`
	Clients    int       `json:"clients"`
	Workspaces []string  `json:"workspaces"`
	// The model settings the daemon took from its environment and flags when it started (empty:
	// none, the configuration files decide). A daemon keeps them until it stops.
	ModelBaseURL string `json:"modelBaseURL,omitempty"`
	Model        string `json:"model,omitempty"`
	APIKeyEnv    string `json:"apiKeyEnv,omitempty"`
	// Sandbox is what the daemon's bubblewrap probe found when it started.
	Sandbox SandboxStatus `json:"sandbox"`
	// Interrupted lists the requests an earlier daemon had received and not finished when it
	// died, found in its request journal at this daemon's start, and what became of each.
	Interrupted []InterruptedRequest `json:"interrupted,omitempty"`
}

// InterruptedRequest is one journalled request found at start. Outcome is "replayed", "already
// applied" (it had taken effect; not applied again), "not replayed" (its method is not redone
// unseen: Detail says why and what to do), "replay failed" (Detail has the error) or "corrupt"
// (the entry was damaged; the request was never run).
type InterruptedRequest struct {
	Method   string    `json:"method,omitempty"`
	Received time.Time `json:"received"`
	Session  string    `json:"session,omitempty"`
	Outcome  string    `json:"outcome"`
	Detail   string    `json:"detail,omitempty"`
}

// SandboxStatus says whether kernels can be sandboxed here. Mode is what a session with the
// default configuration ("sandbox": "auto") gets: "bwrap", or "unsandboxed" when bubblewrap
// cannot work (Reason says why). A repository's "sandbox" setting may still ask for "off", or
// require "bwrap" and then fail to start its kernels.
type SandboxStatus struct {
	Mode      string `json:"mode"`
	Available bool   `json:"available"`
	Reason    string `json:"reason,omitempty"`
	// Budget says how each kernel's process and memory limits are enforced here (a cgroup,
	// an rlimit, or not at all) and why nothing better could be used.
	Budget string `json:"budget,omitempty"`
}

// TrustParams names a repository by any directory inside it ("" = the client's root).
type TrustParams struct {
	Dir string `json:"dir,omitempty"`
}

// TrustGrantParams trusts a repository's guarded settings as the user reviewed them: Hash is
// the TrustState.hash they were shown with. A file changed since is refused (CodeUntrusted,
// with the settings as they are now), so what is trusted is exactly what was seen.
type TrustGrantParams struct {
	Dir  string `json:"dir,omitempty"`
	Hash string `json:"hash"`
}

// TrustSetting is one guarded setting of a repository's arbor.json.
type TrustSetting struct {
	Name  string `json:"name"`  // its path in the file: "worktree.command", "models.x"
	Value string `json:"value"` // its value as ASCII JSON, bounded (the hash covers all of it)
	Why   string `json:"why"`   // what it can do
}

// TrustState is what a repository's arbor.json asks to be trusted with, and whether it is:
// the result of arbor/trust.*, and the data of a CodeUntrusted error.
type TrustState struct {
	Repo     string         `json:"repo"` // the repository's real path
	File     string         `json:"file"` // its arbor.json
	Trusted  bool           `json:"trusted"`
	Changed  bool           `json:"changed,omitempty"` // trusted before with other values
	Settings []TrustSetting `json:"settings"`
	Hash     string         `json:"hash,omitempty"` // "" when nothing needs trust
	Command  string         `json:"command"`        // the CLI command that trusts it
}

// ProfilesParams names a repository by any directory inside it ("" = the client's root).
type ProfilesParams struct {
	Dir string `json:"dir,omitempty"`
}

// ProfilesResult lists the profiles a session of the repository can run with
// (SessionCreateParams.Profile), by name.
type ProfilesResult struct {
	Profiles []ProfileInfo `json:"profiles"`
}

// ProfileInfo is one profile with every setting a run with it has.
type ProfileInfo struct {
	Name   string `json:"name"`
	Source string `json:"source"` // the file that defines it
	// Settings are the profile's settings resolved over the rest of the configuration, with
	// arbor.json's keys: model, provider, toolMode, compaction, refine, retry, maxTurnSteps,
	// cellTimeout, until, checkTimeout, maxTurns, maxTokens, maxWall, maxCost.
	Settings json.RawMessage `json:"settings"`
	// Untrusted lists its guarded settings the repository is not trusted with: they are not
	// in Settings, and a run with the profile is refused until TrustCommand is run.
	Untrusted    []TrustSetting `json:"untrusted,omitempty"`
	TrustCommand string         `json:"trustCommand,omitempty"`
}

// HarnessScope names one scope's harness store: Scope is "session", "workspace" (the default:
// the repository containing Dir, shared by its sessions) or "global" (the user's); Session is
// the session whose scope "session" means. Dir "" is the client's root folder.
type HarnessScope struct {
	Dir     string `json:"dir,omitempty"`
	Scope   string `json:"scope,omitempty"`
	Session string `json:"session,omitempty"`
}

// HarnessSpec is a subagent's role: what rlm(task, spec=id) starts a child with.
type HarnessSpec struct {
	Instructions string `json:"instructions"`
	Model        string `json:"model,omitempty"`
	MaxTurnSteps int    `json:"maxTurnSteps,omitempty"`
}

// HarnessEntry is one harness entry. Kind is "note", "memory", "skill" or "subagent"; a note or
// memory has a Body, a skill a Module (its Python source) and a Body (its doc), a subagent a
// Spec. Version is the commit that last changed it (ignored on put).
type HarnessEntry struct {
	Kind    string       `json:"kind"`
	ID      string       `json:"id"`
	Title   string       `json:"title"`
	Body    string       `json:"body,omitempty"`
	Module  string       `json:"module,omitempty"`
	Spec    *HarnessSpec `json:"spec,omitempty"`
	Version string       `json:"version,omitempty"`
}

// HarnessListParams lists a scope's entries, of one kind or ("") of every kind.
type HarnessListParams struct {
	HarnessScope
	Kind string `json:"kind,omitempty"`
}

// HarnessListResult is a scope's entries, by kind (note, memory, skill, subagent) then id.
// Ref is the git ref the scope lives on; Head its newest commit ("" before the first change).
type HarnessListResult struct {
	Scope   string         `json:"scope"`
	Ref     string         `json:"ref"`
	Head    string         `json:"head"`
	Entries []HarnessEntry `json:"entries"`
}

// HarnessGetParams reads one entry as it is now, or as it was at Version (a commit of the
// scope, or a unique prefix of one).
type HarnessGetParams struct {
	HarnessScope
	Kind    string `json:"kind"`
	ID      string `json:"id"`
	Version string `json:"version,omitempty"`
}

// HarnessPutParams creates an entry (Base "") or updates it (Base = the version read). A stale
// Base is refused with CodeStale, whose data (a HarnessStale) names the current version.
type HarnessPutParams struct {
	HarnessScope
	Entry HarnessEntry `json:"entry"`
	Base  string       `json:"base,omitempty"`
}

// HarnessDeleteParams removes an entry; Base is the version read.
type HarnessDeleteParams struct {
	HarnessScope
	Kind string `json:"kind"`
	ID   string `json:"id"`
	Base string `json:"base"`
}

// HarnessRollbackParams restores an entry as it was at Version (absent, if it did not exist
// there), as a new commit: history is never rewritten.
type HarnessRollbackParams struct {
	HarnessScope
	Kind    string `json:"kind"`
	ID      string `json:"id"`
	Version string `json:"version"`
}

// HarnessWriteResult is the version a put, delete or rollback made. Unchanged: the entry was
// already so, and Version is its current one.
type HarnessWriteResult struct {
	Version   string `json:"version"`
	Unchanged bool   `json:"unchanged,omitempty"`
}

// HarnessHistoryParams lists the versions of one entry (Kind and ID) or of the whole scope.
type HarnessHistoryParams struct {
	HarnessScope
	Kind string `json:"kind,omitempty"`
	ID   string `json:"id,omitempty"`
}

// HarnessChange is who made a change and why: the commit's trailers. Author is "agent",
// "user" or "refine"; Trigger the event seqs that prompted it.
type HarnessChange struct {
	Author   string   `json:"author"`
	Session  string   `json:"session,omitempty"`
	Turn     int      `json:"turn,omitempty"`
	Trigger  []uint64 `json:"trigger,omitempty"`
	Intended string   `json:"intended,omitempty"`
	Observed string   `json:"observed,omitempty"`
}

// HarnessVersion is one commit of a scope's history.
type HarnessVersion struct {
	Commit  string        `json:"commit"`
	Time    time.Time     `json:"time"`
	Subject string        `json:"subject"`
	Change  HarnessChange `json:"change"`
}

// HarnessHistoryResult lists versions newest first.
type HarnessHistoryResult struct {
	Versions []HarnessVersion `json:"versions"`
}

// HarnessDiffParams asks for the unified diff of one entry's files (or, without Kind, the
// whole scope's) between two versions: From "" is before the first change, To "" is now.
type HarnessDiffParams struct {
	HarnessScope
	Kind string `json:"kind,omitempty"`
	ID   string `json:"id,omitempty"`
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
}

// HarnessDiffResult is `git diff From To` of the entry's files, with the versions resolved.
type HarnessDiffResult struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Patch string `json:"patch"`
}

// HarnessStale is the data of a CodeStale error: the write was based on Read, but the entry's
// current version is Current ("" = it was deleted; Read "" = it exists already).
type HarnessStale struct {
	Kind    string `json:"kind"`
	ID      string `json:"id"`
	Read    string `json:"read"`
	Current string `json:"current"`
}

// SessionTreeParams is the arbor/sessionTree notification: the full list on attach, then
// single sessions as they change.
type SessionTreeParams struct {
	Full     bool      `json:"full"`
	Sessions []Session `json:"sessions"`
}

// FellBehindParams tells a client its queue overflowed; it reattaches with sinceSeq.
type FellBehindParams struct {
	Session string `json:"session"`
	LastSeq uint64 `json:"lastSeq"`
}

// JSON-RPC error codes of arbor/* methods (besides the standard -32700…-32603). Every error
// also carries a message a user can act on; errors.go maps Go errors to these in one place.
const (
	CodeUnknownSession       = -32001 // no session with that id (or the prefix is ambiguous)
	CodeServerNotInitialized = -32002 // LSP's code: a request other than initialize came before initialize
	CodeNotRepository        = -32009 // the directory is not inside a git repository
	CodeModelUnavailable     = -32003 // no model configured, or the named model is unknown
	CodeConflict             = -32004 // dirty files or merge conflicts block the operation
	CodeShuttingDown         = -32005 // the daemon is stopping
	CodeInvalidState         = -32006 // the session cannot do that in its current state
	CodeNoGitIdentity        = -32007 // git has no user.name/user.email to commit with; the message says how to set them
	CodeUntrusted            = -32008 // the repository's arbor.json sets guarded settings not trusted yet; data is a TrustState
	CodeStale                = -32010 // a harness write named a version that is no longer current; data is a HarnessStale
	CodeNotFound             = -32011 // no harness entry (or version), proposal or heartbeat by that name; the message says what exists
	CodeRequestCancelled     = -32800 // the client cancelled the request with $/cancelRequest (LSP's code)
)

// RefineRunParams asks for a /refine of a session's trajectory since its last one: a model
// call that proposes minimal harness edits to Scope (default session), decided by the scope's
// policy. Focus narrows what to look at.
type RefineRunParams struct {
	Session string `json:"session"`
	Focus   string `json:"focus,omitempty"`
	Scope   string `json:"scope,omitempty"`
}

// RefineRunResult is one refine run: the events it read, its model calls and tokens (counted
// apart from the task's), and its proposals as they stand after the policy.
type RefineRunResult struct {
	Scope        string     `json:"scope"`
	FromSeq      uint64     `json:"fromSeq"`
	ToSeq        uint64     `json:"toSeq"`
	Model        string     `json:"model,omitempty"`
	Calls        int        `json:"calls"`
	InputTokens  int64      `json:"inputTokens"`
	OutputTokens int64      `json:"outputTokens"`
	Summary      string     `json:"summary,omitempty"`
	Error        string     `json:"error,omitempty"` // why it proposed nothing
	Proposals    []Proposal `json:"proposals"`
}

// ProposalsParams lists the proposals of the workspace containing Dir (default the client's
// root), of its sessions and of the global harness. Status is pending (the default), applied,
// rejected or all.
type ProposalsParams struct {
	Dir    string `json:"dir,omitempty"`
	Status string `json:"status,omitempty"`
}

// ProposalsResult lists proposals, newest first.
type ProposalsResult struct {
	Proposals []Proposal `json:"proposals"`
}

// ProposalRef names one proposal (ID like p3f9a2c1d) of the workspace containing Dir.
type ProposalRef struct {
	Dir string `json:"dir,omitempty"`
	ID  string `json:"id"`
}

// ProposalDecideParams accepts or rejects a pending proposal; Reason is the user's, for a reject.
type ProposalDecideParams struct {
	Dir    string `json:"dir,omitempty"`
	ID     string `json:"id"`
	Reason string `json:"reason,omitempty"`
}

// ProposalEdit is one entry's change in a proposal.
type ProposalEdit struct {
	Op    string `json:"op"` // create, update or delete
	Kind  string `json:"kind"`
	ID    string `json:"id"`
	Title string `json:"title,omitempty"`
	Base  string `json:"base,omitempty"`
}

// Proposal is a proposed harness change and what became of it. Diff (the change as `git diff`
// shows it) is filled by arbor/refine.proposal only.
type Proposal struct {
	ID        string             `json:"id"`
	Scope     string             `json:"scope"`
	Ref       string             `json:"ref"`
	Author    string             `json:"author"`
	Session   string             `json:"session,omitempty"`
	Turn      int                `json:"turn,omitempty"`
	Trigger   []uint64           `json:"trigger,omitempty"`
	Rationale string             `json:"rationale,omitempty"`
	Intended  string             `json:"intended,omitempty"`
	Edits     []ProposalEdit     `json:"edits"`
	Base      string             `json:"base,omitempty"`
	Commit    string             `json:"commit"`
	Created   time.Time          `json:"created"`
	Status    string             `json:"status"` // pending, applied or rejected
	Reason    string             `json:"reason,omitempty"`
	DecidedBy string             `json:"decidedBy,omitempty"`
	Decided   *time.Time         `json:"decided,omitempty"`
	Applied   string             `json:"applied,omitempty"`
	Gate      *event.GateVerdict `json:"gate,omitempty"`
	Observed  string             `json:"observed,omitempty"`
	Advice    []string           `json:"advice,omitempty"` // what the text rules noticed: for the reviewer, never a refusal
	Diff      string             `json:"diff,omitempty"`
}

// HeartbeatCreateParams adds a heartbeat to a session: Instruction is delivered to it as a
// message on the schedule, Every (a duration like "10m") or Cron (five fields, like
// "*/15 * * * *") — exactly one.
type HeartbeatCreateParams struct {
	Session     string `json:"session"`
	Instruction string `json:"instruction"`
	Every       string `json:"every,omitempty"`
	Cron        string `json:"cron,omitempty"`
}

// HeartbeatListParams lists the heartbeats of one session, or of every session when Session
// is empty.
type HeartbeatListParams struct {
	Session string `json:"session,omitempty"`
}

// HeartbeatID names a heartbeat by id (or a unique prefix of at least 4 characters).
type HeartbeatID struct {
	ID string `json:"id"`
}

// Heartbeat is one heartbeat and its runs: runs 1..Ticks have come due, 1..Delivered were
// delivered, Pending are due and wait for the session to be free (they come as one message
// with their count). Scheduled is false once the session is stopped.
type Heartbeat struct {
	ID          string    `json:"id"`
	Session     string    `json:"session"`
	Instruction string    `json:"instruction"`
	Every       string    `json:"every,omitempty"`
	Cron        string    `json:"cron,omitempty"`
	Created     time.Time `json:"created"`
	NextDue     time.Time `json:"nextDue"`
	Ticks       int       `json:"ticks"`
	Delivered   int       `json:"delivered"`
	Pending     int       `json:"pending"`
	Scheduled   bool      `json:"scheduled"`
}

// HeartbeatListResult is the heartbeats, by session, oldest first.
type HeartbeatListResult struct {
	Heartbeats []Heartbeat `json:"heartbeats"`
}

// EvalRunParams starts an eval run of a suite against the harness of the repository at Dir.
type EvalRunParams struct {
	Dir string `json:"dir"`
	// Suite is a suite directory (relative to Dir) or a built-in suite's name ("example").
	Suite string   `json:"suite"`
	Split string   `json:"split,omitempty"` // feedback or heldout; "" = every task
	Tags  []string `json:"tags,omitempty"`  // only tasks with every one of these tags
	// Harness is the version measured: "" = the current one; a commit of the workspace
	// harness, "global:REV" or "workspace:REV", or a proposal id.
	Harness string `json:"harness,omitempty"`
	// Model is a configured model; "" = the suite's scripted model, else the default.
	Model    string `json:"model,omitempty"`
	Repeat   *int   `json:"repeat,omitempty"`   // runs of each task; absent = 1, and 0 is refused
	Parallel int    `json:"parallel,omitempty"` // tasks at a time; 0 = 1
	Label    string `json:"label,omitempty"`
}

// EvalResultsParams asks for one run's report, or (Run "") the list of runs.
type EvalResultsParams struct {
	Dir string `json:"dir"`
	Run string `json:"run,omitempty"` // an id, a unique prefix of one, or "latest"
}

// EvalResultsResult is the list of runs, or one run's report.
type EvalResultsResult struct {
	Runs    []*eval.Run  `json:"runs,omitempty"`
	Report  *eval.Report `json:"report,omitempty"`
	Running bool         `json:"running"` // the run is in progress in this daemon
}

// EvalCompareParams pairs two runs task by task.
type EvalCompareParams struct {
	Dir string `json:"dir"`
	A   string `json:"a"`
	B   string `json:"b"`
}

// EvalStopParams stops a run in progress.
type EvalStopParams struct {
	Dir string `json:"dir"`
	Run string `json:"run"`
}
