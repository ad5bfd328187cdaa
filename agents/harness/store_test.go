package harness

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// newRepoStore opens the workspace scope of a fresh repository, as the daemon would.
func newRepoStore(t *testing.T) (*Store, string) {
	t.Helper()
	repo := filepath.Join(t.TempDir(), "repo")
	gitOut(t, t.TempDir(), "init", "-q", "-b", "main", repo)
	st, err := Open(filepath.Join(repo, ".git"), "refs/arbor/harness/workspace")
	if err != nil {
		t.Fatal(err)
	}
	return st, repo
}

var user = Change{Author: "user"}

func TestStoreCRUDAndGitSeesIt(t *testing.T) {
	t.Parallel()
	st, repo := newRepoStore(t)
	ctx := t.Context()
	note := Entry{Kind: Note, ID: "tests-first", Title: "Run the tests first", Body: "Before changing code, run the tests."}
	v1, err := st.Put(ctx, note, "", Change{Author: "agent", Session: "abc123", Turn: 3, Trigger: []uint64{12, 15}, Intended: "fewer broken commits"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Get(ctx, Note, "tests-first")
	if err != nil || got.Title != note.Title || got.Body != note.Body || got.Version != v1 {
		t.Fatalf("get = %+v, %v; want the note at %s", got, err, v1)
	}
	// The git CLI reads the same tree and trailers.
	if s := gitOut(t, repo, "show", "refs/arbor/harness/workspace:notes/tests-first.md"); s != "# Run the tests first\n\nBefore changing code, run the tests.\n" {
		t.Errorf("git show = %q", s)
	}
	tr := gitOut(t, repo, "log", "-1", "--format=%(trailers)", "refs/arbor/harness/workspace")
	for _, want := range []string{"Arbor-Author: agent", "Arbor-Session: abc123", "Arbor-Turn: 3", "Arbor-Trigger: 12,15", "Arbor-Intended-Effect: fewer broken commits"} {
		if !strings.Contains(tr, want) {
			t.Errorf("trailers %q lack %q", tr, want)
		}
	}

	skill := Entry{Kind: Skill, ID: "run_tests", Title: "Run the project's tests", Body: "run_tests() -> str",
		Module: "import subprocess\n\ndef run_tests():\n    return subprocess.run(['python', '-m', 'unittest'], capture_output=True, text=True).stderr\n"}
	if _, err := st.Put(ctx, skill, "", user); err != nil {
		t.Fatal(err)
	}
	spec := Entry{Kind: Subagent, ID: "reviewer", Title: "Reviews a diff", Spec: &Spec{Instructions: "Review the change; do not edit files.", Model: "small", MaxTurnSteps: 5}}
	if _, err := st.Put(ctx, spec, "", user); err != nil {
		t.Fatal(err)
	}
	if s := gitOut(t, repo, "ls-tree", "-r", "--name-only", "refs/arbor/harness/workspace"); s != "notes/tests-first.md\nskills/run_tests/SKILL.md\nskills/run_tests/run_tests.py\nsubagents/reviewer.json\n" {
		t.Errorf("tree:\n%s", s)
	}
	gs, err := st.Get(ctx, Skill, "run_tests")
	if err != nil || gs.Module != skill.Module || gs.Body != skill.Body {
		t.Errorf("skill = %+v, %v", gs, err)
	}
	ga, err := st.Get(ctx, Subagent, "reviewer")
	if err != nil || *ga.Spec != *spec.Spec || ga.Title != spec.Title {
		t.Errorf("subagent = %+v, %v", ga, err)
	}

	// Update with the version read; the stale version is refused, naming the current one.
	note.Body = "Run the tests before and after every change."
	v2, err := st.Put(ctx, note, v1, user)
	if err != nil {
		t.Fatal(err)
	}
	note.Body = "lost update"
	_, err = st.Put(ctx, note, v1, user)
	var stale *StaleError
	if !errors.As(err, &stale) || stale.Current != v2 || !strings.Contains(err.Error(), v2[:12]) {
		t.Fatalf("stale write: %v, want a StaleError naming %s", err, v2)
	}
	if _, err := st.Put(ctx, note, "", user); !errors.As(err, &stale) {
		t.Errorf("create over an existing entry: %v", err)
	}
	// Storing what is there makes no commit.
	same := Entry{Kind: Note, ID: "tests-first", Title: "Run the tests first", Body: "Run the tests before and after every change."}
	if v, err := st.Put(ctx, same, v2, user); err != nil || v != v2 {
		t.Errorf("no-op put = %s, %v; want %s", v, err, v2)
	}

	list, err := st.List(ctx, Note)
	if err != nil || len(list) != 1 || list[0].Version != v2 {
		t.Errorf("list = %+v, %v", list, err)
	}
	// Delete needs the version, and then the entry is gone.
	if _, err := st.Delete(ctx, Note, "tests-first", v1, user); !errors.As(err, &stale) {
		t.Errorf("stale delete: %v", err)
	}
	if _, err := st.Delete(ctx, Note, "tests-first", v2, user); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, Note, "tests-first"); !errors.Is(err, ErrNotFound) {
		t.Errorf("get after delete: %v", err)
	}
	if n := gitOut(t, repo, "rev-list", "--count", "refs/arbor/harness/workspace"); n != "5\n" {
		t.Errorf("%s commits, want 5 (three creates, an update, a delete)", strings.TrimSpace(n))
	}
	if out := gitOut(t, repo, "fsck", "--no-dangling"); strings.Contains(out, "error") {
		t.Errorf("git fsck: %s", out)
	}
}

func TestHistoryDiffAndRollback(t *testing.T) {
	t.Parallel()
	st, _ := newRepoStore(t)
	ctx := t.Context()
	m := Entry{Kind: Memory, ID: "db", Title: "Database", Body: "Tests need Postgres on :5432."}
	v1, err := st.Put(ctx, m, "", Change{Author: "agent", Session: "s1", Turn: 1})
	if err != nil {
		t.Fatal(err)
	}
	m.Body = "Tests use SQLite; no server needed."
	v2, err := st.Put(ctx, m, v1, Change{Author: "refine", Trigger: []uint64{40}, Intended: "stop starting Postgres"})
	if err != nil {
		t.Fatal(err)
	}
	hist, err := st.History(ctx, Memory, "db")
	if err != nil || len(hist) != 2 || hist[0].Commit != v2 || hist[1].Commit != v1 {
		t.Fatalf("history = %+v, %v", hist, err)
	}
	if c := hist[0].Change; c.Author != "refine" || len(c.Trigger) != 1 || c.Trigger[0] != 40 || c.Intended != "stop starting Postgres" {
		t.Errorf("newest change = %+v", c)
	}
	d, err := st.Diff(ctx, Memory, "db", v1, v2)
	if err != nil || !strings.Contains(d, "-Tests need Postgres") || !strings.Contains(d, "+Tests use SQLite") {
		t.Errorf("diff:\n%s %v", d, err)
	}
	// Roll the refine edit back: a new commit, the old text back, both changes still in history.
	v3, err := st.Rollback(ctx, Memory, "db", v1, user)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := st.Get(ctx, Memory, "db")
	if got.Body != "Tests need Postgres on :5432." || got.Version != v3 {
		t.Errorf("after rollback: %+v", got)
	}
	if hist, _ := st.History(ctx, Memory, "db"); len(hist) != 3 || !strings.HasPrefix(hist[0].Subject, "rollback memory db to ") {
		t.Errorf("history after rollback: %+v", hist)
	}
	// Rolling back to before it existed deletes it; the version it had is still readable.
	if _, err := st.Rollback(ctx, Memory, "db", emptyTreeCommit(t, st), user); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, Memory, "db"); !errors.Is(err, ErrNotFound) {
		t.Errorf("after rollback to nothing: %v", err)
	}
	if old, err := st.GetAt(ctx, v2, Memory, "db"); err != nil || old.Body != "Tests use SQLite; no server needed." {
		t.Errorf("get at %s: %+v %v", v2, old, err)
	}
}

