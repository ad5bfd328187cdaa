package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestHarnessCLI edits the workspace harness with the real binary as a user would — flags, a
// file, and $EDITOR — and checks every change against the git CLI: `git show` of the ref reads
// what `arbor harness show` prints, `git log --format=%(trailers)` names the user as author, a
// rollback is a new commit restoring the old text, and an edit based on a version another
// writer replaced meanwhile is refused naming the current version, with the edit kept.
func TestHarnessCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const ref = "refs/arbor/harness/workspace"
	show := func(path string) string { t.Helper(); return e.git(e.repo, "show", ref+":"+path) }
	version := func(r result) string {
		t.Helper()
		i := strings.Index(r.stdout, "version ")
		if i < 0 {
			t.Fatalf("no version in the output:\n%s", r)
		}
		return strings.Fields(r.stdout[i+len("version "):])[0]
	}
	fails := func(r result, texts ...string) {
		t.Helper()
		if r.code == 0 {
			t.Fatalf("want a failure:\n%s", r)
		}
		for _, s := range texts {
			if !strings.Contains(r.stderr, s) {
				t.Fatalf("stderr lacks %q:\n%s", s, r)
			}
		}
	}

	if r := e.mustArbor("harness", "ls"); !strings.Contains(r.stdout, "the workspace harness has no entries") {
		t.Fatalf("ls of an empty harness:\n%s", r)
	}
	r := e.mustArbor("harness", "edit", "note", "tests-first", "--title", "Run the tests first", "--body", "Before changing code, run the tests.")
	v1 := version(r)
	const text1 = "# Run the tests first\n\nBefore changing code, run the tests.\n"
	if got := show("notes/tests-first.md"); got != text1 {
		t.Fatalf("git show after create: %q", got)
	}
	if got := e.mustArbor("harness", "show", "note", "tests-first").stdout; got != text1 {
		t.Fatalf("arbor harness show: %q, want what git shows", got)
	}
	if got := e.git(e.repo, "log", "--format=%(trailers)", ref); strings.TrimSpace(got) != "Arbor-Author: user" {
		t.Fatalf("trailers: %q", got)
	}

	// $EDITOR edits the file the entry is; what it saves is the new version.
	editor := filepath.Join(e.root, "editor.sh")
	writeFile(t, editor, "#!/bin/sh\nsed -i 's/Before changing code/Always, before changing code/' \"$1\"\n")
	os.Chmod(editor, 0o755)
	e.vars["EDITOR"], e.vars["VISUAL"] = editor, ""
	v2 := version(e.mustArbor("harness", "edit", "notes", "tests-first"))
	const text2 = "# Run the tests first\n\nAlways, before changing code, run the tests.\n"
	if got := show("notes/tests-first.md"); got != text2 || v2 == v1 {
		t.Fatalf("git show after the editor (%s → %s): %q", v1, v2, got)
	}
	var listed []struct{ Kind, ID, Title, Version string }
	if err := json.Unmarshal([]byte(e.mustArbor("harness", "ls", "--json").stdout), &listed); err != nil ||
		len(listed) != 1 || listed[0].ID != "tests-first" || !strings.HasPrefix(listed[0].Version, v2) {
		t.Fatalf("ls --json = %+v, %v", listed, err)
	}
	hist := e.mustArbor("harness", "history", "note", "tests-first").stdout
	if lines := strings.Split(strings.TrimSpace(hist), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[0], v2) ||
		!strings.Contains(lines[0], "user") || !strings.Contains(lines[1], "create note tests-first") {
		t.Fatalf("history:\n%s", hist)
	}
	diff := e.mustArbor("harness", "diff", "note", "tests-first", v1).stdout
	if !strings.Contains(diff, "-Before changing code, run the tests.") || !strings.Contains(diff, "+Always, before changing code, run the tests.") {
		t.Fatalf("diff:\n%s", diff)
	}
	if want := e.git(e.repo, "diff", v1, v2, "--", "notes/tests-first.md"); diff != want {
		t.Fatalf("arbor harness diff differs from git diff:\n%s\nwant:\n%s", diff, want)
	}

	// A rollback restores the text as a new commit; the change rolled back stays in the log.
	e.mustArbor("harness", "rollback", "note", "tests-first", v1)
	if got := show("notes/tests-first.md"); got != text1 {
		t.Fatalf("git show after rollback: %q", got)
	}
	if n := len(strings.Fields(e.git(e.repo, "log", "--format=%H", ref))); n != 3 {
		t.Fatalf("%d commits after the rollback, want 3", n)
	}

	// Another writer changes the note while the editor is open: the save is refused, naming
	// the version that writer made, and the user's text is kept.
	writeFile(t, editor, "#!/bin/sh\n"+arborBin+" harness edit note tests-first --body 'a concurrent edit' >/dev/null || exit 1\n"+
		"sed -i 's/Before changing code/Mine: before changing code/' \"$1\"\n")
	r = e.arbor("harness", "edit", "note", "tests-first")
	cur := strings.TrimSpace(e.git(e.repo, "log", "-1", "--format=%H", ref))
	fails(r, "changed since version", "the current version is "+cur[:12], "your edit is kept in")
	if got := show("notes/tests-first.md"); !strings.Contains(got, "a concurrent edit") {
		t.Fatalf("the concurrent edit was lost: %q", got)
	}
	kept := strings.TrimSpace(r.stderr[strings.Index(r.stderr, "your edit is kept in ")+len("your edit is kept in "):])
	if data, err := os.ReadFile(kept); err != nil || !strings.Contains(string(data), "Mine: before changing code") {
		t.Fatalf("kept edit %s: %q, %v", kept, data, err)
	}
	fails(e.arbor("harness", "edit", "note", "tests-first", "--base", v2, "--body", "x"), "the current version is "+cur[:12])

	// A skill and a subagent from files in the form the editor shows.
	skill := filepath.Join(e.root, "skill.txt")
	writeFile(t, skill, "# Check formatting\n\nRuns gofmt -l.\n\n----- fmt_check.py -----\ndef run():\n    return 0\n")
	e.mustArbor("harness", "edit", "skill", "fmt_check", "--file", skill)
	if got := show("skills/fmt_check/fmt_check.py"); got != "def run():\n    return 0\n" {
		t.Fatalf("skill module: %q", got)
	}
	if got := show("skills/fmt_check/SKILL.md"); got != "# Check formatting\n\nRuns gofmt -l.\n" {
		t.Fatalf("SKILL.md: %q", got)
	}
	if got := e.mustArbor("harness", "show", "skill", "fmt_check").stdout; got != string(mustRead(t, skill)) {
		t.Fatalf("show skill: %q", got)
	}
	spec := filepath.Join(e.root, "reviewer.json")
	writeFile(t, spec, `{"title": "Reviewer", "instructions": "Review the diff.", "model": "m", "maxTurnSteps": 3}`)
	e.mustArbor("harness", "edit", "subagent", "reviewer", "--file", spec)
	var sub struct {
		Title, Instructions, Model string
		MaxTurnSteps               int
	}
	if err := json.Unmarshal([]byte(show("subagents/reviewer.json")), &sub); err != nil || sub.Instructions != "Review the diff." || sub.MaxTurnSteps != 3 {
		t.Fatalf("subagent json: %+v, %v", sub, err)
	}

	e.mustArbor("harness", "rm", "note", "tests-first")
	if out, err := exec.Command("git", "-C", e.repo, "cat-file", "-e", ref+":notes/tests-first.md").CombinedOutput(); err == nil {
		t.Fatalf("the note is in the tree after rm: %s", out)
	}

	// The global scope is the user's bare repository under $XDG_DATA_HOME, in no repository.
	other := t.TempDir()
	if r := e.arborIn(other, "harness", "edit", "--scope", "global", "memory", "editor", "--title", "Editor", "--body", "The user edits with vim."); r.code != 0 {
		t.Fatalf("global edit outside any repository:\n%s", r)
	}
	global := filepath.Join(e.vars["XDG_DATA_HOME"], "arbor", "harness")
	if got := e.git(global, "show", "refs/arbor/harness/global:memories/editor.md"); got != "# Editor\n\nThe user edits with vim.\n" {
		t.Fatalf("git show of the global memory: %q", got)
	}
	if r := e.mustArbor("harness", "ls", "--kind", "memory"); strings.Contains(r.stdout, "editor") {
		t.Fatalf("the global memory shows in the workspace scope:\n%s", r)
	}

	// Bad input names what was wrong and what exists.
	fails(e.arbor("harness", "show", "note", "tests-first"), "no such harness entry", "has no note entries")
	fails(e.arbor("harness", "show", "skill", "nope"), "has skill entries fmt_check")
	fails(e.arbor("harness", "show", "rule", "x"), `unknown harness kind "rule"`)
	fails(e.arbor("harness", "ls", "--scope", "team"), `unknown harness scope "team"`)
	fails(e.arbor("harness", "rollback", "note", "tests-first", "deadbeef"), `no version "deadbeef"`)
	fails(e.arbor("harness", "edit", "note", "Bad", "--title", "t", "--body", "b"), "an id is")
	fails(e.arbor("harness", "frob"), `unknown harness command "frob"`)
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHarnessCLISessionScope: --scope session edits the session's own ref, beside the
// workspace's in the repository, and nothing else.
func TestHarnessCLISessionScope(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := sessionID(t, e.mustArbor("run", "compute two"))
	fails := e.arbor("harness", "ls", "--scope", "session")
	if fails.code == 0 || !strings.Contains(fails.stderr, "needs a session id") {
		t.Fatalf("session scope without --session:\n%s", fails)
	}
	e.mustArbor("harness", "edit", "--scope", "session", "--session", id, "note", "short-cells", "--title", "Short cells", "--body", "Keep cells short.")
	refs := strings.Fields(e.git(e.repo, "for-each-ref", "--format=%(refname)", "refs/arbor/harness/"))
	if len(refs) != 1 || !strings.HasPrefix(refs[0], "refs/arbor/harness/session/"+id) {
		t.Fatalf("harness refs %v, want the session's alone", refs)
	}
	if got := e.git(e.repo, "show", refs[0]+":notes/short-cells.md"); got != "# Short cells\n\nKeep cells short.\n" {
		t.Fatalf("git show: %q", got)
	}
	if r := e.mustArbor("harness", "ls", "--scope", "session", "--session", id); !strings.Contains(r.stdout, "short-cells") {
		t.Fatalf("ls of the session scope:\n%s", r)
	}
	if r := e.mustArbor("harness", "ls"); !strings.Contains(r.stdout, "no entries") {
		t.Fatalf("the session's note shows in the workspace scope:\n%s", r)
	}
}
