package agents

import "fmt"

// State is a session's lifecycle state: admitted → running ⇄ idle → inactive, plus stopped
// and failed.
type State int

// stateUnset is a session's state before its first state_changed record.
const stateUnset State = -1

const (
	Admitted State = iota
	Running
	Idle
	Inactive
	Stopped
	Failed
)

var stateNames = [...]string{"admitted", "running", "idle", "inactive", "stopped", "failed"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// ParseState is the inverse of String.
func ParseState(name string) (State, error) {
	for i, n := range stateNames {
		if n == name {
			return State(i), nil
		}
	}
	return 0, fmt.Errorf("unknown session state %q", name)
}

// Terminal reports whether the session will do nothing more on its own or on a message.
func (s State) Terminal() bool { return s == Stopped }

// EventType names an event-log record type (DESIGN.md "Event log").
type EventType string

const (
	EvSessionCreated   EventType = "session_created"
	EvStateChanged     EventType = "state_changed"
	EvMessageQueued    EventType = "message_queued"
	EvUserMessage      EventType = "user_message"
	EvAssistantMessage EventType = "assistant_message"
	EvToolStarted      EventType = "tool_started"
	EvToolFinished     EventType = "tool_finished"
	EvCheckpoint       EventType = "checkpoint"
	EvTurnStarted      EventType = "turn_started"
	EvTurnFailed       EventType = "turn_failed"
	EvInterrupted      EventType = "interrupted"
	EvRecovered        EventType = "recovered"
	EvKernel           EventType = "kernel"
	EvSubagentSpawned  EventType = "subagent_spawned"
	EvMessageSent      EventType = "message_sent"
	EvCompaction       EventType = "compaction"
	EvModelRetry       EventType = "model_retry"
	EvWorktreeSetup    EventType = "worktree_setup"
)
