package main

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"

	"github.com/arborhq/arbor/agents/event"
)

func writeLua(m *model, consts []constant) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "-- %s\nlocal M = {}\n\n", header)
	for _, c := range consts {
		if c.Doc != "" {
			fmt.Fprintf(&b, "-- %s\n", c.Doc)
		}
		switch v := c.Value.(type) {
		case string:
			fmt.Fprintf(&b, "M.%s = '%s'\n", c.Name, v)
		default:
			fmt.Fprintf(&b, "M.%s = %d\n", c.Name, v)
		}
	}
	b.WriteString("\n-- Event types, as in event.type.\n")
	for _, e := range m.events {
		fmt.Fprintf(&b, "M.%s = '%s'\n", e.Const, e.Type)
	}
	var states []string
	for _, st := range append([]event.State{event.Unknown}, event.States()...) {
		states = append(states, "'"+st.String()+"'")
	}
	fmt.Fprintf(&b, "\n---@alias arbor.SessionState %s\n", strings.Join(states, "|"))
	for _, t := range m.structs {
		fmt.Fprintf(&b, "\n---@class arbor.%s\n", t.Name())
		for _, f := range fields(t) {
			opt := ""
			if f.Optional {
				opt = "?"
			}
			fmt.Fprintf(&b, "---@field %s%s %s\n", f.JSON, opt, luaType(f.Type))
		}
	}
	b.WriteString("\n-- The JSON fields of each type, in order: what the daemon sends.\nM.fields = {\n")
	for _, t := range m.structs {
		var names []string
		for _, f := range fields(t) {
			names = append(names, "'"+f.JSON+"'")
		}
		fmt.Fprintf(&b, "  %s = { %s },\n", t.Name(), strings.Join(names, ", "))
	}
	b.WriteString("}\n\n-- The payload type of each event type.\nM.event_payloads = {\n")
	for _, e := range m.events {
		fmt.Fprintf(&b, "  %s = '%s',\n", e.Type, e.Payload.Name())
	}
	b.WriteString("}\n\n-- Params and result types of each arbor/* request.\nM.requests = {\n")
	for _, mt := range m.methods {
		fmt.Fprintf(&b, "  ['%s'] = { params = '%s', result = '%s' },\n", mt.Name, luaType(mt.Params), luaType(mt.Result))
	}
	b.WriteString("}\n\n-- Params type of each arbor/* notification.\nM.notifications = {\n")
	for _, n := range m.notifications {
		fmt.Fprintf(&b, "  ['%s'] = '%s',\n", n.Name, luaType(n.Params))
	}
	b.WriteString("}\n\n-- Every event type, in the registry's order.\nM.event_types = {\n")
	for _, e := range m.events {
		fmt.Fprintf(&b, "  '%s',\n", e.Type)
	}
	b.WriteString("}\n\nreturn M\n")
	return b.Bytes()
}

func luaType(t reflect.Type) string {
	switch {
	case t == rawMessage:
		return "any"
	case t == timeType:
		return "string"
	case t == stateType:
		return "arbor.SessionState"
	}
	if p := primitive(t); p != "" {
		return p
	}
	switch t.Kind() {
	case reflect.Pointer:
		return luaType(t.Elem())
	case reflect.Slice, reflect.Array:
		return luaType(t.Elem()) + "[]"
	case reflect.Map:
		return "table<string," + luaType(t.Elem()) + ">" // one word: an annotation's type ends at a space
	case reflect.Struct:
		return "arbor." + t.Name()
	}
	return "any"
}
