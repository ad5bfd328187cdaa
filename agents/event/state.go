package event

import "fmt"

// State is a session's lifecycle state: admitted → running ⇄ idle → inactive, plus stopped
// and failed. The zero value is Unknown, the state of a session before its first
// state_changed record, and prints as "unknown": a zero State is never a crash.
type State int

const (
	Unknown State = iota
	Admitted
	Running
	Idle
	Inactive
	Stopped
	Failed
)

// stateNames are the wire names, indexed by State.
var stateNames = [...]string{"unknown", "admitted", "running", "idle", "inactive", "stopped", "failed"}

// States lists every valid state but Unknown, in lifecycle order.
func States() []State { return []State{Admitted, Running, Idle, Inactive, Stopped, Failed} }

func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// ParseState is the inverse of String for the valid states.
func ParseState(name string) (State, error) {
	for _, st := range States() {
		if stateNames[st] == name {
			return st, nil
		}
	}
	return Unknown, fmt.Errorf("unknown session state %q: want one of admitted, running, idle, inactive, stopped, failed", name)
}

// Terminal reports whether the session will do nothing more on its own or on a message.
func (s State) Terminal() bool { return s == Stopped }

// MarshalText writes the wire name.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a wire name; an unknown one is an error naming it.
func (s *State) UnmarshalText(b []byte) error {
	st, err := ParseState(string(b))
	if err != nil {
		return err
	}
	*s = st
	return nil
}
