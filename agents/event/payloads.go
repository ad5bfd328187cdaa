package event

import (
	"encoding/json"
	"time"
)

// Event types. Each has one payload struct below.
const (
	TypeSessionCreated    Type = "session_created"
	TypeStateChanged      Type = "state_changed"
	TypeTurnStarted       Type = "turn_started"
	TypeMessageQueued     Type = "message_queued"
	TypeUserMessage       Type = "user_message"
	TypeAssistantMessage  Type = "assistant_message"
	TypeModelRetry        Type = "model_retry"
	TypeModelChanged      Type = "model_changed"
	TypeToolStarted       Type = "tool_started"
	TypeToolFinished      Type = "tool_finished"
	TypeToolOutput        Type = "tool_output"
	TypeCheckpoint        Type = "checkpoint"
	TypeTurnFailed        Type = "turn_failed"
	TypeInterrupted       Type = "interrupted"
	TypeRecovered         Type = "recovered"
	TypeKernel            Type = "kernel"
	TypeSubagentSpawned   Type = "subagent_spawned"
	TypeMessageSent       Type = "message_sent"
	TypeCompaction        Type = "compaction"
	TypeWorktreeSetup     Type = "worktree_setup"
	TypeWorktree          Type = "worktree"
	TypeForked            Type = "forked"
	TypeAccepted          Type = "accepted"
	TypeMerged            Type = "merged"
	TypeDiscarded         Type = "discarded"
	TypeRejected          Type = "rejected"
	TypeHarnessProposed   Type = "harness_proposed"
	TypeHarnessApplied    Type = "harness_applied"
	TypeHarnessRejected   Type = "harness_rejected"
	TypeHarnessRolledBack Type = "harness_rolled_back"
	TypeRefined           Type = "refined"
	TypeGoalSet           Type = "goal_set"
	TypeGoalChanged       Type = "goal_changed"
	TypeGoalWait          Type = "goal_wait"
	TypeVerified          Type = "verified"
	TypeHeartbeatTick     Type = "heartbeat_tick"
)

// SessionCreated is a session's first record: what it is, fixed for its life.
type SessionCreated struct {
	ID         string    `json:"id"`
	Parent     string    `json:"parent,omitempty"` // the parent session of a child
	Name       string    `json:"name,omitempty"`
	Task       string    `json:"task"`
	Model      string    `json:"model"` // the configured model name
	Branch     string    `json:"branch"`
	Worktree   string    `json:"worktree"`
	BaseCommit string    `json:"baseCommit"`
	ForkOf     string    `json:"forkOf,omitempty"`  // the session this one was forked from
	ForkSeq    uint64    `json:"forkSeq,omitempty"` // the event of ForkOf's log it was forked at
	Workspace  string    `json:"workspace"`         // the repository root
	Created    time.Time `json:"created"`
	Selection  string    `json:"selection,omitempty"` // editor context given with the task
	// Spec names the harness subagent spec a child was started with (rlm(task, spec=…)); its
	// instructions follow the task, and MaxTurnSteps (when > 0) lowers the turn's step limit.
	Spec         string `json:"spec,omitempty"`
	MaxTurnSteps int    `json:"maxTurnSteps,omitempty"`
	// Profile names the profile the session runs with (arbor.json "profiles"; a child's and
	// a fork's are their parent's), and ProfileSettings records every setting of it as
	// resolved when the session was made (workspace.Profile's JSON): what it ran with, and
	// what a restart applies again.
	Profile         string          `json:"profile,omitempty"`
	ProfileSettings json.RawMessage `json:"profileSettings,omitempty"`
	// RequestKey is the journal key of the client request that made the session (see
	// server's request journal): a replay after a crash finds it and makes no second session.
	RequestKey string `json:"requestKey,omitempty"`
	// Harness pins scopes of the harness to commits ("" = the scope empty): the session's
	// turns read these instead of the scopes' heads, so a measurement (an eval task) sees one
	// version whatever changes meanwhile. Children and forks keep the pin.
	Harness map[string]string `json:"harness,omitempty"`
	// Open is a session started without a task (arbor acp's session/new): it waits idle for
	// its first message, whose first line then names it.
	Open bool `json:"open,omitempty"`
}

