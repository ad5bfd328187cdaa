package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/server"
)

// model is what the mirrors are written from.
type model struct {
	methods       []server.MethodType
	notifications []server.NotificationType
	events        []eventType
	structs       []reflect.Type // every named struct reachable, in first-seen order
}

type eventType struct {
	Const   string // EventStateChanged
	Type    event.Type
	Payload reflect.Type
}

// field is one JSON field of a struct.
type field struct {
	JSON     string
	Type     reflect.Type
	Optional bool
}

var (
	rawMessage = reflect.TypeFor[json.RawMessage]()
	timeType   = reflect.TypeFor[time.Time]()
	stateType  = reflect.TypeFor[event.State]()
)

func collect() *model {
	m := &model{methods: server.ProtocolMethods(), notifications: server.ProtocolNotifications()}
	seen := map[reflect.Type]bool{}
	names := map[string]reflect.Type{}
	var visit func(t reflect.Type)
	visit = func(t reflect.Type) {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			if t != rawMessage {
				visit(t.Elem())
			}
			return
		case reflect.Struct:
		default:
			return
		}
		if t == timeType || seen[t] {
			return
		}
		if other, dup := names[t.Name()]; dup && other != t {
			panic(fmt.Sprintf("gen: two types named %s (%s and %s)", t.Name(), other.PkgPath(), t.PkgPath()))
		}
		seen[t], names[t.Name()] = true, t
		m.structs = append(m.structs, t)
		for _, f := range fields(t) {
			visit(f.Type)
		}
	}
	for _, mt := range m.methods {
		visit(mt.Params)
		visit(mt.Result)
	}
	for _, n := range m.notifications {
		visit(n.Params)
	}
	for _, p := range event.Registered() {
		t := reflect.TypeOf(p)
		m.events = append(m.events, eventType{Const: "Event" + camel(string(p.EventType())), Type: p.EventType(), Payload: t})
		visit(t)
	}
	return m
}

// fields lists a struct's JSON fields in declaration order, embedded structs flattened.
func fields(t reflect.Type) []field {
	var out []field
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			out = append(out, fields(f.Type)...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		opt := strings.Contains(","+opts+",", ",omitempty,") || f.Type.Kind() == reflect.Pointer
		out = append(out, field{JSON: name, Type: f.Type, Optional: opt})
	}
	return out
}

// camel turns session_created into SessionCreated.
func camel(s string) string {
	var b strings.Builder
	up := true
	for _, r := range s {
		if r == '_' {
			up = true
			continue
		}
		if up {
			r = unicode.ToUpper(r)
			up = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// primitive names a JSON scalar's type, the same in TypeScript and LuaLS; "" for others.
func primitive(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "number"
	}
	return ""
}
