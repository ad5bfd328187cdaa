package harness

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// DefaultBudgetTokens is the context budget of the harness block when none is configured.
const DefaultBudgetTokens = 1500

// MinBudgetTokens is the smallest budget [Render] honours: below it the block's skeleton (its
// headings and the lines saying what was left out and how to read it) might not fit, and a block
// that hides the harness without saying so is worse than a slightly larger one.
const MinBudgetTokens = 256

// Caps on the one-line overview of an entry, so that a long title or first line cannot take the
// room of many entries.
const (
	maxTitleRunes   = 80
	maxSummaryRunes = 120
)

// EstimateTokens estimates the tokens s takes in a model's context at 4 characters (bytes) per
// token, rounded up: the rule agents/model uses when a server reports no usage, so the budget
// here is counted the way the rest of the context is.
func EstimateTokens(s string) int { return (len(s) + 3) / 4 }

// ScopeEntries is one scope's entries, of all kinds, as [Render] takes them. Scope is "session",
// "workspace" or "global"; any other name ranks after those, by name.
type ScopeEntries struct {
	Scope   string
	Entries []Entry
}

// scopeRank orders scopes narrowest first: a narrower scope's entry shadows a wider one's.
func scopeRank(s string) int {
	switch s {
	case "session":
		return 0
	case "workspace":
		return 1
	case "global":
		return 2
	}
	return 3
}

func kindRank(k Kind) int {
	if i := slices.Index(Kinds, k); i >= 0 {
		return i
	}
	return len(Kinds)
}

// scoped is an entry in the caller's slice with its scope. It points rather than copies, and
// keeps the sort keys at hand, so that sorting 10,000 entries stays cheap.
type scoped struct {
	scope, kind int32 // the scope's place in the order of scopes; kindRank
	id          string
	*Entry
}

// inScope is the entries that apply: one per kind and id, the narrowest scope's, ordered by
// scope (session, workspace, global), then kind (as in [Kinds]), then id. Entries of unknown
// kinds are dropped. Duplicates within one scope (which a store never holds) resolve by content,
// so the order of the input never shows in the output.
func inScope(scopes []ScopeEntries) (names []string, _ []scoped) {
	n := 0
	for _, s := range scopes {
		n += len(s.Entries)
		if !slices.Contains(names, s.Scope) {
			names = append(names, s.Scope)
		}
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(scopeRank(a), scopeRank(b)), strings.Compare(a, b)) })
	all := make([]scoped, 0, n)
	for _, s := range scopes {
		si := int32(slices.Index(names, s.Scope))
		for i := range s.Entries {
			if e := &s.Entries[i]; e.Kind.dir() != "" {
				all = append(all, scoped{si, int32(kindRank(e.Kind)), e.ID, e})
			}
		}
	}
	// A turn reads its stores in this order already (scopes narrowest first, kinds in order,
	// ids sorted): checking costs one pass, sorting much more.
	if !slices.IsSortedFunc(all, compareScoped) {
		slices.SortFunc(all, compareScoped)
	}

	// Sorted, each (scope, kind) is a run ordered by id, and the runs of narrower scopes come
	// first: an entry is shadowed when its id is in an earlier run of its kind. Both are sorted
	// by id, so one cursor per earlier run, moving forward only, finds it: a merge, linear in
	// the entries.
	out := all[:0] // compacting in place only overwrites what was read
	earlier := make([][][]scoped, len(Kinds))
	var cursors []int
	start := 0 // of the current run in out
	for i, e := range all {
		if i == 0 || e.scope != all[i-1].scope || e.kind != all[i-1].kind {
			if run := out[start:]; i > 0 && len(run) > 0 {
				k := run[0].kind
				earlier[k] = append(earlier[k], run)
			}
			start = len(out)
			cursors = append(cursors[:0], make([]int, len(earlier[e.kind]))...)
		}
		if len(out) > start && out[len(out)-1].id == e.id {
			continue // a duplicate in one scope: the first by content stays
		}
		if shadowed(earlier[e.kind], cursors, e.id) {
			continue
		}
		out = append(out, e)
	}
	return names, out
}

// shadowed reports whether id is in one of runs, moving each run's cursor past the ids before
// it (the ids asked come in increasing order).
func shadowed(runs [][]scoped, cursors []int, id string) bool {
	found := false
	for r, run := range runs {
		c := cursors[r]
		for c < len(run) && run[c].id < id {
			c++
		}
		cursors[r] = c
		if c < len(run) && run[c].id == id {
			found = true
		}
	}
	return found
}