// StateChanged is a lifecycle change; Reason says why a session failed or stopped.
type StateChanged struct {
	State  State  `json:"state"`
	Reason string `json:"reason,omitempty"`
}

// TurnStarted opens turn Turn (1-based).
type TurnStarted struct {
	Turn int `json:"turn"`
}

// MessageQueued is a message waiting for the session: from the user, the task, or another
// session (From is then its label). Mode is auto, steer or follow_up.
type MessageQueued struct {
	From string `json:"from"`
	Text string `json:"text"`
	Mode string `json:"mode"`
	// Heartbeat is set on a heartbeat's delivery: the record is what makes the delivery
	// happen once, since after a crash the daemon looks for it before delivering a claimed run.
	Heartbeat *HeartbeatRef `json:"heartbeat,omitempty"`
	// RequestKey is the journal key of the client request that sent it: a replay after a
	// crash finds it and does not queue the message twice.
	RequestKey string `json:"requestKey,omitempty"`
}

// HeartbeatRef names the runs of a heartbeat that one message delivers: Run is the newest,
// Count how many it stands for (runs Run-Count+1..Run, coalesced while the session was busy
// or the daemon was down).
type HeartbeatRef struct {
	ID    string `json:"id"`
	Run   int    `json:"run"`
	Count int    `json:"count"`
}

// HeartbeatTick is a heartbeat's tick that was not delivered when it came: Status is
// coalesced (the session was busy; Pending runs now wait to be delivered as one message when
// it is free) or stopped (the session is stopped: the heartbeat is no longer scheduled). A
// tick delivered at once is its message_queued record.
type HeartbeatTick struct {
	ID      string `json:"id"`
	Run     int    `json:"run"`
	Count   int    `json:"count"` // ticks this one counted (more than one after missed due times)
	Pending int    `json:"pending"`
	Status  string `json:"status"`
}

// UserMessage is a queued message delivered into the conversation (or, Via "inbox", read by
// the session's code from agent_message.inbox()).
type UserMessage struct {
	Text      string `json:"text"`
	From      string `json:"from"`
	QueuedSeq uint64 `json:"queuedSeq"` // the seq of its message_queued record
	Via       string `json:"via,omitempty"`
}

// ToolCall is one python tool call of the model.
type ToolCall struct {
	ID   string `json:"id"`
	Code string `json:"code"`
}

// TokenUsage is what one model call cost.
type TokenUsage struct {
	InputTokens int64 `json:"inputTokens"`
	// CachedInputTokens is the part of InputTokens the endpoint read from its prompt cache.
	CachedInputTokens int64   `json:"cachedInputTokens,omitempty"`
	OutputTokens      int64   `json:"outputTokens"`
	CostUSD           float64 `json:"costUSD"`
	Estimated         bool    `json:"estimated,omitempty"` // counted at 4 characters a token
}

// AssistantMessage is one model reply: its text, the cells it asks to run, what it cost.
type AssistantMessage struct {
	Text      string     `json:"text"`
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	Usage     TokenUsage `json:"usage"`
	Retries   int        `json:"retries,omitempty"`
	// Finish is why the reply ended when that was not its natural end: "length" (the
	// output token limit), "content_filter" (the provider refused). Empty otherwise.
	Finish string `json:"finish,omitempty"`
}

// ModelRetry is a failed model call about to be retried.
type ModelRetry struct {
	Retry int    `json:"retry"`
	Error string `json:"error"`
}

// ModelChanged is the user switching the session's model: turns from then on call Model (a
// configured name); From is the one before.
type ModelChanged struct {
	Model string `json:"model"`
	From  string `json:"from"`
}

// ToolStarted is a cell about to run.
type ToolStarted struct {
	CallID string `json:"callId"`
	Code   string `json:"code"`
}

// ToolOutput is output a running cell printed, streamed while it runs so an editor shows it
// before the cell ends (and a stopped cell keeps it). Bounded: at most one per stream per
// 100 ms, each text at most 4 KiB (text arriving faster is skipped with a note, the newest
// kept), at most 256 KiB of a cell in the log; the event that reaches that bound has
// Truncated and no more follow. Redacted like the cell's result. ToolFinished.Output stays
// what the model saw.
type ToolOutput struct {
	CallID    string `json:"callId"`
	Stream    string `json:"stream"` // stdout or stderr
	Text      string `json:"text"`
	Truncated bool   `json:"truncated,omitempty"`
}

