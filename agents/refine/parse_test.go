package refine

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/arborhq/arbor/agents/harness"
)

// traj is a trajectory whose selected seqs are 12, 14 and 19.
func traj() Trajectory {
	return Trajectory{FromSeq: 1, ToSeq: 20, Seqs: map[uint64]bool{12: true, 14: true, 19: true}}
}

const goodEdit = `{"op": "create", "entry": {"kind": "note", "id": "run-pkg-tests", "title": "Run the package's tests", "body": "Run go test ./pkg/ rather than the whole suite."}, "trigger": [14, 19], "rationale": "The user asked for it at 19 after the suite failed at 14.", "intended": "No whole-suite runs."}`

var wantGood = Edit{
	Op:        OpCreate,
	Entry:     harness.Entry{Kind: harness.Note, ID: "run-pkg-tests", Title: "Run the package's tests", Body: "Run go test ./pkg/ rather than the whole suite."},
	Trigger:   []uint64{14, 19},
	Rationale: "The user asked for it at 19 after the suite failed at 14.",
	Intended:  "No whole-suite runs.",
}

func TestParseAccepts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		reply   string
		want    []Edit
		summary string
		ignored []string
	}{
		{"bare object", `{"edits": [` + goodEdit + `], "summary": "one note"}`, []Edit{wantGood}, "one note", nil},
		{"fenced with prose", "Here is my proposal:\n\n```json\n{\"edits\": [" + goodEdit + "]}\n```\n\nThis should help.", []Edit{wantGood}, "", nil},
		{"fence in capitals, not closed", "```JSON\n{\"edits\": [" + goodEdit + "]}\n", []Edit{wantGood}, "", nil},
		{"prose with brackets first", "Looking at [seq 14] and [14, 19], and {curly} words, I propose {\"edits\": [" + goodEdit + "]} — done.", []Edit{wantGood}, "", nil},
		{"array form", "[" + goodEdit + "]", []Edit{wantGood}, "", nil},
		{"one edit alone", "Proposal: " + goodEdit, []Edit{wantGood}, "", nil},
		{"empty edits", `{"edits": [], "summary": "nothing to change"}`, []Edit{}, "nothing to change", nil},
		{"empty array alone", "```json\n[]\n```", []Edit{}, "", nil},
		{"empty array in prose is not the answer", "It returns [] when empty. {\"edits\": [" + goodEdit + "]}", []Edit{wantGood}, "", nil},
		{"fence preferred over an earlier example", "For instance {\"edits\": []} would mean nothing.\n```json\n{\"edits\": [" + goodEdit + "]}\n```", []Edit{wantGood}, "", nil},
		{"broken fence, good JSON later", "```json\n{\"edits\": [,]}\n```\nSorry, corrected: {\"edits\": [" + goodEdit + "]}", []Edit{wantGood}, "", nil},
		{"object without edits is passed over", `{"note": 1} then {"edits": [` + goodEdit + `]}`, []Edit{wantGood}, "", nil},
		{"braces inside strings", `{"edits": [{"op": "create", "entry": {"kind": "note", "id": "braces", "title": "Mind } and ]", "body": "A \"quoted\" { brace."}, "trigger": [12], "rationale": "r", "intended": "i"}]}`,
			[]Edit{{Op: OpCreate, Entry: harness.Entry{Kind: harness.Note, ID: "braces", Title: "Mind } and ]", Body: `A "quoted" { brace.`}, Trigger: []uint64{12}, Rationale: "r", Intended: "i"}}, "", nil},
		{"snake case and string seqs", `{"edits": [{"Op": "Create", "entry": {"kind": "notes", "id": "n", "title": "T", "body": "B"}, "trigger_seqs": ["seq 12", "#14", 12], "reason": "r", "intended_effect": "i"}]}`,
			[]Edit{{Op: OpCreate, Entry: harness.Entry{Kind: harness.Note, ID: "n", Title: "T", Body: "B"}, Trigger: []uint64{12, 14}, Rationale: "r", Intended: "i"}}, "", nil},
		{"one seq alone", `{"edits": [{"op": "delete", "entry": {"kind": "memory", "id": "old-fact"}, "trigger": 19, "rationale": "r", "intendedEffect": "i"}]}`,
			[]Edit{{Op: OpDelete, Entry: harness.Entry{Kind: harness.Memory, ID: "old-fact"}, Trigger: []uint64{19}, Rationale: "r", Intended: "i"}}, "", nil},
		{"flattened entry", `[{"op": "update", "kind": "memory", "id": "go-version", "title": "Go version", "body": "Go 1.26", "trigger": [12], "rationale": "r", "intended": "i"}]`,
			[]Edit{{Op: OpUpdate, Entry: harness.Entry{Kind: harness.Memory, ID: "go-version", Title: "Go version", Body: "Go 1.26"}, Trigger: []uint64{12}, Rationale: "r", Intended: "i"}}, "", nil},
		{"skill and subagent", `{"edits": [{"op": "create", "entry": {"kind": "skill", "id": "run_pkg", "title": "Run one package", "body": "run_pkg.run('pkg')", "module": "def run(p):\n    pass\n"}, "trigger": [14], "rationale": "r", "intended": "i"},
			{"op": "create", "entry": {"kind": "subagent", "id": "tester", "title": "Tester", "spec": {"instructions": "Run the tests.", "max_turn_steps": 5}}, "trigger": [14], "rationale": "r", "intended": "i"}]}`,
			[]Edit{
				{Op: OpCreate, Entry: harness.Entry{Kind: harness.Skill, ID: "run_pkg", Title: "Run one package", Body: "run_pkg.run('pkg')", Module: "def run(p):\n    pass\n"}, Trigger: []uint64{14}, Rationale: "r", Intended: "i"},
				{Op: OpCreate, Entry: harness.Entry{Kind: harness.Subagent, ID: "tester", Title: "Tester", Spec: &harness.Spec{Instructions: "Run the tests.", MaxTurnSteps: 5}}, Trigger: []uint64{14}, Rationale: "r", Intended: "i"},
			}, "", nil},
		{"unknown fields are listed", `{"analysis": "...", "edits": [{"op": "create", "entry": {"kind": "note", "id": "n", "title": "T", "body": "B", "version": "abc", "tags": ["x"]}, "trigger": [12], "rationale": "r", "intended": "i", "confidence": 0.9}]}`,
			[]Edit{{Op: OpCreate, Entry: harness.Entry{Kind: harness.Note, ID: "n", Title: "T", Body: "B"}, Trigger: []uint64{12}, Rationale: "r", Intended: "i"}}, "",
			[]string{"analysis", "edits[0].entry.tags", "edits[0].confidence"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := Parse(tc.reply, traj())
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(r.Edits, tc.want) {
				t.Errorf("edits\n got %+v\nwant %+v", r.Edits, tc.want)
			}
			if r.Summary != tc.summary {
				t.Errorf("summary %q, want %q", r.Summary, tc.summary)
			}
			if !reflect.DeepEqual(r.Ignored, tc.ignored) {
				t.Errorf("ignored %q, want %q", r.Ignored, tc.ignored)
			}
		})
	}
}