// emptyTreeCommit makes a commit of the empty tree: a version at which no entry exists.
func emptyTreeCommit(t *testing.T, st *Store) string {
	t.Helper()
	v, err := st.git(t.Context(), signature, []byte("empty\n"), "commit-tree", emptyTree)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(v)
}

func TestBadInputNamesWhatIsWrong(t *testing.T) {
	t.Parallel()
	st, _ := newRepoStore(t)
	ctx := t.Context()
	for _, tc := range []struct {
		e    Entry
		want string
	}{
		{Entry{Kind: "rule", ID: "x", Title: "t", Body: "b"}, "unknown kind"},
		{Entry{Kind: Note, ID: "../escape", Title: "t", Body: "b"}, "an id is"},
		{Entry{Kind: Skill, ID: "run-tests", Title: "t", Module: "x=1"}, "module name"},
		{Entry{Kind: Note, ID: "x", Title: "two\nlines", Body: "b"}, "one non-empty line"},
		{Entry{Kind: Note, ID: "x", Title: "t", Body: strings.Repeat("a", MaxEntryBytes+1)}, "over the limit"},
		{Entry{Kind: Subagent, ID: "x", Title: "t"}, "needs instructions"},
		{Entry{Kind: Skill, ID: "x", Title: "t"}, "needs its Python module"},
	} {
		_, err := st.Put(ctx, tc.e, "", user)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("put %+v: %v, want %q", tc.e.ID, err, tc.want)
		}
	}
	if _, err := st.Put(ctx, Entry{Kind: Note, ID: "x", Title: "t", Body: "b"}, "", Change{Author: "model"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown author: %v", err)
	}
	if _, err := st.Get(ctx, Note, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("get unknown: %v", err)
	}
	if _, err := ParseKind("rules"); err == nil {
		t.Error("ParseKind accepted rules")
	}
	if _, err := Open(t.TempDir(), "refs/heads/main"); err == nil {
		t.Error("Open accepted a ref outside refs/arbor/harness/")
	}
}

