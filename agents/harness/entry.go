package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
)

// Kind is one of the four kinds of harness entry.
type Kind string

const (
	Note     Kind = "note"     // a rule, sent in the context
	Memory   Kind = "memory"   // a fact, listed in the overview
	Skill    Kind = "skill"    // a Python module with a short doc
	Subagent Kind = "subagent" // a role for rlm(spec=…)
)

// Kinds lists them in the order the context shows them.
var Kinds = []Kind{Note, Memory, Skill, Subagent}

// dir is where a kind lives in the store's tree.
func (k Kind) dir() string {
	switch k {
	case Note:
		return "notes"
	case Memory:
		return "memories"
	case Skill:
		return "skills"
	case Subagent:
		return "subagents"
	}
	return ""
}

// ParseKind accepts a kind by its name or its directory's ("notes").
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds {
		if s == string(k) || s == k.dir() {
			return k, nil
		}
	}
	return "", fmt.Errorf("unknown harness kind %q: want note, memory, skill or subagent", s)
}

// Spec is a subagent role: what rlm(task, spec=name) starts a child with.
type Spec struct {
	Instructions string `json:"instructions"`
	Model        string `json:"model,omitempty"`
	MaxTurnSteps int    `json:"maxTurnSteps,omitempty"`
}

// Entry is one harness entry as stored. Version is the commit that last changed it (set by the
// store on read; ignored on write).
type Entry struct {
	Kind    Kind   `json:"kind"`
	ID      string `json:"id"`
	Title   string `json:"title"`
	Body    string `json:"body,omitempty"`   // note and memory text; a skill's doc
	Module  string `json:"module,omitempty"` // a skill's Python source
	Spec    *Spec  `json:"spec,omitempty"`   // a subagent's role
	Version string `json:"version,omitempty"`
}

// MaxEntryBytes bounds one entry's stored files.
const MaxEntryBytes = 64 << 10