// ToolFinished is a cell's end. Status is ok, error (the cell raised), aborted, unavailable
// (no kernel) or failed (the kernel broke); Output is what the model saw (bounded).
type ToolFinished struct {
	CallID         string   `json:"callId"`
	Status         string   `json:"status"`
	Output         string   `json:"output"`
	Bytes          int      `json:"bytes,omitempty"` // the output's full size
	DurationMs     int64    `json:"durationMs,omitempty"`
	ExecutionCount int      `json:"executionCount,omitempty"`
	Artifact       string   `json:"artifact,omitempty"` // the full output's file, when it was cut
	Rich           []string `json:"rich,omitempty"`     // files of rich outputs (images, HTML)
	Error          string   `json:"error,omitempty"`
	// WorktreeWaitMs is how long the cell waited for its session's worktree to be written
	// (a new session's first cell; part of DurationMs).
	WorktreeWaitMs int64 `json:"worktreeWaitMs,omitempty"`
}

// Checkpoint is a commit on the session's branch: at a turn's end, before a merge or a
// discard, or the merge of a child (Merged).
type Checkpoint struct {
	Turn   int    `json:"turn"`
	Commit string `json:"commit"`
	Merged string `json:"merged,omitempty"` // the child session merged by this commit
	Spend  *Spend `json:"spend,omitempty"`  // the subtree's spending when it was made
}

// TurnFailed ends a turn with an error. Checkpoint is set when only the turn's checkpoint
// failed (the turn's work itself was recorded).
type TurnFailed struct {
	Turn       int    `json:"turn"`
	Error      string `json:"error"`
	Checkpoint bool   `json:"checkpoint,omitempty"`
	Limit      string `json:"limit,omitempty"` // "steps": the turn reached its limit of model calls
}

// Interrupted is a turn cut short by the daemon stopping.
type Interrupted struct {
	Turn   int    `json:"turn"`
	Reason string `json:"reason"`
}

// Recovered is a session brought back at daemon start: PreviousState is the state it was in
// when the daemon went away; Worktree says how a lost worktree came back.
type Recovered struct {
	PreviousState State  `json:"previousState,omitempty"`
	Worktree      string `json:"worktree,omitempty"`
}

// Kernel is a change of the session's kernel. Event is started, died, start_failed,
// snapshot or snapshot_failed.
type Kernel struct {
	Event    string `json:"event"`
	PID      int    `json:"pid,omitempty"`
	Restored string `json:"restored,omitempty"` // the namespace restored at start
	Summary  string `json:"summary,omitempty"`  // of a snapshot
	Error    string `json:"error,omitempty"`
	// Sandboxed says, on "started", whether the kernel runs in the sandbox.
	Sandboxed *bool `json:"sandboxed,omitempty"`
}

// SubagentSpawned is a child session started by this one.
type SubagentSpawned struct {
	ID     string `json:"id"`
	Name   string `json:"name,omitempty"`
	Branch string `json:"branch"`
	Task   string `json:"task"`
}

// Receipt is one recipient of a sent message. Role is the recipient's relation to the
// sender; Status is delivered or queued.
type Receipt struct {
	To     string `json:"to"`
	Name   string `json:"name,omitempty"`
	Role   string `json:"role"`
	Status string `json:"status"`
}

// MessageSent is a message this session's code sent to other sessions.
type MessageSent struct {
	Text     string    `json:"text"`
	Receipts []Receipt `json:"receipts"`
}

// Compaction replaced the conversation before the last Kept messages with Summary. The raw
// events stay in the log.
type Compaction struct {
	Summary       string     `json:"summary"`
	LiveVariables string     `json:"liveVariables,omitempty"`
	Compacted     int        `json:"compacted"` // messages summarised
	Kept          int        `json:"kept"`
	Forced        bool       `json:"forced,omitempty"` // after the model refused the context
	Usage         TokenUsage `json:"usage"`
}

