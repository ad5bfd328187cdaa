package agents

import "github.com/arborhq/arbor/agents/event"

// State is a session's lifecycle state (see [event.State]); its zero value is Unknown.
type State = event.State

const (
	Admitted = event.Admitted
	Running  = event.Running
	Idle     = event.Idle
	Inactive = event.Inactive
	Stopped  = event.Stopped
	Failed   = event.Failed
)

// ParseState is the inverse of State.String.
func ParseState(name string) (State, error) { return event.ParseState(name) }