var (
	idPattern    = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	skillPattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,63}$`) // importable as a module
)

// ErrInvalid marks an entry that cannot be stored; the message says what is wrong.
var ErrInvalid = errors.New("invalid harness entry")

// Validate checks what the store needs: a known kind, an id usable as a path (and, for a skill,
// as a Python module name), a one-line title, the kind's content, and the size limit.
func (e Entry) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s %q: %s", ErrInvalid, e.Kind, e.ID, fmt.Sprintf(format, args...))
	}
	if e.Kind.dir() == "" {
		return fmt.Errorf("%w: unknown kind %q: want note, memory, skill or subagent", ErrInvalid, e.Kind)
	}
	pat := idPattern
	if e.Kind == Skill {
		pat = skillPattern
	}
	if !pat.MatchString(e.ID) {
		if e.Kind == Skill {
			return bad("a skill id is its module name: lower-case letters, digits and _, starting with a letter or _")
		}
		return bad("an id is 1-64 lower-case letters, digits, - and _, starting with a letter or digit")
	}
	if strings.TrimSpace(e.Title) == "" || strings.ContainsAny(e.Title, "\r\n") {
		return bad("the title must be one non-empty line")
	}
	switch e.Kind {
	case Note, Memory:
		if strings.TrimSpace(e.Body) == "" {
			return bad("the body is empty")
		}
		if e.Module != "" || e.Spec != nil {
			return bad("a %s has a body only (no module, no spec)", e.Kind)
		}
	case Skill:
		if strings.TrimSpace(e.Module) == "" {
			return bad("a skill needs its Python module")
		}
		if e.Spec != nil {
			return bad("a skill has no spec")
		}
	case Subagent:
		if e.Spec == nil || strings.TrimSpace(e.Spec.Instructions) == "" {
			return bad("a subagent spec needs instructions")
		}
		if e.Module != "" || e.Body != "" {
			return bad("a subagent has a spec only")
		}
		if e.Spec.MaxTurnSteps < 0 {
			return bad("maxTurnSteps %d is negative", e.Spec.MaxTurnSteps)
		}
	}
	n := 0
	for _, f := range e.files() {
		n += len(f.data)
	}
	if n > MaxEntryBytes {
		return bad("%d bytes, over the limit of %d", n, MaxEntryBytes)
	}
	return nil
}

type file struct {
	path string
	data []byte
}

// files is the entry as the tree holds it, readable with the git CLI:
// notes/<id>.md, memories/<id>.md, skills/<id>/SKILL.md + skills/<id>/<id>.py,
// subagents/<id>.json.
func (e Entry) files() []file {
	md := func(body string) []byte {
		return []byte("# " + e.Title + "\n\n" + strings.TrimRight(body, "\n") + "\n")
	}
	d := e.Kind.dir()
	switch e.Kind {
	case Note, Memory:
		return []file{{path.Join(d, e.ID+".md"), md(e.Body)}}
	case Skill:
		return []file{{path.Join(d, e.ID, "SKILL.md"), md(e.Body)}, {path.Join(d, e.ID, e.ID+".py"), []byte(e.Module)}}
	case Subagent:
		b, _ := json.MarshalIndent(struct {
			Title string `json:"title"`
			*Spec
		}{e.Title, e.Spec}, "", "  ")
		return []file{{path.Join(d, e.ID+".json"), append(b, '\n')}}
	}
	return nil
}

// entryPath is the path that identifies an entry in the tree (a skill's directory).
func entryPath(k Kind, id string) string {
	switch k {
	case Note, Memory:
		return path.Join(k.dir(), id+".md")
	case Subagent:
		return path.Join(k.dir(), id+".json")
	}
	return path.Join(k.dir(), id)
}

// splitMarkdown reads "# title\n\nbody".
func splitMarkdown(b []byte) (title, body string) {
	s := string(b)
	first, rest, _ := strings.Cut(s, "\n")
	if t, ok := strings.CutPrefix(first, "# "); ok {
		return strings.TrimSpace(t), strings.TrimRight(strings.TrimLeft(rest, "\n"), "\n")
	}
	return "", strings.TrimRight(s, "\n")
}

// decodeEntry rebuilds an entry from its files (path → content) under the kind's directory.
func decodeEntry(k Kind, id string, files map[string][]byte) (Entry, error) {
	e := Entry{Kind: k, ID: id}
	switch k {
	case Note, Memory:
		e.Title, e.Body = splitMarkdown(files[entryPath(k, id)])
	case Skill:
		doc, ok := files[path.Join(k.dir(), id, "SKILL.md")]
		mod, ok2 := files[path.Join(k.dir(), id, id+".py")]
		if !ok || !ok2 {
			return e, fmt.Errorf("skill %s lacks SKILL.md or %s.py", id, id)
		}
		e.Title, e.Body = splitMarkdown(doc)
		e.Module = string(mod)
	case Subagent:
		var v struct {
			Title string `json:"title"`
			Spec
		}
		if err := json.Unmarshal(files[entryPath(k, id)], &v); err != nil {
			return e, fmt.Errorf("subagent %s: %w", id, err)
		}
		e.Title, e.Spec = v.Title, &v.Spec
	}
	return e, nil
}

// Scope is where an entry applies: one session, the repository (its sessions share it), or
// the user's every repository.
type Scope string

const (
	ScopeSession   Scope = "session"
	ScopeWorkspace Scope = "workspace"
	ScopeGlobal    Scope = "global"
)

// Scopes lists them narrowest first: the order in which a narrower entry shadows a wider one.
var Scopes = []Scope{ScopeSession, ScopeWorkspace, ScopeGlobal}

// ParseScope accepts a scope by name.
func ParseScope(s string) (Scope, error) {
	for _, sc := range Scopes {
		if s == string(sc) {
			return sc, nil
		}
	}
	return "", fmt.Errorf("unknown harness scope %q: want session, workspace or global", s)
}

// Ref is the scope's ref: refs/arbor/harness/<scope>, and …/session/<id> for a session's.
func (sc Scope) Ref(session string) string {
	if sc == ScopeSession {
		return "refs/arbor/harness/session/" + session
	}
	return "refs/arbor/harness/" + string(sc)
}
