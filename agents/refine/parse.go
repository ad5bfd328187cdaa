package refine

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/arborhq/arbor/agents/harness"
)

// MaxEdits bounds one reply: a refinement proposes the smallest set of edits that helps.
const MaxEdits = 8

// Ops of an [Edit].
const (
	OpCreate = "create"
	OpUpdate = "update"
	OpDelete = "delete"
)

// Reply is a refiner's answer, validated. No edits is a valid answer: nothing to change.
type Reply struct {
	Edits   []Edit `json:"edits"`
	Summary string `json:"summary,omitempty"`
	// Ignored lists the fields of the reply that are not in the schema and were passed over
	// ("edits[1].confidence"), so what the model said is never silently lost.
	Ignored []string `json:"ignored,omitempty"`
}

// Edit is one proposed change of the harness.
type Edit struct {
	Op        string        `json:"op"`      // create | update | delete
	Entry     harness.Entry `json:"entry"`   // kind and id; for create and update a valid entry (Version is never taken from the model)
	Trigger   []uint64      `json:"trigger"` // the events that call for it, each one of the trajectory's Seqs
	Rationale string        `json:"rationale"`
	Intended  string        `json:"intended"` // the intended effect
}

// ErrSchema marks a reply whose JSON was found but does not fit the schema (a [*SchemaError]).
var ErrSchema = errors.New("the reply does not fit the schema")

// ErrBasePrompt marks an edit that targets the base prompt, which is embedded and immutable;
// errors.Is(err, ErrBasePrompt) tells a refusal for that reason from other schema errors.
var ErrBasePrompt = errors.New("the base prompt is immutable and cannot be edited")

// Problem is one thing wrong with a reply. Edit is the edit's index, or -1 for the reply as
// a whole; Field is the JSON path ("edits[2].trigger").
type Problem struct {
	Edit  int
	Field string
	Msg   string
	Err   error // ErrBasePrompt, or nil
}

func (p Problem) String() string { return p.Field + ": " + p.Msg }

// SchemaError lists every problem of a reply, so one repair request can name them all.
type SchemaError struct {
	Problems []Problem
}

func (e *SchemaError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return ErrSchema.Error() + ": " + strings.Join(parts, "; ")
}

// Unwrap lets errors.Is find ErrSchema and, when an edit targets it, ErrBasePrompt.
func (e *SchemaError) Unwrap() []error {
	out := []error{ErrSchema}
	for _, p := range e.Problems {
		if p.Err != nil && !slices.Contains(out, p.Err) {
			out = append(out, p.Err)
		}
	}
	return out
}

