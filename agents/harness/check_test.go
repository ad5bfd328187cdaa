package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// checkedStore is a workspace store with an entry of each kind, the memory in two versions so
// that its first lives only in the history.
func checkedStore(t *testing.T) (*Store, string) {
	t.Helper()
	st, repo := newRepoStore(t)
	ctx := t.Context()
	for _, e := range []Entry{
		{Kind: Note, ID: "tests-first", Title: "Run the tests first", Body: "Before changing code, run the tests."},
		{Kind: Memory, ID: "editor", Title: "Editor", Body: "The user edits with vim."},
		{Kind: Skill, ID: "fmt_check", Title: "Check formatting", Body: "fmt_check() -> int", Module: "def fmt_check():\n    return 0\n"},
		{Kind: Subagent, ID: "reviewer", Title: "Reviewer", Spec: &Spec{Instructions: "Review the diff."}},
	} {
		if _, err := st.Put(ctx, e, "", user); err != nil {
			t.Fatal(err)
		}
	}
	m, err := st.Get(ctx, Memory, "editor")
	if err != nil {
		t.Fatal(err)
	}
	m.Body = "The user edits with neovim."
	if _, err := st.Put(ctx, m, m.Version, user); err != nil {
		t.Fatal(err)
	}
	return st, repo
}

