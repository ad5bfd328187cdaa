package harness

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// sampleHarness has every kind in every scope, with ids shadowed across scopes.
func sampleHarness() []ScopeEntries {
	return []ScopeEntries{
		{Scope: "session", Entries: []Entry{
			{Kind: Note, ID: "style", Title: "House style", Body: "Use tabs.\nWrap at 100."},
			{Kind: Memory, ID: "ci", Title: "Where CI runs", Body: "CI runs on the self-hosted runner.\nIt takes 4 minutes."},
		}},
		{Scope: "workspace", Entries: []Entry{
			{Kind: Note, ID: "tests-first", Title: "Run the tests first", Body: "Before changing code, run the tests."},
			{Kind: Note, ID: "style", Title: "Old house style", Body: "Use spaces."},
			{Kind: Skill, ID: "run_tests", Title: "Run the project's tests", Body: "run_tests() -> str: the failures, if any.", Module: "def run_tests():\n    return ''\n"},
			{Kind: Memory, ID: "ci", Title: "Where CI ran once", Body: "On a laptop."},
		}},
		{Scope: "global", Entries: []Entry{
			{Kind: Subagent, ID: "reviewer", Title: "Reviews a diff", Spec: &Spec{Instructions: "Review the change; do not edit files.\nBe brief.", Model: "small"}},
			{Kind: Memory, ID: "editor", Title: "The user's editor", Body: "# The user's editor\n\nNeovim 0.7."},
			{Kind: Note, ID: "style", Title: "Global style", Body: "Be terse."},
		}},
	}
}

// TestRenderSample pins the block's layout: notes in full (narrowest scope wins), then one line
// per entry in scope, kind and id order.
func TestRenderSample(t *testing.T) {
	t.Parallel()
	got := Render(sampleHarness(), 0)
	want := `## Harness notes
Rules for this session; follow them.
### House style (style, session)
Use tabs.
Wrap at 100.
### Run the tests first (tests-first, workspace)
Before changing code, run the tests.

## Harness overview
One line each. In Python, harness.memories.get(id) (likewise harness.skills, harness.subagents) reads an entry in full and harness.memories.search("…") finds one.
- memory ci (session): Where CI runs — CI runs on the self-hosted runner.
- skill run_tests (workspace): Run the project's tests — run_tests() -> str: the failures, if any.; from arbor_skills import run_tests
- memory editor (global): The user's editor
- subagent reviewer (global): Reviews a diff — Review the change; do not edit files.; rlm("…", spec="reviewer")
`
	if got != want {
		t.Errorf("Render =\n%s\nwant\n%s", got, want)
	}
	if n := EstimateTokens(got); n > DefaultBudgetTokens {
		t.Errorf("%d tokens, over the budget", n)
	}
}

func TestRenderEmptyHarnessIsEmpty(t *testing.T) {
	t.Parallel()
	for name, in := range map[string][]ScopeEntries{
		"nil":          nil,
		"no entries":   {{Scope: "session"}, {Scope: "workspace", Entries: []Entry{}}, {Scope: "global"}},
		"unknown kind": {{Scope: "global", Entries: []Entry{{Kind: "rule", ID: "x", Title: "x", Body: "x"}}}},
	} {
		for _, budget := range []int{-1, 0, 1, 1500} {
			if got := Render(in, budget); got != "" {
				t.Errorf("%s, budget %d: Render = %q, want \"\"", name, budget, got)
			}
		}
	}
}

// shuffled copies the scopes and their entries in a random order.
func shuffled(r *rand.Rand, in []ScopeEntries) []ScopeEntries {
	out := make([]ScopeEntries, len(in))
	for i, s := range in {
		out[i] = ScopeEntries{Scope: s.Scope, Entries: slices.Clone(s.Entries)}
		r.Shuffle(len(out[i].Entries), func(a, b int) { out[i].Entries[a], out[i].Entries[b] = out[i].Entries[b], out[i].Entries[a] })
	}
	r.Shuffle(len(out), func(a, b int) { out[a], out[b] = out[b], out[a] })
	return out
}