// WorktreeSetup is the preparation of a new worktree from arbor.json's "worktree" settings.
type WorktreeSetup struct {
	OK      bool     `json:"ok"`
	Error   string   `json:"error,omitempty"`
	Copied  []string `json:"copied,omitempty"`
	Linked  []string `json:"linked,omitempty"`
	Command string   `json:"command,omitempty"`
}

// Worktree is a change of the session's worktree under arbor.json's "worktrees" bounds:
// Event "released" (checkpointed onto the branch, Commit when there was work to commit, and
// removed from disk) or "restored" (checked out again from the branch, in DurationMs).
type Worktree struct {
	Event      string `json:"event"`
	Commit     string `json:"commit,omitempty"`
	DurationMs int64  `json:"durationMs,omitempty"`
}

// Forked is a fork's history by reference: its conversation is Source's records up to Seq,
// replayed, so a fork costs one record however long the source's log is.
type Forked struct {
	Source string `json:"source"`
	Seq    uint64 `json:"seq"`
	Commit string `json:"commit"` // the checkpoint the fork's branch starts at
	Turns  int    `json:"turns"`  // turns of the source up to Seq
}

// Accepted is the session's change committed onto the user's branch. Mode is squash or merge.
type Accepted struct {
	Commit string   `json:"commit"`
	Branch string   `json:"branch"`
	Files  []string `json:"files"`
	Mode   string   `json:"mode"`
}

// Merged is a child session's branch merged into this session's worktree.
type Merged struct {
	Child  string   `json:"child"`
	Branch string   `json:"branch"`
	Commit string   `json:"commit"`
	Files  []string `json:"files"`
}

// Rejected is the user taking part of the session's change back: Files (and, of them, the
// Hunks chosen, "path#index" into the remaining diff then) reverted on the session's branch by
// Commit, a checkpoint. The model is told at its next turn.
type Rejected struct {
	Commit string   `json:"commit"`
	Files  []string `json:"files"`
	Hunks  []string `json:"hunks,omitempty"`
}

// Discarded is the session's worktree removed; its branch was deleted (BranchDeleted), kept
// under Archived, or, with Force, dropped with any uncommitted work.
type Discarded struct {
	Branch          string `json:"branch"`
	WorktreeRemoved bool   `json:"worktreeRemoved"`
	BranchDeleted   bool   `json:"branchDeleted"`
	Archived        string `json:"archived,omitempty"`
	Force           bool   `json:"force,omitempty"`
}

// HarnessEdit is one entry's change in a harness event.
type HarnessEdit struct {
	Op    string `json:"op"` // create, update or delete
	Kind  string `json:"kind"`
	ID    string `json:"id"`
	Title string `json:"title,omitempty"`
}

// GateVerdict is a validation gate's finding: its command, run on a clean checkout of the
// session's branch.
type GateVerdict struct {
	Command    string `json:"command"`
	Commit     string `json:"commit,omitempty"`
	Passed     bool   `json:"passed"`
	ExitCode   int    `json:"exitCode"`
	DurationMs int64  `json:"durationMs"`
	TimedOut   bool   `json:"timedOut,omitempty"`
	Output     string `json:"output,omitempty"`
	Error      string `json:"error,omitempty"`
	Judged     string `json:"judged,omitempty"` // how the judge reached the verdict ("exit code 0 and unittest's report: …")
	Spend      *Spend `json:"spend,omitempty"`  // the session's subtree spending at the verdict
}

// HarnessProposed is a change to a harness scope waiting for a decision (the user's, or the
// scope's gate): Commit is the change on Base, the scope's head when it was proposed.
type HarnessProposed struct {
	Proposal  string        `json:"proposal"`
	Scope     string        `json:"scope"`
	Author    string        `json:"author"` // agent or refine
	Edits     []HarnessEdit `json:"edits"`
	Commit    string        `json:"commit"`
	Base      string        `json:"base,omitempty"`
	Trigger   []uint64      `json:"trigger,omitempty"` // the event seqs that prompted it
	Rationale string        `json:"rationale,omitempty"`
	Intended  string        `json:"intended,omitempty"`
	Policy    string        `json:"policy"` // apply or review
}