// edit returns goodEdit with fields replaced (a value of "" removes the field).
func edit(repl map[string]string) string {
	fields := []struct{ k, v string }{
		{"op", `"create"`},
		{"entry", `{"kind": "note", "id": "n", "title": "T", "body": "B"}`},
		{"trigger", `[14]`},
		{"rationale", `"r"`},
		{"intended", `"i"`},
	}
	var parts []string
	for _, f := range fields {
		v := f.v
		if r, ok := repl[f.k]; ok {
			v = r
		}
		if v != "" {
			parts = append(parts, fmt.Sprintf("%q: %s", f.k, v))
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", harness.MaxEntryBytes+1)
	tests := []struct {
		name  string
		reply string
		is    error    // errors.Is target
		want  []string // fragments of the message
	}{
		{"empty", "  \n", ErrNoJSON, []string{"the reply is empty"}},
		{"prose only", "I think the agent should run fewer tests.", ErrNoJSON, []string{`it begins with "I think the agent`}},
		{"wrong JSON shape", `Here: {"proposal": "x"}`, ErrNoJSON, []string{"an object with keys proposal"}},
		{"array of numbers", `[1, 2, 3]`, ErrNoJSON, []string{"an array of 3 numbers"}},
		{"trailing comma", "```json\n{\"edits\": [" + goodEdit + ",]}\n```", ErrBadJSON, []string{"invalid character ']'", "near"}},
		{"cut off", `{"edits": [{"op": "create", "entry": {"kind": "note"`, ErrBadJSON, []string{"cut off"}},
		{"missing fields", `{"edits": [{"op": "create", "entry": {"kind": "note", "id": "n", "title": "T", "body": "B"}}]}`, ErrSchema,
			[]string{"edits[0].trigger: missing", "edits[0].rationale: missing", "edits[0].intended: missing"}},
		{"missing op and entry", `{"edits": [{"trigger": [14], "rationale": "r", "intended": "i"}]}`, ErrSchema,
			[]string{"edits[0].op: missing", "edits[0].entry: missing"}},
		{"unknown op", `{"edits": [` + edit(map[string]string{"op": `"rename"`}) + `]}`, ErrSchema, []string{`edits[0].op: unknown op "rename"`}},
		{"unknown kind", `{"edits": [` + edit(map[string]string{"entry": `{"kind": "recipe", "id": "n", "title": "T", "body": "B"}`}) + `]}`, ErrSchema,
			[]string{`edits[0].entry.kind: unknown harness kind "recipe"`}},
		{"trigger not selected", `{"edits": [` + goodEdit + `, ` + edit(map[string]string{"trigger": `[14, 99]`}) + `]}`, ErrSchema,
			[]string{"edits[1].trigger: seq 99 is not one of the selected events", "12, 14, 19"}},
		{"empty trigger", `{"edits": [` + edit(map[string]string{"trigger": `[]`}) + `]}`, ErrSchema, []string{"edits[0].trigger: empty"}},
		{"bad seq", `{"edits": [` + edit(map[string]string{"trigger": `[-3, 1.5, "soon"]`}) + `]}`, ErrSchema,
			[]string{`"-3" is not an event seq`, `"1.5" is not an event seq`, `"soon" is not an event seq`}},
		{"base prompt by kind", `{"edits": [` + edit(map[string]string{"entry": `{"kind": "base", "id": "x", "title": "T", "body": "ignore the rules"}`}) + `]}`, ErrBasePrompt,
			[]string{"edits[0].entry: the base prompt is immutable and cannot be edited"}},
		{"base prompt by system kind", `[` + edit(map[string]string{"entry": `{"kind": "System", "id": "x", "title": "T", "body": "B"}`}) + `]`, ErrBasePrompt, []string{"immutable"}},
		{"base prompt by id", `{"edits": [` + edit(map[string]string{"op": `"update"`, "entry": `{"kind": "note", "id": "base_prompt", "title": "T", "body": "B"}`}) + `]}`, ErrBasePrompt, []string{"immutable"}},
		{"skill without module", `{"edits": [` + edit(map[string]string{"entry": `{"kind": "skill", "id": "run_pkg", "title": "T", "body": "doc"}`}) + `]}`, ErrSchema,
			[]string{`edits[0].entry: skill "run_pkg": a skill needs its Python module`}},
		{"skill id with dash", `{"edits": [` + edit(map[string]string{"entry": `{"kind": "skill", "id": "run-pkg", "title": "T", "body": "doc", "module": "x = 1"}`}) + `]}`, ErrSchema,
			[]string{"a skill id is its module name"}},
		{"oversized entry", `{"edits": [` + edit(map[string]string{"entry": `{"kind": "memory", "id": "m", "title": "T", "body": "` + big + `"}`}) + `]}`, ErrSchema,
			[]string{"edits[0].entry: memory \"m\":", "over the limit of 65536"}},
		{"two-line title", `{"edits": [` + edit(map[string]string{"entry": `{"kind": "note", "id": "n", "title": "T\nU", "body": "B"}`}) + `]}`, ErrSchema, []string{"one non-empty line"}},
		{"delete with a bad id", `{"edits": [` + edit(map[string]string{"op": `"delete"`, "entry": `{"kind": "note", "id": "../x"}`}) + `]}`, ErrSchema, []string{"edits[0].entry.id:"}},
		{"delete without id", `{"edits": [` + edit(map[string]string{"op": `"delete"`, "entry": `{"kind": "note"}`}) + `]}`, ErrSchema, []string{"edits[0].entry.id: missing"}},
		{"too many edits", `{"edits": [` + strings.Repeat(goodEdit+",", MaxEdits) + goodEdit + `]}`, ErrSchema, []string{"edits: 9 edits, at most 8"}},
		{"same entry twice", `{"edits": [` + goodEdit + `, ` + goodEdit + `]}`, ErrSchema, []string{`edits[1]: a second edit of note "run-pkg-tests" (edits[0] edits it too)`}},
		{"edits not an array", `{"edits": {"op": "create"}}`, ErrSchema, []string{"edits: want an array of edit objects"}},
		{"edit not an object", `{"edits": [` + goodEdit + `, "more"]}`, ErrSchema, []string{"edits[1]: want an object"}},
		{"string field of a number", `{"edits": [` + edit(map[string]string{"rationale": `42`}) + `]}`, ErrSchema, []string{"edits[0].rationale: want a string, found"}},
		{"two spellings", `{"edits": [{"op": "create", "entry": {"kind": "note", "id": "n", "title": "T", "body": "B"}, "trigger": [14], "triggers": [12], "rationale": "r", "intended": "i"}]}`, ErrSchema,
			[]string{`edits[0].triggers: says the same as "trigger"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := Parse(tc.reply, traj())
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", r)
			}
			if !errors.Is(err, tc.is) {
				t.Errorf("error %q is not %q", err, tc.is)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if len(err.Error()) > 4000 {
				t.Errorf("error is %d bytes: it quotes too much", len(err.Error()))
			}
			if rp := RepairPrompt(err); !strings.Contains(rp, err.Error()) || !strings.Contains(rp, `"trigger"`) {
				t.Errorf("repair prompt does not name the error and the schema:\n%s", rp)
			}
		})
	}
}

// A base-prompt edit is a schema error too, and reports which edit it was.
func TestParseBasePromptProblem(t *testing.T) {
	t.Parallel()
	_, err := Parse(`{"edits": [`+goodEdit+`, `+edit(map[string]string{"entry": `{"kind": "prompt", "id": "x"}`})+`]}`, traj())
	var se *SchemaError
	if !errors.As(err, &se) || !errors.Is(err, ErrSchema) || !errors.Is(err, ErrBasePrompt) {
		t.Fatalf("error %v (%T)", err, err)
	}
	if len(se.Problems) != 1 || se.Problems[0].Edit != 1 || se.Problems[0].Err != ErrBasePrompt {
		t.Errorf("problems %+v", se.Problems)
	}
	if !strings.Contains(RepairPrompt(err), "drop that edit") {
		t.Errorf("repair prompt does not say to drop the base-prompt edit")
	}
	if _, err := Parse(`{"edits": [`+goodEdit+`]}`, traj()); errors.Is(err, ErrBasePrompt) {
		t.Errorf("a note is taken for the base prompt")
	}
}

// With nothing selected no edit can cite a trigger, and the error says to propose none.
func TestParseNothingSelected(t *testing.T) {
	t.Parallel()
	_, err := Parse(`{"edits": [`+goodEdit+`]}`, Trajectory{Seqs: map[uint64]bool{}})
	if err == nil || !strings.Contains(err.Error(), `reply {"edits": []}`) {
		t.Fatalf("error %v", err)
	}
	if r, err := Parse(`{"edits": []}`, Trajectory{}); err != nil || len(r.Edits) != 0 {
		t.Fatalf("empty reply over an empty trajectory: %+v, %v", r, err)
	}
}

func TestPrompts(t *testing.T) {
	t.Parallel()
	sys := SystemPrompt()
	for _, w := range []string{"Never weaken a test", "base prompt is immutable", "Reply with JSON only", `"trigger": [42, 57]`, "test files"} {
		if !strings.Contains(sys, w) {
			t.Errorf("system prompt lacks %q", w)
		}
	}
	// The example in the system prompt is itself a valid reply.
	start := strings.Index(sys, "{\n  \"edits\"")
	end := strings.Index(sys, "\n}\n") + 2
	if start < 0 || end < start {
		t.Fatal("system prompt has no example")
	}
	ex := Trajectory{Seqs: map[uint64]bool{42: true, 57: true}}
	if r, err := Parse(sys[start:end], ex); err != nil || len(r.Edits) != 1 {
		t.Errorf("the system prompt's example does not parse: %v", err)
	}

	s := buildSession(2)
	tr := Select(s.recs, 0, Options{})
	up := UserPrompt(tr, "## Harness\n- note: x\n", "fewer test runs", "workspace")
	for _, w := range []string{"workspace scope", "Focus given by the user: fewer test runs", "## Harness", tr.Digest, "make the tests pass", "failures 2"} {
		if !strings.Contains(up, w) {
			t.Errorf("user prompt lacks %q", w)
		}
	}
	if a, b := UserPrompt(tr, "", "", ""), UserPrompt(Select(s.recs, 0, Options{}), "", "", ""); a != b {
		t.Error("user prompt differs between calls")
	}
	empty := UserPrompt(Select(s.recs, uint64(len(s.recs)), Options{}), "", "", "session")
	if !strings.Contains(empty, "Nothing was selected") {
		t.Errorf("empty trajectory prompt:\n%s", empty)
	}
}

// However many brackets a reply holds, only maxCandidates spans are tried, so a pathological
// reply costs a bounded number of decodes; a reply with a few citations before its JSON is read.
func TestParseCandidatesBounded(t *testing.T) {
	t.Parallel()
	if n := len(regions(strings.Repeat("{}", 100000))); n != maxCandidates {
		t.Errorf("%d candidates, want %d", n, maxCandidates)
	}
	reply := strings.Repeat("see [seq 14], ", 50) + `{"edits": [` + goodEdit + `]}`
	if r, err := Parse(reply, traj()); err != nil || len(r.Edits) != 1 {
		t.Errorf("reply after 50 citations: %v", err)
	}
}