// bigHarness has n memories in the global scope plus notes, skills and specs, enough to
// overflow any budget in the tests.
func bigHarness(n int) []ScopeEntries {
	var global []Entry
	for i := range n {
		global = append(global, Entry{Kind: Memory, ID: fmt.Sprintf("m%05d", i), Title: fmt.Sprintf("Fact %d", i),
			Body: fmt.Sprintf("Fact number %d about the build, with some words to make the line realistic.\nMore detail.", i)})
	}
	for i := range 30 {
		global = append(global, Entry{Kind: Skill, ID: fmt.Sprintf("skill_%02d", i), Title: "A skill", Body: "does a thing", Module: "x = 1\n"})
		global = append(global, Entry{Kind: Subagent, ID: fmt.Sprintf("spec-%02d", i), Title: "A role", Spec: &Spec{Instructions: "Do the role."}})
	}
	ws := []Entry{
		{Kind: Note, ID: "tests-first", Title: "Run the tests first", Body: "Before changing code, run the tests."},
		{Kind: Memory, ID: "m00007", Title: "Shadowed fact", Body: "The workspace's version of fact 7."},
	}
	for i := range 50 {
		ws = append(ws, Entry{Kind: Memory, ID: fmt.Sprintf("w%03d", i), Title: "Workspace fact", Body: "Detail."})
	}
	return []ScopeEntries{
		{Scope: "global", Entries: global},
		{Scope: "workspace", Entries: ws},
		{Scope: "session", Entries: []Entry{{Kind: Note, ID: "scratch", Title: "Scratch", Body: "Keep notes in notes.md."}}},
	}
}

// TestRenderIsByteStable renders the same harness twenty times, each from a differently
// shuffled input, as twenty turns without a harness change would.
func TestRenderIsByteStable(t *testing.T) {
	t.Parallel()
	for name, in := range map[string][]ScopeEntries{"fits": sampleHarness(), "overflows": bigHarness(2000)} {
		want := Render(in, 0)
		r := rand.New(rand.NewPCG(1, uint64(len(name))))
		for turn := range 20 {
			if got := Render(shuffled(r, in), 0); got != want {
				t.Fatalf("%s: turn %d renders differently:\n%s\nthen\n%s", name, turn, want, got)
			}
		}
	}
}

var memoriesLeftOut = regexp.MustCompile(`(?m)^- memories: (\d+) more; harness\.memories\.list\(\), harness\.memories\.search\("…"\), harness\.memories\.get\(id\)$`)

// TestRenderTenThousandMemoriesStayInBudget checks the budget holds at 10,000 entries and the
// overflow line counts exactly the memories not listed.
func TestRenderTenThousandMemoriesStayInBudget(t *testing.T) {
	t.Parallel()
	in := bigHarness(10000)
	const memories = 10000 + 50 // global's, less the shadowed one, plus the workspace's and its m00007
	for _, budget := range []int{0, 500, 1500, 4000} {
		got := Render(in, budget)
		want := budget
		if budget == 0 {
			want = DefaultBudgetTokens
		}
		if n := EstimateTokens(got); n > want || n < want*9/10 {
			t.Errorf("budget %d: the block is %d tokens; want at most %d and most of it used", budget, n, want)
		}
		shown := strings.Count(got, "\n- memory ")
		m := memoriesLeftOut.FindStringSubmatch(got)
		if m == nil {
			t.Fatalf("budget %d: no overflow line for memories in\n%s", budget, got)
		}
		if left, _ := strconv.Atoi(m[1]); shown+left != memories || shown == 0 {
			t.Errorf("budget %d: %d memories shown + %d left out, want %d in all", budget, shown, left, memories)
		}
		// Entries past the overview's room are counted per kind: the global skills and specs
		// come after the memories.
		for _, line := range []string{"- skills: 30 more;", "- subagents: 30 more;"} {
			if !strings.Contains(got, line) {
				t.Errorf("budget %d: no %q", budget, line)
			}
		}
		for _, note := range []string{"### Scratch (scratch, session)\nKeep notes in notes.md.\n", "### Run the tests first (tests-first, workspace)\n"} {
			if !strings.Contains(got, note) {
				t.Errorf("budget %d: note %q missing", budget, note)
			}
		}
		if strings.Contains(got, "(global): Fact 7 ") || !strings.Contains(got, "- memory m00007 (workspace): Shadowed fact") {
			t.Errorf("budget %d: the workspace's m00007 should shadow the global one", budget)
		}
	}
}