// HarnessApplied is a change committed to a harness scope; it takes effect at the next turn
// boundary. Proposal is empty for a direct edit of the session's own scope.
type HarnessApplied struct {
	Proposal string        `json:"proposal,omitempty"`
	Scope    string        `json:"scope"`
	Author   string        `json:"author"`
	Edits    []HarnessEdit `json:"edits"`
	Commit   string        `json:"commit"`
	By       string        `json:"by"` // agent, user, policy or gate
	Gate     *GateVerdict  `json:"gate,omitempty"`
	Observed string        `json:"observed,omitempty"`
}

// HarnessRejected is a change refused: by the user, by the gate (Gate says why), by
// validation (a protected path, a skill that does not import, the base prompt), or a refine
// reply that could not be used (no Proposal then).
type HarnessRejected struct {
	Proposal string        `json:"proposal,omitempty"`
	Scope    string        `json:"scope"`
	Author   string        `json:"author"`
	Edits    []HarnessEdit `json:"edits,omitempty"`
	By       string        `json:"by"` // user, branch-check, eval-gate, validation or refine ("gate" in older logs)
	Reason   string        `json:"reason"`
	Observed string        `json:"observed,omitempty"` // what was measured: the eval gate's effect, the branch check's verdict
	Gate     *GateVerdict  `json:"gate,omitempty"`
}

// HarnessRolledBack is an entry restored as it was at version To, as the new commit Commit.
type HarnessRolledBack struct {
	Scope  string `json:"scope"`
	Kind   string `json:"kind"`
	ID     string `json:"id"`
	To     string `json:"to"`
	Commit string `json:"commit"`
	Author string `json:"author"`
}

// Refined is one /refine run over the session's events FromSeq..ToSeq: its model call's
// usage (counted apart from the task's), the proposals it made, or why it made none.
type Refined struct {
	Scope     string     `json:"scope"`
	Focus     string     `json:"focus,omitempty"`
	Trigger   string     `json:"trigger"` // user, kernel, everyTurns or compaction
	FromSeq   uint64     `json:"fromSeq"`
	ToSeq     uint64     `json:"toSeq"`
	Model     string     `json:"model,omitempty"`
	Calls     int        `json:"calls"` // model calls, with the repair request
	Usage     TokenUsage `json:"usage"`
	Proposals []string   `json:"proposals,omitempty"`
	Summary   string     `json:"summary,omitempty"`
	Error     string     `json:"error,omitempty"`
}

// Spend is what a session's subtree — the session and every descendant, refine runs
// included — had spent when an event was recorded: the x axis of `arbor progress`.
type Spend struct {
	Tokens     int64   `json:"tokens"` // input + output
	CostUSD    float64 `json:"costUSD"`
	ModelCalls int64   `json:"modelCalls"`
}

// GoalSet is a goal given to the session (replacing its previous one when Replaced): it keeps
// the session taking turns until it is complete or a budget, a stall or the user ends it.
// Budgets of 0 are unlimited; they count the whole subtree's spending from Spend on. An Until
// command makes it an autonomous run: after each turn it runs in the worktree, and only its
// pass completes the goal.
type GoalSet struct {
	Objective      string  `json:"objective"`
	TokenBudget    int64   `json:"tokenBudget,omitempty"`
	TurnBudget     int     `json:"turnBudget,omitempty"`
	WallBudgetMs   int64   `json:"wallBudgetMs,omitempty"`
	CostBudget     float64 `json:"costBudget,omitempty"`
	Until          string  `json:"until,omitempty"`
	CheckTimeoutMs int64   `json:"checkTimeoutMs,omitempty"`
	By             string  `json:"by"` // user, agent, profile or autonomous
	Replaced       bool    `json:"replaced,omitempty"`
	Spend          Spend   `json:"spend"`
	// RequestKey is the journal key of the client request that set it: a replay after a crash
	// finds it and does not set the goal again (which would restart its budgets).
	RequestKey string `json:"requestKey,omitempty"`
}

// GoalChanged is a goal's new status — active, paused, budget_limited, stalled, complete, or
// cleared (no goal) — with why. Claimed says the model called goal.complete; Verified that
// the end condition passed: a self-reported and a verified success are different numbers.
type GoalChanged struct {
	Status   string `json:"status"`
	Reason   string `json:"reason,omitempty"`
	Evidence string `json:"evidence,omitempty"`
	Limit    string `json:"limit,omitempty"` // the budget that ended it: tokens, turns, wall or cost
	Claimed  bool   `json:"claimed,omitempty"`
	Verified bool   `json:"verified,omitempty"`
	Turns    int    `json:"turns"` // turns taken under the goal
	Spend    Spend  `json:"spend"`
}