// compareScoped orders by scope, kind and id, then by content. (Not cmp.Or at first: it would
// evaluate every comparison, and the sort is most of a render's time.)
func compareScoped(a, b scoped) int {
	if a.scope != b.scope {
		return cmp.Compare(a.scope, b.scope)
	}
	if a.kind != b.kind {
		return cmp.Compare(a.kind, b.kind)
	}
	if a.id != b.id {
		return strings.Compare(a.id, b.id)
	}
	return cmp.Or(
		strings.Compare(a.Version, b.Version),
		strings.Compare(a.Title, b.Title),
		strings.Compare(a.Body, b.Body),
		strings.Compare(a.Module, b.Module),
		strings.Compare(a.instructions(), b.instructions()),
	)
}

func (e Entry) instructions() string {
	if e.Spec == nil {
		return ""
	}
	return e.Spec.Instructions
}

// Render is the harness block of a turn's context, sent after the immutable base prompt: the
// notes in scope in full (they are rules), then an overview of the memories, skills and
// subagent specs, one line each (title and the first line of the body, or of a spec's
// instructions; a skill's line says how to import it, a spec's how to start it). scopes may come
// in any order; an entry in a narrower scope (session, then workspace, then global) shadows one
// of the same kind and id in a wider one. Entries are ordered by scope, kind and id.
//
// The block stays within budgetTokens as [EstimateTokens] counts it (DefaultBudgetTokens when
// budgetTokens ≤ 0, at least MinBudgetTokens). Notes come first: those that do not fit are left
// out, and the block says how many and how to read them. The overview lists entries in order
// until the room is spent, then says how many of each kind were left out and how the model
// reads them from Python (harness.memories.list(), .search("…"), .get(id)). Room for those lines
// is kept even when the notes alone would fill the budget, so the model always learns what
// exists.
//
// The output depends only on the entries, not on the input's order, maps or the clock: the same
// harness gives the same bytes, turn after turn, as provider prompt caches need. No entries give
// "", so a session without a harness sends the base prompt unchanged. The block ends with a
// newline.
func Render(scopes []ScopeEntries, budgetTokens int) string {
	if budgetTokens <= 0 {
		budgetTokens = DefaultBudgetTokens
	}
	budgetTokens = max(budgetTokens, MinBudgetTokens)
	limit := budgetTokens * 4 // EstimateTokens(s) ≤ budget ⇔ len(s) ≤ 4·budget

	names, entries := inScope(scopes)
	if len(entries) == 0 {
		return ""
	}
	totals := make(kindCounts, len(Kinds))
	for _, e := range entries {
		totals[e.kind]++
	}
	nn := totals[kindRank(Note)]
	notes := make([]scoped, 0, nn)
	rest := entries[:0] // the rest, compacted in place
	for _, e := range entries {
		if e.Kind == Note {
			notes = append(notes, e)
		} else {
			rest = append(rest, e)
		}
	}

	// The overview's skeleton, with the longest left-out lines it could need, is kept out of
	// the notes' room.
	var reserve int
	if len(rest) > 0 {
		reserve = len(overviewHeader) + len(leftOutHeader)
		reserve += totals.leftOutLen()
	}

	var b strings.Builder
	if len(notes) > 0 {
		b.WriteString(renderNotes(names, notes, limit-reserve))
	}
	if len(rest) > 0 {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(renderOverview(names, rest, totals, limit-b.Len()))
	}
	return b.String()
}

// kindCounts counts entries by kind, indexed as [Kinds].
type kindCounts []int

// leftOutLen is the length of the lines saying how many of each kind were left out, were all of
// them: an upper bound of what those lines take.
func (c kindCounts) leftOutLen() int {
	n := 0
	for i, k := range Kinds {
		if k != Note && c[i] > 0 {
			n += len(leftOutLine(k, c[i]))
		}
	}
	return n
}

const (
	notesHeader    = "## Harness notes\nRules for this session; follow them.\n"
	overviewHeader = "## Harness overview\nOne line each. In Python, harness.memories.get(id) (likewise harness.skills, harness.subagents) reads an entry in full and harness.memories.search(\"…\") finds one.\n"
	leftOutHeader  = "Not listed here, over the context budget:\n"
)