func TestRenderShadowsWiderScopes(t *testing.T) {
	t.Parallel()
	got := Render(sampleHarness(), 0)
	if n := strings.Count(got, "(style,"); n != 1 {
		t.Errorf("note style appears %d times, want once", n)
	}
	for _, hidden := range []string{"Use spaces.", "Be terse.", "On a laptop.", "Where CI ran once"} {
		if strings.Contains(got, hidden) {
			t.Errorf("%q from a wider scope is shown, though a narrower one shadows it", hidden)
		}
	}
	// Without the session scope, the workspace's note is the one in scope.
	in := sampleHarness()[1:]
	if got := Render(in, 0); !strings.Contains(got, "### Old house style (style, workspace)\nUse spaces.\n") || strings.Contains(got, "Be terse.") {
		t.Errorf("without the session scope:\n%s", got)
	}
	// Shadowing is per kind: a memory with a note's id is its own entry.
	in = []ScopeEntries{
		{Scope: "session", Entries: []Entry{{Kind: Note, ID: "same", Title: "A rule", Body: "Rule."}}},
		{Scope: "global", Entries: []Entry{{Kind: Memory, ID: "same", Title: "A fact", Body: "Fact."}}},
	}
	if got := Render(in, 0); !strings.Contains(got, "Rule.") || !strings.Contains(got, "- memory same (global): A fact") {
		t.Errorf("a note and a memory of one id:\n%s", got)
	}
}

var notesLeftOutLine = regexp.MustCompile(`(?m)^Notes not shown, over the context budget: (\d+)\. They are rules too: read them in Python with harness\.notes\.list\(\) and harness\.notes\.get\(id\)\.$`)

// TestRenderBoundsNotes: notes alone over the budget are cut, counted, and leave room for the
// overview to say what else exists.
func TestRenderBoundsNotes(t *testing.T) {
	t.Parallel()
	var notes []Entry
	for i := range 200 {
		notes = append(notes, Entry{Kind: Note, ID: fmt.Sprintf("n%03d", i), Title: fmt.Sprintf("Rule %d", i), Body: strings.Repeat("Always do this. ", 12)})
	}
	few := []ScopeEntries{
		{Scope: "workspace", Entries: notes},
		{Scope: "global", Entries: []Entry{{Kind: Memory, ID: "fact", Title: "A fact", Body: "x"}, {Kind: Skill, ID: "sk", Title: "S", Body: "d", Module: "x=1"}}},
	}
	var facts []Entry
	for i := range 1000 {
		facts = append(facts, Entry{Kind: Memory, ID: fmt.Sprintf("f%04d", i), Title: "A fact", Body: "Some detail about it."})
	}
	many := []ScopeEntries{{Scope: "workspace", Entries: notes}, {Scope: "global", Entries: facts}}
	for _, budget := range []int{0, MinBudgetTokens, 3000} {
		got := Render(few, budget)
		limit := max(budget, MinBudgetTokens)
		if budget == 0 {
			limit = DefaultBudgetTokens
		}
		if n := EstimateTokens(got); n > limit {
			t.Errorf("budget %d: %d tokens", budget, n)
		}
		shown := strings.Count(got, "### Rule ")
		m := notesLeftOutLine.FindStringSubmatch(got)
		if m == nil {
			t.Fatalf("budget %d: no line counting the notes left out:\n%s", budget, got)
		}
		if left, _ := strconv.Atoi(m[1]); shown+left != 200 || shown == 0 {
			t.Errorf("budget %d: %d notes shown + %d left out, want 200", budget, shown, left)
		}
		if !strings.Contains(got, "### Rule 0 (n000, workspace)") {
			t.Errorf("budget %d: the first note is not shown", budget)
		}
		// Room is kept for the overview: the few other entries are listed.
		for _, line := range []string{"\n- memory fact (global): A fact — x\n", "\n- skill sk (global): S — d; from arbor_skills import sk\n"} {
			if !strings.Contains(got, line) {
				t.Errorf("budget %d: no %q in\n%s", budget, line, got)
			}
		}

		// With many other entries, the overview still counts them and says how to read them.
		got = Render(many, budget)
		if n := EstimateTokens(got); n > limit {
			t.Errorf("budget %d, many memories: %d tokens", budget, n)
		}
		if !notesLeftOutLine.MatchString(got) {
			t.Errorf("budget %d, many memories: no line counting the notes left out", budget)
		}
		m = memoriesLeftOut.FindStringSubmatch(got)
		if m == nil {
			t.Fatalf("budget %d, many memories: no overflow line for memories in\n%s", budget, got)
		}
		if left, _ := strconv.Atoi(m[1]); left+strings.Count(got, "\n- memory ") != 1000 {
			t.Errorf("budget %d, many memories: %d left out + %d shown, want 1000", budget, left, strings.Count(got, "\n- memory "))
		}
	}
}