// Writers in parallel (goroutines here; two daemons would race the same way through the ref's
// compare and swap) never lose a change: each either lands or is refused as stale.
func TestConcurrentWritersLoseNothing(t *testing.T) {
	t.Parallel()
	st, repo := newRepoStore(t)
	ctx := t.Context()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := Entry{Kind: Memory, ID: fmt.Sprintf("m%d", i), Title: "fact", Body: fmt.Sprint(i)}
			if _, err := st.Put(ctx, e, "", user); err != nil {
				t.Errorf("put %s: %v", e.ID, err)
			}
		}()
	}
	wg.Wait()
	list, err := st.List(ctx, Memory)
	if err != nil || len(list) != 8 {
		t.Fatalf("list: %d entries, %v", len(list), err)
	}
	for _, e := range list {
		if e.Version == "" {
			t.Errorf("%s has no version", e.ID)
		}
	}
	if n := gitOut(t, repo, "rev-list", "--count", "refs/arbor/harness/workspace"); n != "8\n" {
		t.Errorf("%s commits, want 8", strings.TrimSpace(n))
	}
}

func TestGlobalScopeInABareRepository(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "harness")
	if err := InitBare(t.Context(), dir); err != nil {
		t.Fatal(err)
	}
	if err := InitBare(t.Context(), dir); err != nil {
		t.Fatalf("second InitBare: %v", err)
	}
	st, err := Open(dir, "refs/arbor/harness/global")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(t.Context(), Entry{Kind: Note, ID: "style", Title: "House style", Body: "Small commits."}, "", user); err != nil {
		t.Fatal(err)
	}
	if s := gitOut(t, dir, "show", "refs/arbor/harness/global:notes/style.md"); !strings.Contains(s, "Small commits.") {
		t.Errorf("git show in the bare repository: %q", s)
	}
}

// Two stores on one ref (two daemons, or the daemon and the CLI) race only through the ref's
// compare and swap: a writer that loses it tries again on the new head, so every write of a
// different entry lands and none is lost.
func TestTwoStoresOnOneRef(t *testing.T) {
	t.Parallel()
	a, repo := newRepoStore(t)
	b, err := Open(filepath.Join(repo, ".git"), a.Ref())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var mu sync.Mutex
	landed := map[string]bool{}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := a
			if i%2 == 1 {
				st = b
			}
			id := fmt.Sprintf("m%d", i)
			if _, err := st.Put(ctx, Entry{Kind: Memory, ID: id, Title: "fact", Body: id}, "", user); err == nil {
				mu.Lock()
				landed[id] = true
				mu.Unlock()
			} else {
				t.Errorf("put %s: %v", id, err)
			}
		}()
	}
	wg.Wait()
	list, err := a.List(ctx, Memory)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 16 || len(landed) != 16 {
		t.Fatalf("%d entries in the store, %d writes reported success", len(list), len(landed))
	}
	for _, e := range list {
		if !landed[e.ID] {
			t.Errorf("%s is stored but its writer was told it failed", e.ID)
		}
	}
	if n := gitOut(t, repo, "rev-list", "--count", a.Ref()); strings.TrimSpace(n) != fmt.Sprint(len(landed)) {
		t.Errorf("%s commits for %d landed writes", strings.TrimSpace(n), len(landed))
	}
}

// ListAll is List of every kind, in the order of Kinds, with the same versions.
func TestListAllIsListOfEachKind(t *testing.T) {
	t.Parallel()
	st, _ := newRepoStore(t)
	ctx := t.Context()
	for _, e := range []Entry{
		{Kind: Memory, ID: "b", Title: "B", Body: "b"}, {Kind: Note, ID: "z", Title: "Z", Body: "z"},
		{Kind: Skill, ID: "s", Title: "S", Body: "doc", Module: "x = 1\n"}, {Kind: Note, ID: "a", Title: "A", Body: "a"},
		{Kind: Subagent, ID: "r", Title: "R", Spec: &Spec{Instructions: "review"}}, {Kind: Memory, ID: "a", Title: "MA", Body: "ma"},
	} {
		if _, err := st.Put(ctx, e, "", user); err != nil {
			t.Fatal(err)
		}
	}
	n, _ := st.Get(ctx, Note, "a")
	if _, err := st.Put(ctx, Entry{Kind: Note, ID: "a", Title: "A", Body: "a2"}, n.Version, user); err != nil {
		t.Fatal(err)
	}
	var want []Entry
	for _, k := range Kinds {
		es, err := st.List(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, es...)
	}
	got, err := st.ListAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 6 || !reflect.DeepEqual(got, want) {
		t.Fatalf("ListAll = %+v\nwant      %+v", got, want)
	}
	empty, _ := newRepoStore(t)
	if es, err := empty.ListAll(ctx); err != nil || len(es) != 0 {
		t.Errorf("empty store: %v, %v", es, err)
	}
}