// Parse reads a refiner's reply. The JSON may be wrapped in prose or a ```json fence, and may
// be {"edits": [...], "summary": "..."}, a bare array of edits, or one edit object. Field names
// are matched ignoring case, "_" and "-", so "intended_effect" is "intendedEffect"; a few
// aliases are taken: "triggers"/"trigger_seqs" for trigger, "intended_effect"/"expected_effect"
// for intended, "reason" for rationale, "operation" for op, and an edit may carry its entry's
// fields itself instead of under "entry". Other fields are not errors: they are passed over and
// listed in Reply.Ignored. A trigger seq may be a number or a string ("42", "seq 42", "#42").
//
// The result is validated against the schema: a known op; an entry kind of [harness.Kinds] that
// is not the base prompt ([ErrBasePrompt]); for create and update an entry that passes
// [harness.Entry.Validate], for delete a kind and a valid id; a trigger of seqs in t.Seqs;
// a rationale and an intended effect; at most [MaxEdits] edits, at most one per entry. An
// error is ErrNoJSON or ErrBadJSON (naming what was found) or a [*SchemaError] naming every
// problem by edit index and field.
func Parse(reply string, t Trajectory) (Reply, error) {
	raw, sh, err := extract(reply)
	if err != nil {
		return Reply{}, err
	}
	p := &parser{t: t}
	var r Reply
	var edits []json.RawMessage
	switch sh {
	case shapeArray:
		_ = json.Unmarshal(raw, &edits) // classify checked it
	case shapeEdit:
		edits = []json.RawMessage{raw}
	case shapeReply:
		f := p.object("", -1, raw)
		if v, ok := f.take("edits"); ok {
			if json.Unmarshal(v, &edits) != nil {
				p.problem(-1, "edits", "want an array of edit objects, found %s", describe(string(v)))
			}
		}
		r.Summary = f.str("summary")
		f.done()
	}
	if len(edits) > MaxEdits {
		p.problem(-1, "edits", "%d edits, at most %d: propose the few that matter most", len(edits), MaxEdits)
		return Reply{}, &SchemaError{Problems: p.problems}
	}
	seen := map[string]int{}
	for i, e := range edits {
		ed, ok := p.edit(i, e)
		if !ok {
			continue
		}
		key := string(ed.Entry.Kind) + " " + ed.Entry.ID
		if j, dup := seen[key]; dup {
			p.problem(i, fmt.Sprintf("edits[%d]", i), "a second edit of %s %q (edits[%d] edits it too): make them one", ed.Entry.Kind, ed.Entry.ID, j)
			continue
		}
		seen[key] = i
		r.Edits = append(r.Edits, ed)
	}
	if len(p.problems) > 0 {
		return Reply{}, &SchemaError{Problems: p.problems}
	}
	if r.Edits == nil {
		r.Edits = []Edit{}
	}
	r.Ignored = p.ignored
	return r, nil
}

type parser struct {
	t        Trajectory
	problems []Problem
	ignored  []string
}

// maxProblemText bounds one problem's message: an entry's id or title is quoted in some, and
// the model wrote those.
const maxProblemText = 400

func (p *parser) problem(edit int, field, format string, args ...any) {
	p.problems = append(p.problems, Problem{Edit: edit, Field: field, Msg: clip(fmt.Sprintf(format, args...), maxProblemText)})
}

// edit reads and validates edits[i]; ok is false when it has a problem.
func (p *parser) edit(i int, raw json.RawMessage) (Edit, bool) {
	path := fmt.Sprintf("edits[%d]", i)
	before := len(p.problems)
	f := p.object(path, i, raw)
	if f == nil {
		return Edit{}, false
	}
	var ed Edit
	op := strings.ToLower(strings.TrimSpace(f.str("op", "operation")))
	switch op {
	case OpCreate, OpUpdate, OpDelete:
		ed.Op = op
	case "":
		p.problem(i, path+".op", "missing: want create, update or delete")
	default:
		p.problem(i, path+".op", "unknown op %q: want create, update or delete", op)
	}
	ent := f // the entry's fields may sit on the edit itself
	entPath := path
	if v, ok := f.take("entry"); ok {
		entPath = path + ".entry"
		if ent = p.object(entPath, i, v); ent == nil {
			ent = &fields{p: p, edit: i, path: entPath}
		}
	} else if _, ok := f.m["kind"]; !ok {
		p.problem(i, path+".entry", "missing: give the entry's kind and id (and, to create or update, its title and content)")
		ent = nil
	}
	if ent != nil {
		ed.Entry = p.entry(i, entPath, ent, op)
	}
	ed.Trigger = p.trigger(i, path+".trigger", f)
	if ed.Rationale = strings.TrimSpace(f.str("rationale", "reason")); ed.Rationale == "" && !f.wrong["rationale"] {
		p.problem(i, path+".rationale", "missing: say why, citing what the trigger events show")
	}
	if ed.Intended = strings.TrimSpace(f.str("intended", "intendedeffect", "expectedeffect")); ed.Intended == "" && !f.wrong["intended"] {
		p.problem(i, path+".intended", "missing: say what the edit should change in later turns")
	}
	if ent != nil && ent != f {
		ent.done()
	}
	f.done()
	return ed, len(p.problems) == before
}