// TestRenderLongNoteDoesNotHideShortOnes: a note too long for the budget is left out (and
// counted), and the shorter notes after it are still sent.
func TestRenderLongNoteDoesNotHideShortOnes(t *testing.T) {
	t.Parallel()
	in := []ScopeEntries{{Scope: "session", Entries: []Entry{
		{Kind: Note, ID: "a-huge", Title: "Huge", Body: strings.Repeat("word ", 4000)},
		{Kind: Note, ID: "b-short", Title: "Short", Body: "Be brief."},
	}}}
	got := Render(in, 0)
	if !strings.Contains(got, "### Short (b-short, session)\nBe brief.\n") || strings.Contains(got, "### Huge") {
		t.Errorf("Render =\n%s", got)
	}
	if m := notesLeftOutLine.FindStringSubmatch(got); m == nil || m[1] != "1" {
		t.Errorf("want one note counted as left out:\n%s", got)
	}
}

// TestRenderBudgetHolds sweeps budgets, including ones below the minimum, over harnesses heavy
// in notes, in long lines and in entries.
func TestRenderBudgetHolds(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 5000)
	heavy := []ScopeEntries{{Scope: "global", Entries: []Entry{
		{Kind: Note, ID: "n", Title: long, Body: long},
		{Kind: Memory, ID: "m", Title: long, Body: long},
		{Kind: Skill, ID: "s", Title: long, Body: long, Module: "x"},
		{Kind: Subagent, ID: "r", Title: long, Spec: &Spec{Instructions: long}},
	}}}
	for name, in := range map[string][]ScopeEntries{"big": bigHarness(600), "heavy": heavy, "sample": sampleHarness()} {
		for budget := -10; budget <= 2000; budget += 37 {
			got := Render(in, budget)
			limit := max(budget, MinBudgetTokens)
			if budget <= 0 {
				limit = DefaultBudgetTokens
			}
			if n := EstimateTokens(got); n > limit {
				t.Errorf("%s, budget %d: %d tokens", name, budget, n)
			}
			if !utf8.ValidString(got) {
				t.Errorf("%s, budget %d: invalid UTF-8", name, budget)
			}
		}
	}
}

func TestRenderClipsOverviewLines(t *testing.T) {
	t.Parallel()
	in := []ScopeEntries{{Scope: "global", Entries: []Entry{
		{Kind: Memory, ID: "m", Title: strings.Repeat("T", 200), Body: "\n\n  " + strings.Repeat("ü", 300) + "\nsecond line"},
	}}}
	got := Render(in, 0)
	line := strings.Split(got, "\n")[2]
	want := "- memory m (global): " + strings.Repeat("T", maxTitleRunes-1) + "… — " + strings.Repeat("ü", maxSummaryRunes-1) + "…"
	if line != want {
		t.Errorf("line =\n%s\nwant\n%s", line, want)
	}
	if strings.Contains(got, "second line") {
		t.Error("only the first line of the body belongs in the overview")
	}
}