// renderNotes writes the notes that fit room, in order, skipping any that do not so that a long
// rule does not hide the shorter ones after it, and counts the rest.
func renderNotes(names []string, notes []scoped, room int) string {
	// Lengths first: with a thousand notes only a few fit, and only those are written.
	total := len(notesHeader)
	for _, n := range notes {
		total += noteLen(names, n)
	}
	var b strings.Builder
	b.WriteString(notesHeader)
	if total <= room {
		b.Grow(total)
		for _, n := range notes {
			writeNote(&b, names, n)
		}
		return b.String()
	}
	room -= len(notesHeader) + len(notesLeftOut(len(notes)))
	left := 0
	for _, n := range notes {
		if l := noteLen(names, n); l > room {
			left++
		} else {
			writeNote(&b, names, n)
			room -= l
		}
	}
	b.WriteString(notesLeftOut(left))
	return b.String()
}

// A note's block is "### Title (id, scope)\nbody\n".
func noteLen(names []string, n scoped) int {
	return len("###  (, )\n\n") + len(n.Title) + len(n.ID) + len(names[n.scope]) + len(strings.TrimRight(n.Body, "\n"))
}

func writeNote(b *strings.Builder, names []string, n scoped) {
	b.WriteString("### ")
	b.WriteString(n.Title)
	b.WriteString(" (")
	b.WriteString(n.ID)
	b.WriteString(", ")
	b.WriteString(names[n.scope])
	b.WriteString(")\n")
	b.WriteString(strings.TrimRight(n.Body, "\n"))
	b.WriteString("\n")
}

func notesLeftOut(n int) string {
	return fmt.Sprintf("Notes not shown, over the context budget: %d. They are rules too: read them in Python with harness.notes.list() and harness.notes.get(id).\n", n)
}

// renderOverview writes one line per entry, in order, until room (less the lines saying what
// was left out) is spent. Lines are made only as far as they could fit: with 10,000 entries
// most are never formatted.
func renderOverview(names []string, rest []scoped, totals kindCounts, room int) string {
	var lines []string
	used := len(overviewHeader)
	for _, e := range rest {
		l := overviewLine(names, e)
		lines = append(lines, l)
		if used += len(l); used > room {
			break
		}
	}
	if used <= room {
		return overviewHeader + strings.Join(lines, "")
	}
	room -= len(overviewHeader) + len(leftOutHeader) + totals.leftOutLen()
	var b strings.Builder
	b.WriteString(overviewHeader)
	shown := make(kindCounts, len(Kinds))
	for i, l := range lines {
		if len(l) > room {
			break
		}
		b.WriteString(l)
		room -= len(l)
		shown[rest[i].kind]++
	}
	b.WriteString(leftOutHeader)
	for i, k := range Kinds {
		if n := totals[i] - shown[i]; k != Note && n > 0 {
			b.WriteString(leftOutLine(k, n))
		}
	}
	return b.String()
}

// overviewLine is "- memory id (scope): Title — first line", with how to use a skill or spec.
func overviewLine(names []string, e scoped) string {
	var b strings.Builder
	fmt.Fprintf(&b, "- %s %s (%s): %s", e.Kind, e.ID, names[e.scope], clip(e.Title, maxTitleRunes))
	src := e.Body
	if e.Kind == Subagent {
		src = e.instructions()
	}
	if s := clip(firstLine(src), maxSummaryRunes); s != "" && s != e.Title {
		b.WriteString(" — " + s)
	}
	switch e.Kind {
	case Skill:
		b.WriteString("; from arbor_skills import " + e.ID)
	case Subagent:
		fmt.Fprintf(&b, "; rlm(\"…\", spec=%q)", e.ID)
	}
	b.WriteString("\n")
	return b.String()
}

func leftOutLine(k Kind, n int) string {
	d := k.dir()
	return fmt.Sprintf("- %s: %d more; harness.%s.list(), harness.%s.search(\"…\"), harness.%s.get(id)\n", d, n, d, d, d)
}

// firstLine is s's first non-blank line, trimmed, with a Markdown heading's marks dropped.
func firstLine(s string) string {
	for l := range strings.Lines(s) {
		if l = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(l), "#")); l != "" {
			return l
		}
	}
	return ""
}

// clip shortens s to at most n runes, marking a cut with "…", and keeps it on one line.
func clip(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' {
			return ' '
		}
		return r
	}, s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for j := range s {
		if i == n-1 {
			return strings.TrimRight(s[:j], " ") + "…"
		}
		i++
	}
	return s
}