// entry reads an edit's entry and checks it for the op.
func (p *parser) entry(i int, path string, f *fields, op string) harness.Entry {
	kind := strings.TrimSpace(f.str("kind"))
	id := strings.TrimSpace(f.str("id"))
	e := harness.Entry{ID: id, Title: f.str("title"), Body: f.str("body"), Module: f.str("module")}
	if v, ok := f.take("spec"); ok {
		if sf := p.object(path+".spec", i, v); sf != nil {
			e.Spec = &harness.Spec{Instructions: sf.str("instructions"), Model: sf.str("model"), MaxTurnSteps: sf.int("maxturnsteps")}
			sf.done()
		}
	}
	f.take("version") // the store sets it; a model's guess is not a version read
	if isBasePrompt(kind, id) {
		p.problems = append(p.problems, Problem{Edit: i, Field: path, Err: ErrBasePrompt,
			Msg: ErrBasePrompt.Error() + "; to add a rule, create a note (it is sent after the base prompt)"})
		return e
	}
	if kind == "" {
		p.problem(i, path+".kind", "missing: want note, memory, skill or subagent")
		return e
	}
	k, err := harness.ParseKind(strings.ToLower(kind))
	if err != nil {
		p.problem(i, path+".kind", "%v", err)
		return e
	}
	e.Kind = k
	if op == OpDelete {
		if err := validID(k, id); err != nil {
			p.problem(i, path+".id", "%v", err)
		}
		return harness.Entry{Kind: k, ID: id}
	}
	if op != "" {
		if err := e.Validate(); err != nil {
			p.problem(i, path, "%s", strings.TrimPrefix(err.Error(), harness.ErrInvalid.Error()+": "))
		}
	}
	return e
}

// validID checks id as the store would for an entry of kind k. The rule lives in
// harness.Entry.Validate, so it is asked with placeholder content that is otherwise valid.
func validID(k harness.Kind, id string) error {
	e := harness.Entry{Kind: k, ID: id, Title: "x", Body: "x"}
	switch k {
	case harness.Skill:
		e.Module = "x"
	case harness.Subagent:
		e.Body, e.Spec = "", &harness.Spec{Instructions: "x"}
	}
	if id == "" {
		return errors.New("missing: a delete names the entry's id")
	}
	if err := e.Validate(); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), harness.ErrInvalid.Error()+": "))
	}
	return nil
}

// isBasePrompt says whether an edit aims at the base prompt: by a kind that names it, or an
// id that does ("base-prompt", "system_prompt").
func isBasePrompt(kind, id string) bool {
	switch normKey(kind) {
	case "base", "prompt", "system", "baseprompt", "systemprompt", "basesystemprompt":
		return true
	}
	n := normKey(id)
	return n == "base" || strings.HasPrefix(n, "baseprompt") || strings.HasPrefix(n, "systemprompt") || strings.HasPrefix(n, "basesystemprompt")
}

// trigger reads the cited seqs and checks each was selected.
func (p *parser) trigger(i int, path string, f *fields) []uint64 {
	v, ok := f.take("trigger", "triggers", "triggerseqs")
	if !ok {
		p.problem(i, path, "missing: cite the seqs of the events that call for this edit")
		return nil
	}
	var items []json.RawMessage
	if json.Unmarshal(v, &items) != nil {
		items = []json.RawMessage{v} // one seq alone
	}
	var out []uint64
	for _, it := range items {
		seq, err := parseSeq(it)
		if err != nil {
			p.problem(i, path, "%v", err)
			continue
		}
		if !p.t.Seqs[seq] {
			p.problem(i, path, "seq %d is not one of the selected events; %s", seq, p.citable())
			continue
		}
		if !slices.Contains(out, seq) {
			out = append(out, seq)
		}
	}
	if len(items) == 0 {
		p.problem(i, path, "empty: cite at least one event; %s", p.citable())
	}
	return out
}

