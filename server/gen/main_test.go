package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/server"
)

// TestMirrorsCurrent fails when a generated file differs from what the Go types give now.
func TestMirrorsCurrent(t *testing.T) {
	files, err := generate("..")
	if err != nil {
		t.Fatal(err)
	}
	for rel, want := range files {
		got, err := os.ReadFile(filepath.Join("..", "..", rel))
		if err != nil {
			t.Fatalf("%s: %v (run `go generate ./server`)", rel, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run `go generate ./server` and commit the result", rel)
		}
	}
}

// TestEveryFieldMirrored checks the generated files field by field against the Go types:
// every JSON field of every type reached from the method table and the event registry
// appears in the TypeScript interface and in the Lua annotations, and nothing else does.
func TestEveryFieldMirrored(t *testing.T) {
	files, err := generate("..")
	if err != nil {
		t.Fatal(err)
	}
	ts, lua := string(files[tsFile]), string(files[luaFile])
	m := collect()
	if len(m.structs) < 30 {
		t.Fatalf("only %d types collected", len(m.structs))
	}
	for _, st := range m.structs {
		var want []string
		for _, f := range fields(st) {
			want = append(want, f.JSON)
		}
		if len(want) > 0 {
			block := regexp.MustCompile(`(?s)\nexport interface ` + st.Name() + ` \{\n(.*?)\n\}`).FindStringSubmatch(ts)
			if block == nil {
				t.Errorf("%s: no TypeScript interface", st.Name())
			} else if got := names(block[1], `^\s+(\w+)\??:`); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: TypeScript fields %v, Go %v", st.Name(), got, want)
			}
		}
		block := regexp.MustCompile(`(?s)---@class arbor\.` + st.Name() + `\n((?:---@field [^\n]*\n)*)`).FindStringSubmatch(lua)
		if block == nil {
			t.Errorf("%s: no Lua class", st.Name())
		} else if got := names(block[1], `^---@field (\w+)`); !reflect.DeepEqual(got, want) && len(want) > 0 {
			t.Errorf("%s: Lua fields %v, Go %v", st.Name(), got, want)
		}
	}
	for _, p := range event.Registered() {
		if !strings.Contains(ts, "  "+string(p.EventType())+": "+reflect.TypeOf(p).Name()+";") {
			t.Errorf("event %s missing from EventPayloads", p.EventType())
		}
	}
	for _, mt := range server.ProtocolMethods() {
		if !strings.Contains(ts, "'"+mt.Name+"': { params:") || !strings.Contains(lua, "['"+mt.Name+"']") {
			t.Errorf("method %s missing from the mirrors", mt.Name)
		}
	}
}

// TestConstantsMatchTable: every method of the table has its Method constant and every state
// its State constant, so the Go constants the mirrors copy are the table's.
func TestConstantsMatchTable(t *testing.T) {
	consts, err := readConsts("..")
	if err != nil {
		t.Fatal(err)
	}
	values := map[any]bool{}
	for _, c := range consts {
		values[c.Value] = true
	}
	for _, mt := range server.ProtocolMethods() {
		if !values[mt.Name] {
			t.Errorf("method %s has no Method constant in server", mt.Name)
		}
	}
	for _, n := range server.ProtocolNotifications() {
		if !values[n.Name] {
			t.Errorf("notification %s has no Notify constant in server", n.Name)
		}
	}
	for _, st := range event.States() {
		if !values[st.String()] {
			t.Errorf("state %s has no State constant in server", st)
		}
	}
	for _, c := range consts {
		if v, ok := c.Value.(string); ok && strings.HasPrefix(c.Name, "Method") && !hasMethod(v) {
			t.Errorf("%s = %q is not in the method table", c.Name, v)
		}
	}
}

func hasMethod(name string) bool {
	for _, mt := range server.ProtocolMethods() {
		if mt.Name == name {
			return true
		}
	}
	return false
}

func names(block, pattern string) []string {
	re := regexp.MustCompile(pattern)
	var out []string
	for _, line := range strings.Split(block, "\n") {
		if m := re.FindStringSubmatch(line); m != nil {
			out = append(out, m[1])
		}
	}
	return out
}
