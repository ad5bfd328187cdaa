package harnessbench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"

	"github.com/arborhq/arbor/agents/harness"
)

// words make the generated text: prose of a coding agent's notes, not random bytes, so that
// its lines and lengths are those Render meets.
var words = strings.Fields(`the test suite runs before each change and after it; a failing check
is read in full before any edit. prefer small commits with the reason in the message. the
build uses go 1.26 and the module cache lives under the home directory. never skip a test to
make it pass, and never edit a verifier script. the api client retries twice with backoff,
then reports the error with the request id. use the repository's formatter and linter on
every file touched. database migrations are reversible and named by date. the parser reads
untrusted bytes, so each new branch gets a fuzz seed. logs go through slog with the session
id attached. configuration comes from the project file first, then the environment. keep
functions to one screen and name packages by what they provide.`)

func sentence(r *rand.Rand, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[r.IntN(len(words))])
	}
	return b.String()
}

func title(r *rand.Rand) string {
	s := sentence(r, 3+r.IntN(6))
	return strings.ToUpper(s[:1]) + strings.TrimRight(s[1:], ".,;")
}

// paragraphs is n words over one to three lines.
func paragraphs(r *rand.Rand, n int) string {
	lines := 1 + r.IntN(3)
	parts := make([]string, lines)
	for i := range parts {
		parts[i] = sentence(r, max(1, n/lines))
	}
	return strings.Join(parts, "\n")
}

func module(r *rand.Rand, id string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\"\"\"%s.\"\"\"\n\nimport json\nimport subprocess\n\n", sentence(r, 8))
	for f := range 3 + r.IntN(5) {
		fmt.Fprintf(&b, "\ndef %s_%d(path, *args, check=True):\n    \"\"\"%s.\"\"\"\n", id, f, sentence(r, 10))
		for range 4 + r.IntN(8) {
			fmt.Fprintf(&b, "    out = subprocess.run([%q, path, *args], capture_output=True, text=True, check=check)\n", words[r.IntN(len(words))])
		}
		b.WriteString("    return json.loads(out.stdout or \"null\")\n")
	}
	return b.String()
}

// Generate returns n entries with distinct kinds and ids, deterministically: 10% notes (rules of
// 40–120 words), 60% memories (facts of 15–60 words), 15% skills (a doc and a Python module of
// one to three kilobytes), 15% subagent specs (40–150 words of instructions), the proportions
// of a harness grown over months.
func Generate(n int) []harness.Entry {
	r := rand.New(rand.NewPCG(10, uint64(n)))
	out := make([]harness.Entry, 0, n)
	for i := range n {
		var e harness.Entry
		switch p := i % 20; {
		case p < 2:
			e = harness.Entry{Kind: harness.Note, ID: fmt.Sprintf("rule-%05d", i), Title: title(r), Body: paragraphs(r, 40+r.IntN(81))}
		case p < 14:
			e = harness.Entry{Kind: harness.Memory, ID: fmt.Sprintf("fact-%05d", i), Title: title(r), Body: paragraphs(r, 15+r.IntN(46))}
		case p < 17:
			id := fmt.Sprintf("tool_%05d", i)
			e = harness.Entry{Kind: harness.Skill, ID: id, Title: title(r), Body: sentence(r, 20+r.IntN(31)), Module: module(r, id)}
		default:
			sp := &harness.Spec{Instructions: paragraphs(r, 40+r.IntN(111))}
			if i%3 == 0 {
				sp.Model, sp.MaxTurnSteps = "small-model", 20
			}
			e = harness.Entry{Kind: harness.Subagent, ID: fmt.Sprintf("role-%05d", i), Title: title(r), Spec: sp}
		}
		out = append(out, e)
	}
	return out
}

// Spread deals entries over the three scopes as a user's harness holds them — a tenth in the
// session, three tenths in the workspace, the rest global — and gives one session or workspace
// entry in fifty the id of a global one of its kind, so that shadowing is part of the work.
// Every entry gets a version, and each scope's entries come in the order a turn reads them from
// its store: by kind (as in [harness.Kinds]), each kind's List sorted by id.
func Spread(entries []harness.Entry) []harness.ScopeEntries {
	scopes := []harness.ScopeEntries{{Scope: "session"}, {Scope: "workspace"}, {Scope: "global"}}
	for i, e := range entries {
		e.Version = fmt.Sprintf("%040x", i+1)
		switch i % 10 {
		case 0:
			scopes[0].Entries = append(scopes[0].Entries, e)
		case 1, 2, 3:
			scopes[1].Entries = append(scopes[1].Entries, e)
		default:
			scopes[2].Entries = append(scopes[2].Entries, e)
		}
	}
	glob := scopes[2].Entries
	for s := range 2 {
		for i := range scopes[s].Entries {
			if e := &scopes[s].Entries[i]; i%50 == 0 {
				for _, g := range glob[i%len(glob):] {
					if g.Kind == e.Kind {
						e.ID = g.ID
						break
					}
				}
			}
		}
	}
	for _, s := range scopes {
		slices.SortFunc(s.Entries, func(a, b harness.Entry) int {
			return cmp.Or(cmp.Compare(slices.Index(harness.Kinds, a.Kind), slices.Index(harness.Kinds, b.Kind)), strings.Compare(a.ID, b.ID))
		})
	}
	return scopes
}