func TestEstimateTokensMatchesTheModelsRule(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]int{"": 0, "a": 1, "abcd": 1, "abcde": 2, "é": 1, "12345678": 2} {
		if got := EstimateTokens(s); got != want {
			t.Errorf("EstimateTokens(%q) = %d, want %d", s, got, want)
		}
	}
}

// TestRenderUnknownScopesComeLast: scopes of other names rank after global, by name, each
// whole (not interleaved by kind).
func TestRenderUnknownScopesComeLast(t *testing.T) {
	t.Parallel()
	in := []ScopeEntries{
		{Scope: "zeta", Entries: []Entry{{Kind: Memory, ID: "z", Title: "Z", Body: "z"}}},
		{Scope: "alpha", Entries: []Entry{{Kind: Skill, ID: "a", Title: "A", Body: "a", Module: "x"}, {Kind: Memory, ID: "z", Title: "Alpha's z", Body: "z"}}},
		{Scope: "global", Entries: []Entry{{Kind: Subagent, ID: "g", Title: "G", Spec: &Spec{Instructions: "g"}}}},
	}
	got := Render(in, 0)
	var order []string
	for l := range strings.Lines(got) {
		if strings.HasPrefix(l, "- ") {
			order = append(order, strings.Fields(l)[2])
		}
	}
	if want := []string{"g", "z", "a"}; !slices.Equal(order, want) || !strings.Contains(got, "- memory z (alpha): Alpha's z") {
		t.Errorf("ids in order %v, want %v:\n%s", order, want, got)
	}
}

// canonical orders the scopes and entries as the stores give them: scopes narrowest first,
// each kind's list sorted by id.
func canonical(in []ScopeEntries) []ScopeEntries {
	out := slices.Clone(in)
	slices.SortFunc(out, func(a, b ScopeEntries) int { return scopeRank(a.Scope) - scopeRank(b.Scope) })
	for i := range out {
		out[i].Entries = slices.Clone(out[i].Entries)
		slices.SortFunc(out[i].Entries, func(a, b Entry) int {
			return cmp.Or(kindRank(a.Kind)-kindRank(b.Kind), strings.Compare(a.ID, b.ID))
		})
	}
	return out
}

// BenchmarkRender10000 renders 10,000 memories and 112 other entries given in the stores'
// order; BenchmarkRender10000Shuffled in no order, the sort's worst case.
func BenchmarkRender10000(b *testing.B) {
	in := canonical(bigHarness(10000))
	for b.Loop() {
		Render(in, 0)
	}
}

func BenchmarkRender10000Shuffled(b *testing.B) {
	in := shuffled(rand.New(rand.NewPCG(1, 2)), bigHarness(10000))
	for b.Loop() {
		Render(in, 0)
	}
}

// TestRenderDuplicatesResolveByContent: two entries of one kind and id in one scope (which a
// store never holds, but a caller could pass) render the same whatever their order.
func TestRenderDuplicatesResolveByContent(t *testing.T) {
	t.Parallel()
	a := Entry{Kind: Note, ID: "dup", Title: "First", Body: "One."}
	b := Entry{Kind: Note, ID: "dup", Title: "Second", Body: "Two."}
	ab := Render([]ScopeEntries{{Scope: "workspace", Entries: []Entry{a, b}}}, 0)
	ba := Render([]ScopeEntries{{Scope: "workspace", Entries: []Entry{b, a}}}, 0)
	if ab != ba || strings.Count(ab, "(dup, workspace)") != 1 {
		t.Errorf("order a, b:\n%s\norder b, a:\n%s", ab, ba)
	}
}

// TestRenderSmallBudgetsAreRaised: a budget below the minimum renders as the minimum does,
// so the skeleton and some entries always fit.
func TestRenderSmallBudgetsAreRaised(t *testing.T) {
	t.Parallel()
	in := bigHarness(500)
	want := Render(in, MinBudgetTokens)
	for _, budget := range []int{1, 10, MinBudgetTokens - 1} {
		if got := Render(in, budget); got != want {
			t.Errorf("budget %d renders differently from the minimum, %d", budget, MinBudgetTokens)
		}
	}
	if !strings.Contains(want, "\n- memory ") {
		t.Errorf("at the minimum budget no memory is listed:\n%s", want)
	}
}
