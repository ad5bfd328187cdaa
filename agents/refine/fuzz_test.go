package refine

import (
	"errors"
	"testing"

	"github.com/arborhq/arbor/agents/harness"
)

// FuzzParse feeds Parse arbitrary replies (seeds in testdata/fuzz/FuzzParse): it never panics,
// an error is one of the documented kinds, and what it accepts holds to the schema.
func FuzzParse(f *testing.F) {
	f.Add(`{"edits": [` + goodEdit + `]}`)
	f.Add("```json\n[" + goodEdit + "]\n```")
	f.Add(`{"edits": [{"op": "delete", "kind": "memory", "id": "m", "triggers": ["seq 12"], "reason": "r", "intended_effect": "i"}]}`)
	f.Fuzz(func(t *testing.T, reply string) {
		tr := traj()
		r, err := Parse(reply, tr)
		if err != nil {
			if !errors.Is(err, ErrNoJSON) && !errors.Is(err, ErrBadJSON) && !errors.Is(err, ErrSchema) {
				t.Fatalf("error of no documented kind: %v", err)
			}
			if RepairPrompt(err) == "" {
				t.Fatal("empty repair prompt")
			}
			return
		}
		if r.Edits == nil || len(r.Edits) > MaxEdits {
			t.Fatalf("%d edits (nil %v)", len(r.Edits), r.Edits == nil)
		}
		seen := map[string]bool{}
		for i, e := range r.Edits {
			if len(e.Trigger) == 0 || e.Rationale == "" || e.Intended == "" {
				t.Fatalf("edits[%d] lacks trigger, rationale or intended: %+v", i, e)
			}
			for _, s := range e.Trigger {
				if !tr.Seqs[s] {
					t.Fatalf("edits[%d] cites seq %d, not selected", i, s)
				}
			}
			switch e.Op {
			case OpCreate, OpUpdate:
				if err := e.Entry.Validate(); err != nil {
					t.Fatalf("edits[%d] accepted an invalid entry: %v", i, err)
				}
			case OpDelete:
				if _, err := harness.ParseKind(string(e.Entry.Kind)); err != nil || validID(e.Entry.Kind, e.Entry.ID) != nil {
					t.Fatalf("edits[%d] deletes a bad target %q %q", i, e.Entry.Kind, e.Entry.ID)
				}
			default:
				t.Fatalf("edits[%d] op %q", i, e.Op)
			}
			if isBasePrompt(string(e.Entry.Kind), e.Entry.ID) {
				t.Fatalf("edits[%d] targets the base prompt", i)
			}
			key := string(e.Entry.Kind) + " " + e.Entry.ID
			if seen[key] {
				t.Fatalf("edits[%d] edits %s twice", i, key)
			}
			seen[key] = true
		}
	})
}