// objectFile is the loose file of the object rev names, writable.
func objectFile(t *testing.T, repo, rev string) string {
	t.Helper()
	id := strings.TrimSpace(gitOut(t, repo, "rev-parse", rev))
	p := filepath.Join(repo, ".git", "objects", id[:2], id[2:])
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func truncate(t *testing.T, p string, n int64) {
	t.Helper()
	if err := os.Truncate(p, n); err != nil {
		t.Fatal(err)
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	const ref = "refs/arbor/harness/workspace"
	for _, tc := range []struct {
		name    string
		corrupt func(t *testing.T, repo string) // nil: the store as it was written
		want    []string                        // in the problems; none: sound
		fix     string                          // in the fix
	}{
		{name: "sound"},
		{name: "sound when packed", corrupt: func(t *testing.T, repo string) { gitOut(t, repo, "gc", "-q") }},
		{name: "damage the harness does not reach", corrupt: func(t *testing.T, repo string) {
			// The repository's own objects are none of the check's business: it reads only
			// what the harness ref reaches.
			blob := strings.TrimSpace(gitRun(t, repo, nil, "the repository's own file", "hash-object", "-w", "--stdin"))
			truncate(t, objectFile(t, repo, blob), 5)
		}},
		{name: "a blob at head missing", corrupt: func(t *testing.T, repo string) {
			os.Remove(objectFile(t, repo, ref+":memories/editor.md"))
		}, want: []string{"(memories/editor.md) is missing from the object store"}, fix: "update-ref -d " + ref},
		{name: "a blob only in the history missing", corrupt: func(t *testing.T, repo string) {
			os.Remove(objectFile(t, repo, ref+"~1:memories/editor.md"))
		}, want: []string{"(memories/editor.md) is missing from the object store"}, fix: "update-ref -d " + ref},
		{name: "a blob truncated", corrupt: func(t *testing.T, repo string) {
			p := objectFile(t, repo, ref+":skills/fmt_check/fmt_check.py")
			fi, _ := os.Stat(p)
			truncate(t, p, fi.Size()-4)
		}, want: []string{"(skills/fmt_check/fmt_check.py) is corrupt: "}, fix: "update-ref -d " + ref},
		{name: "a blob emptied", corrupt: func(t *testing.T, repo string) {
			truncate(t, objectFile(t, repo, ref+":notes/tests-first.md"), 0)
		}, want: []string{"(notes/tests-first.md) is missing from the object store (or its file is empty)"}},
		{name: "the head tree truncated", corrupt: func(t *testing.T, repo string) {
			truncate(t, objectFile(t, repo, ref+"^{tree}"), 12)
		}, want: []string{"corrupt"}, fix: "update-ref -d " + ref},
		{name: "the head tree missing", corrupt: func(t *testing.T, repo string) {
			os.Remove(objectFile(t, repo, ref+"^{tree}"))
		}, want: []string{"tree ", " is missing from the object store"}, fix: "update-ref -d " + ref},
		{name: "a parent commit missing", corrupt: func(t *testing.T, repo string) {
			os.Remove(objectFile(t, repo, ref+"~2"))
		}, want: []string{"the history cannot be walked: ", "Could not read"}, fix: "update-ref -d " + ref},
		{name: "the head commit missing", corrupt: func(t *testing.T, repo string) {
			os.Remove(objectFile(t, repo, ref))
		}, want: []string{"the head commit ", "is missing from the object store"}, fix: "update-ref -d " + ref},
		{name: "garbage in the ref file", corrupt: func(t *testing.T, repo string) {
			writeGarbage(t, filepath.Join(repo, ".git", "refs", "arbor", "harness", "workspace"), "garbage\n")
		}, want: []string{`refs/arbor/harness/workspace holds "garbage", not a commit id`}, fix: filepath.Join(".git", "refs", "arbor", "harness", "workspace")},
		{name: "an entry that does not decode", corrupt: func(t *testing.T, repo string) {
			// A subagent spec that is not JSON, committed as git would: the objects are sound.
			index := []string{"GIT_INDEX_FILE=" + filepath.Join(t.TempDir(), "index")}
			blob := strings.TrimSpace(gitRun(t, repo, nil, "not json", "hash-object", "-w", "--stdin"))
			gitRun(t, repo, index, "", "read-tree", ref)
			gitRun(t, repo, index, "", "update-index", "--add", "--cacheinfo", "100644,"+blob+",subagents/broken.json")
			tree := strings.TrimSpace(gitRun(t, repo, index, "", "write-tree"))
			head := strings.TrimSpace(gitOut(t, repo, "rev-parse", ref))
			c := strings.TrimSpace(gitRun(t, repo, nil, "hand-made", "-c", "user.name=u", "-c", "user.email=u@x", "commit-tree", tree, "-p", head))
			gitOut(t, repo, "update-ref", ref, c)
		}, want: []string{"the subagent entries at head do not decode: subagent broken: "}, fix: "arbor harness"},
		{name: "no repository left", corrupt: func(t *testing.T, repo string) {
			os.RemoveAll(filepath.Join(repo, ".git", "objects"))
		}, want: []string{"cannot be read as a git repository"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, repo := checkedStore(t)
			if tc.corrupt != nil {
				tc.corrupt(t, repo)
			}
			r, err := st.Check(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("problems %q; fix %q", r.Problems, r.Fix)
			if r.Ref != ref || r.GitDir != filepath.Join(repo, ".git") {
				t.Errorf("report names %s in %s", r.Ref, r.GitDir)
			}
			if len(tc.want) == 0 {
				if !r.OK() || r.Commits != 5 || r.Entries != 4 || r.Objects < 5+4 || r.Head == "" || r.Fix != "" {
					t.Errorf("a sound store: %+v; want ok, 5 commits, 4 entries", r)
				}
				return
			}
			if r.OK() {
				t.Fatalf("corrupt store reported ok: %+v", r)
			}
			all := strings.Join(r.Problems, "\n")
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("problems lack %q:\n%s", w, all)
				}
			}
			if !strings.Contains(r.Fix, tc.fix) {
				t.Errorf("fix %q lacks %q", r.Fix, tc.fix)
			}
		})
	}
}

// An absent ref is an empty store, which is sound.
func TestCheckEmpty(t *testing.T) {
	t.Parallel()
	st, _ := newRepoStore(t)
	r, err := st.Check(t.Context())
	if err != nil || !r.OK() || r.Head != "" || r.Commits != 0 {
		t.Fatalf("empty store: %+v, %v", r, err)
	}
}

// Two corrupt objects are both named: the check goes on past the first.
func TestCheckNamesEveryCorruptObject(t *testing.T) {
	t.Parallel()
	st, repo := checkedStore(t)
	const ref = "refs/arbor/harness/workspace"
	for _, p := range []string{"notes/tests-first.md", "skills/fmt_check/SKILL.md"} {
		f := objectFile(t, repo, ref+":"+p)
		fi, _ := os.Stat(f)
		truncate(t, f, fi.Size()-3)
	}
	r, err := st.Check(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(r.Problems, "\n")
	if len(r.Problems) != 2 || !strings.Contains(all, "(notes/tests-first.md) is corrupt") || !strings.Contains(all, "(skills/fmt_check/SKILL.md) is corrupt") {
		t.Fatalf("problems:\n%s", all)
	}
}

// Refs lists every harness ref of the repository, one whose value is garbage too (git skips
// it), and nothing else.
func TestRefs(t *testing.T) {
	t.Parallel()
	st, repo := checkedStore(t)
	head, _ := st.Head(t.Context())
	gitOut(t, repo, "update-ref", "refs/arbor/harness/session/aaa", head)
	gitOut(t, repo, "update-ref", "refs/heads/other", head)
	writeGarbage(t, filepath.Join(repo, ".git", "refs", "arbor", "harness", "session", "bbb"), "junk\n")
	refs, err := Refs(t.Context(), filepath.Join(repo, ".git"))
	want := []string{"refs/arbor/harness/session/aaa", "refs/arbor/harness/session/bbb", "refs/arbor/harness/workspace"}
	if err != nil || strings.Join(refs, " ") != strings.Join(want, " ") {
		t.Fatalf("Refs = %v, %v; want %v", refs, err, want)
	}
}

func writeGarbage(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func gitRun(t *testing.T, dir string, env []string, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}