// files is an entry's files as the store's tree holds them (see package harness: notes/<id>.md,
// memories/<id>.md, skills/<id>/SKILL.md and <id>.py, subagents/<id>.json). [BuildStore]
// checks, through [harness.Store.List], that the store reads back exactly what was written.
func files(e harness.Entry) map[string][]byte {
	md := func(body string) []byte {
		return []byte("# " + e.Title + "\n\n" + strings.TrimRight(body, "\n") + "\n")
	}
	switch e.Kind {
	case harness.Note:
		return map[string][]byte{path.Join("notes", e.ID+".md"): md(e.Body)}
	case harness.Memory:
		return map[string][]byte{path.Join("memories", e.ID+".md"): md(e.Body)}
	case harness.Skill:
		return map[string][]byte{path.Join("skills", e.ID, "SKILL.md"): md(e.Body), path.Join("skills", e.ID, e.ID+".py"): []byte(e.Module)}
	case harness.Subagent:
		b, _ := json.MarshalIndent(struct {
			Title string `json:"title"`
			*harness.Spec
		}{e.Title, e.Spec}, "", "  ")
		return map[string][]byte{path.Join("subagents", e.ID+".json"): append(b, '\n')}
	}
	return nil
}

// importStream is a git fast-import stream of one commit on ref holding every entry: one
// process writes every blob, the trees and the commit, where a Put per entry would take a
// commit each.
func importStream(ref string, entries []harness.Entry) []byte {
	var b bytes.Buffer
	msg := fmt.Sprintf("import %d entries\n\nArbor-Author: user\n", len(entries))
	fmt.Fprintf(&b, "commit %s\ncommitter Arbor <arbor@localhost> 1767225600 +0000\ndata %d\n%s\n", ref, len(msg), msg)
	for _, e := range entries {
		for p, data := range files(e) {
			fmt.Fprintf(&b, "M 100644 inline %s\ndata %d\n", p, len(data))
			b.Write(data)
			b.WriteByte('\n')
		}
	}
	b.WriteString("done\n")
	return b.Bytes()
}

// BuildStore makes gitDir (a bare repository, as the global scope's) hold entries on ref in one
// commit, and checks that the store lists exactly them.
func BuildStore(ctx context.Context, gitDir, ref string, entries []harness.Entry) (*harness.Store, error) {
	if err := harness.InitBare(ctx, gitDir); err != nil {
		return nil, err
	}
	if err := fastImport(ctx, gitDir, ref, entries); err != nil {
		return nil, err
	}
	st, err := harness.Open(gitDir, ref)
	if err != nil {
		return nil, err
	}
	return st, verify(ctx, st, entries)
}

func fastImport(ctx context.Context, gitDir, ref string, entries []harness.Entry) error {
	cmd := exec.CommandContext(ctx, "git", "fast-import", "--quiet", "--done")
	cmd.Env = gitEnv("GIT_DIR=" + gitDir)
	cmd.Stdin = bytes.NewReader(importStream(ref, entries))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git fast-import into %s: %w: %s", gitDir, err, out)
	}
	return nil
}

// verify checks that st lists entries, field for field.
func verify(ctx context.Context, st *harness.Store, entries []harness.Entry) error {
	want := map[string]harness.Entry{}
	for _, e := range entries {
		want[string(e.Kind)+"/"+e.ID] = e
	}
	n := 0
	for _, k := range harness.Kinds {
		got, err := st.List(ctx, k)
		if err != nil {
			return err
		}
		n += len(got)
		for _, g := range got {
			w, ok := want[string(k)+"/"+g.ID]
			if !ok || g.Version == "" || g.Title != w.Title || g.Body != w.Body || g.Module != w.Module ||
				(g.Spec == nil) != (w.Spec == nil) || g.Spec != nil && *g.Spec != *w.Spec {
				return fmt.Errorf("harness store %s: %s %s reads back as %+v, want %+v", st.Ref(), k, g.ID, g, w)
			}
		}
	}
	if n != len(entries) {
		return fmt.Errorf("harness store %s lists %d entries, want %d", st.Ref(), n, len(entries))
	}
	return nil
}

// gitEnv is the caller's environment without what would point git at another repository, plus
// extra: the environment the store's own git commands run in.
func gitEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GIT_") && k != "GIT_CONFIG_GLOBAL" && k != "GIT_CONFIG_NOSYSTEM" {
			continue
		}
		env = append(env, kv)
	}
	return append(append(env, "LC_ALL=C"), extra...)
}

// worktree makes dir an ordinary repository whose checkout holds entries, as files, in one
// commit on main: where the git CLI commits the same change for the reference figures.
func worktree(ctx context.Context, dir string, entries []harness.Entry) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := gitIn(ctx, dir, "init", "-q", "-b", "main"); err != nil {
		return err
	}
	if err := fastImport(ctx, path.Join(dir, ".git"), "refs/heads/main", entries); err != nil {
		return err
	}
	return gitIn(ctx, dir, "reset", "-q", "--hard")
}

// identity is the author and committer of the git CLI's commits, as the store's.
var identity = []string{"GIT_AUTHOR_NAME=Arbor", "GIT_AUTHOR_EMAIL=arbor@localhost",
	"GIT_COMMITTER_NAME=Arbor", "GIT_COMMITTER_EMAIL=arbor@localhost"}

// gitIn runs the git CLI in the worktree dir, as a user would.
func gitIn(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir, cmd.Env = dir, gitEnv(identity...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git %s in %s: %w: %s", strings.Join(args, " "), dir, err, out)
	}
	return nil
}