// citable says which seqs an edit may cite.
func (p *parser) citable() string {
	if len(p.t.Seqs) == 0 {
		return "no events were selected, so no edit can cite a trigger: reply {\"edits\": []}"
	}
	seqs := make([]uint64, 0, len(p.t.Seqs))
	for s := range p.t.Seqs {
		seqs = append(seqs, s)
	}
	slices.Sort(seqs)
	var b strings.Builder
	b.WriteString("cite seqs from the digest's [seq N …] headers: ")
	for j, s := range seqs {
		if j == 12 {
			fmt.Fprintf(&b, ", … (%d in all)", len(seqs))
			break
		}
		if j > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatUint(s, 10))
	}
	return b.String()
}

func parseSeq(raw json.RawMessage) (uint64, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		t := strings.TrimSpace(strings.ToLower(s))
		t = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(t, "seq"), "#"))
		if n, err := strconv.ParseUint(t, 10, 64); err == nil {
			return n, nil
		}
		return 0, fmt.Errorf("%q is not an event seq (a whole number)", s)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s is not an event seq (a whole number)", quoteHead(string(raw)))
	}
	return n, nil
}

// fields is one JSON object of the reply, keyed by normalised name, with what was read so far.
type fields struct {
	p     *parser
	edit  int
	path  string
	m     map[string]json.RawMessage
	orig  map[string]string // normalised → as written
	used  map[string]bool
	wrong map[string]bool // fields (by their first name) present with the wrong type
}

// object opens raw as an object, or records that it is not one.
func (p *parser) object(path string, edit int, raw json.RawMessage) *fields {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		p.problem(edit, orWhole(path), "want an object, found %s", describe(string(raw)))
		return nil
	}
	f := &fields{p: p, edit: edit, path: path, m: map[string]json.RawMessage{}, orig: map[string]string{}, used: map[string]bool{}, wrong: map[string]bool{}}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		n := normKey(k)
		if prev, dup := f.orig[n]; dup {
			p.problem(edit, f.at(k), "given twice (also as %q)", prev)
			continue
		}
		f.m[n], f.orig[n] = m[k], k
	}
	return f
}

func orWhole(path string) string {
	if path == "" {
		return "reply"
	}
	return path
}

func (f *fields) at(k string) string {
	if f.path == "" {
		return k
	}
	return f.path + "." + k
}

// take returns the first of names (normalised) present and not null; two present is a problem.
func (f *fields) take(names ...string) (json.RawMessage, bool) {
	v, _, ok := f.lookup(names...)
	return v, ok
}

// lookup is take that also says the field's name as written.
func (f *fields) lookup(names ...string) (json.RawMessage, string, bool) {
	if f == nil || f.m == nil {
		return nil, "", false
	}
	var got json.RawMessage
	var from string
	for _, n := range names {
		v, ok := f.m[n]
		if !ok {
			continue
		}
		f.used[n] = true
		if string(v) == "null" {
			continue
		}
		if from != "" {
			f.p.problem(f.edit, f.at(f.orig[n]), "says the same as %q: give one", from)
			continue
		}
		got, from = v, f.orig[n]
	}
	return got, from, from != ""
}

func (f *fields) str(names ...string) string {
	v, key, ok := f.lookup(names...)
	if !ok {
		return ""
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		f.p.problem(f.edit, f.at(key), "want a string, found %s", describe(string(v)))
		f.wrong[names[0]] = true
	}
	return s
}

func (f *fields) int(names ...string) int {
	v, key, ok := f.lookup(names...)
	if !ok {
		return 0
	}
	var n int
	if err := json.Unmarshal(v, &n); err != nil {
		f.p.problem(f.edit, f.at(key), "want a whole number, found %s", describe(string(v)))
	}
	return n
}

// done lists the object's unread fields as ignored.
func (f *fields) done() {
	if f == nil {
		return
	}
	var left []string
	for n, k := range f.orig {
		if !f.used[n] {
			left = append(left, f.at(k))
		}
	}
	slices.Sort(left)
	f.p.ignored = append(f.p.ignored, left...)
}
