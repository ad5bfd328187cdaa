// Package event defines the records of a session's event log: one Go struct per event type,
// each field named once, and a registry of the types. The daemon writes these structs, replay
// reads them back, the CLI renders them, and the TypeScript and Lua mirrors the editors read
// are generated from them (see server/gen). A payload field added here reaches every client
// by `go generate ./server`.
//
// To record an event, pass a payload to the session log's append; to read one, call [Decode]
// with a record's type and data.
package event

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// Type names an event-log record type (DESIGN.md "Event log").
type Type string

// Payload is the data of one event; every payload type reports its event type.
type Payload interface {
	EventType() Type
}

// Registered lists one zero value of every payload type, in the order the generated mirrors
// and the documentation list them.
func Registered() []Payload {
	return []Payload{
		SessionCreated{}, StateChanged{}, TurnStarted{}, MessageQueued{}, UserMessage{},
		AssistantMessage{}, ModelRetry{}, ModelChanged{}, ToolStarted{}, ToolOutput{}, ToolFinished{}, Checkpoint{},
		TurnFailed{}, Interrupted{}, Recovered{}, Kernel{}, SubagentSpawned{}, MessageSent{},
		Compaction{}, WorktreeSetup{}, Worktree{}, Forked{}, Accepted{}, Merged{}, Rejected{}, Discarded{},
		HarnessProposed{}, HarnessApplied{}, HarnessRejected{}, HarnessRolledBack{}, Refined{},
		GoalSet{}, GoalChanged{}, GoalWait{}, Verified{},
		HeartbeatTick{},
	}
}

var registry = func() map[Type]reflect.Type {
	m := map[Type]reflect.Type{}
	for _, p := range Registered() {
		t := p.EventType()
		if _, dup := m[t]; dup {
			panic("event: type registered twice: " + string(t))
		}
		m[t] = reflect.TypeOf(p)
	}
	return m
}()

// Known reports whether t is a registered event type.
func Known(t Type) bool { _, ok := registry[t]; return ok }

// Decode reads a record's data into the payload struct of its type. The result is a value
// (event.StateChanged, not a pointer); an unknown type is an error naming it.
func Decode(t Type, data []byte) (Payload, error) {
	rt, ok := registry[t]
	if !ok {
		return nil, fmt.Errorf("event type %q is not known to this version of Arbor", t)
	}
	v := reflect.New(rt)
	if len(data) > 0 && string(data) != "null" {
		if err := json.Unmarshal(data, v.Interface()); err != nil {
			return nil, fmt.Errorf("decode %s event: %w", t, err)
		}
	}
	return v.Elem().Interface().(Payload), nil
}

// As decodes data into a payload of type P, checking that t is P's event type.
func As[P Payload](t Type, data []byte) (P, error) {
	var zero P
	if t != zero.EventType() {
		return zero, fmt.Errorf("event type %q is not %q", t, zero.EventType())
	}
	p, err := Decode(t, data)
	if err != nil {
		return zero, err
	}
	return p.(P), nil
}