// GoalWait is a goal holding back its next turn: parked while children or a reply to a
// message it sent are awaited (no model call until a message arrives), or backing off after
// turns that changed nothing (DelayMs, doubling with IdleTurns).
type GoalWait struct {
	Reason    string   `json:"reason"` // children, message or backoff
	DelayMs   int64    `json:"delayMs,omitempty"`
	IdleTurns int      `json:"idleTurns,omitempty"`
	Children  []string `json:"children,omitempty"`
}

// Verified is an end-condition check after a turn: the command's verdict on the worktree at
// Commit, or Skipped when the worktree had not changed since the check last failed. Claimed
// says the model had claimed success (goal.complete) before it.
type Verified struct {
	Command    string `json:"command"`
	Commit     string `json:"commit,omitempty"`
	Passed     bool   `json:"passed"`
	ExitCode   int    `json:"exitCode"`
	DurationMs int64  `json:"durationMs"`
	TimedOut   bool   `json:"timedOut,omitempty"`
	Skipped    bool   `json:"skipped,omitempty"`
	Output     string `json:"output,omitempty"`
	Error      string `json:"error,omitempty"`
	Judged     string `json:"judged,omitempty"` // how the judge reached the verdict
	Claimed    bool   `json:"claimed,omitempty"`
	Evidence   string `json:"evidence,omitempty"` // the model's, with its claim
	Spend      Spend  `json:"spend"`
}

func (SessionCreated) EventType() Type    { return TypeSessionCreated }
func (StateChanged) EventType() Type      { return TypeStateChanged }
func (TurnStarted) EventType() Type       { return TypeTurnStarted }
func (MessageQueued) EventType() Type     { return TypeMessageQueued }
func (UserMessage) EventType() Type       { return TypeUserMessage }
func (AssistantMessage) EventType() Type  { return TypeAssistantMessage }
func (ModelRetry) EventType() Type        { return TypeModelRetry }
func (ModelChanged) EventType() Type      { return TypeModelChanged }
func (ToolStarted) EventType() Type       { return TypeToolStarted }
func (ToolOutput) EventType() Type        { return TypeToolOutput }
func (Rejected) EventType() Type          { return TypeRejected }
func (ToolFinished) EventType() Type      { return TypeToolFinished }
func (Checkpoint) EventType() Type        { return TypeCheckpoint }
func (TurnFailed) EventType() Type        { return TypeTurnFailed }
func (Interrupted) EventType() Type       { return TypeInterrupted }
func (Recovered) EventType() Type         { return TypeRecovered }
func (Kernel) EventType() Type            { return TypeKernel }
func (SubagentSpawned) EventType() Type   { return TypeSubagentSpawned }
func (MessageSent) EventType() Type       { return TypeMessageSent }
func (Compaction) EventType() Type        { return TypeCompaction }
func (WorktreeSetup) EventType() Type     { return TypeWorktreeSetup }
func (Worktree) EventType() Type          { return TypeWorktree }
func (Forked) EventType() Type            { return TypeForked }
func (Accepted) EventType() Type          { return TypeAccepted }
func (Merged) EventType() Type            { return TypeMerged }
func (Discarded) EventType() Type         { return TypeDiscarded }
func (HarnessProposed) EventType() Type   { return TypeHarnessProposed }
func (HarnessApplied) EventType() Type    { return TypeHarnessApplied }
func (HarnessRejected) EventType() Type   { return TypeHarnessRejected }
func (HarnessRolledBack) EventType() Type { return TypeHarnessRolledBack }
func (Refined) EventType() Type           { return TypeRefined }
func (GoalSet) EventType() Type           { return TypeGoalSet }
func (GoalChanged) EventType() Type       { return TypeGoalChanged }
func (GoalWait) EventType() Type          { return TypeGoalWait }
func (Verified) EventType() Type          { return TypeVerified }
func (HeartbeatTick) EventType() Type     { return TypeHeartbeatTick }
