package gitstate

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// sessionWithChanges makes a session whose checkpoint holds every kind of change, then moves
// the user's branch ahead so the diff must come from the merge-base.
func sessionWithChanges(t *testing.T) (root string, r *Repo, wt string) {
	t.Helper()
	root = newTestRepo(t)
	r = openTest(t, root)
	wt = addSession(t, r, "s")
	big := strings.Repeat("line\n", 40)
	writeFiles(t, root, map[string]string{"long.txt": big})
	git(t, root, "add", "long.txt")
	git(t, root, "commit", "-q", "-m", "long")
	if _, err := r.Discard(t.Context(), wt, "", true); err != nil {
		t.Fatal(err)
	}
	wt = addSession(t, r, "s") // now based on the commit with long.txt

	writeFiles(t, wt, map[string]string{
		"a.go":            "package a\n\nfunc Renamed() int { return 1 }\n",
		"new dir/ü.txt":   "unicode path\n",
		"noeol.txt":       "no newline at end, changed",
		"dir/d.bin":       "\x00new binary\x00",
		"long.txt":        strings.Replace(strings.Replace(big, "line\n", "first\n", 1), "line\nline\n", "line\nmid\n", 10),
		"empty":           "",
		"spaced name.txt": "x\ny\n",
	})
	os.Rename(filepath.Join(wt, "dir", "sub", "c.txt"), filepath.Join(wt, "dir", "moved.txt"))
	os.Remove(filepath.Join(wt, "b.go"))
	os.Chmod(filepath.Join(wt, "run.sh"), 0o644)
	os.Remove(filepath.Join(wt, "link"))
	writeFiles(t, wt, map[string]string{"link": "now a file\n"})
	if _, _, err := r.Checkpoint(t.Context(), wt, "turn", nil); err != nil {
		t.Fatal(err)
	}
	// The user's branch moves on: none of this may appear in the session's diff.
	writeFiles(t, root, map[string]string{"user.txt": "user work\n", "a.go": "package a\n// user edit\n"})
	git(t, root, "add", "-A")
	git(t, root, "commit", "-q", "-m", "user moves ahead")
	return root, r, wt
}

func TestDiffMatchesGit(t *testing.T) {
	t.Parallel()
	root, r, _ := sessionWithChanges(t)
	d, err := r.Diff(t.Context(), "main", "arbor/s")
	if err != nil {
		t.Fatal(err)
	}
	mb := git(t, root, "merge-base", "main", "arbor/s")
	if d.Base != mb || d.Head != git(t, root, "rev-parse", "arbor/s") {
		t.Errorf("Base/Head = %s/%s, want %s", d.Base, d.Head, mb)
	}
	sums := map[string][2]int{}
	for _, f := range d.Files {
		if f.Path == "user.txt" {
			t.Errorf("diff shows the base branch's new file user.txt")
		}
		name := f.Path
		if f.OldPath != "" {
			name = f.OldPath + " => " + f.Path
		}
		if f.Binary {
			name = "binary " + name
		}
		s := sums[name] // a type change is two entries here, one line in --numstat
		sums[name] = [2]int{s[0] + f.Additions, s[1] + f.Deletions}
	}
	var got []string
	for name, s := range sums {
		got = append(got, fmt.Sprintf("%d\t%d\t%s", s[0], s[1], name))
	}
	// -z prints renames as "add\tdel\t\0old\0new\0" and binaries as "-\t-\tpath\0".
	var want []string
	fields := strings.Split(git(t, root, "diff", "--numstat", "-z", "-M", mb, "arbor/s"), "\x00")
	for i := 0; i < len(fields) && fields[i] != ""; i++ {
		parts := strings.SplitN(fields[i], "\t", 3)
		name := parts[2]
		if name == "" {
			name = fields[i+1] + " => " + fields[i+2]
			i += 2
		}
		if parts[0] == "-" {
			parts[0], parts[1], name = "0", "0", "binary "+name
		}
		want = append(want, parts[0]+"\t"+parts[1]+"\t"+name)
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("numstat:\n%s\nwant (git diff --numstat):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	statuses := map[string]string{}
	for _, f := range d.Files {
		statuses[f.Path] += f.Status
	}
	for p, s := range map[string]string{"a.go": Modified, "b.go": Deleted, "dir/moved.txt": Renamed,
		"new dir/ü.txt": Added, "link": Deleted + Added, "run.sh": Modified} {
		if statuses[p] != s {
			t.Errorf("status of %s = %q, want %q", p, statuses[p], s)
		}
	}
}

func TestUnifiedAppliesWithGit(t *testing.T) {
	t.Parallel()
	root, r, _ := sessionWithChanges(t)
	d, err := r.Diff(t.Context(), "main", "arbor/s")
	if err != nil {
		t.Fatal(err)
	}
	patch := filepath.Join(t.TempDir(), "p.diff")
	os.WriteFile(patch, []byte(d.Unified()), 0o644)
	check := filepath.Join(t.TempDir(), "check")
	git(t, root, "worktree", "add", "-q", "--detach", check, d.Base)
	if out, err := gitErr(check, "apply", "--index", patch); err != nil {
		t.Fatalf("git apply: %v\n%s\npatch:\n%s", err, out, d.Unified())
	}
	if got, want := git(t, check, "write-tree"), git(t, root, "rev-parse", "arbor/s^{tree}"); got != want {
		t.Errorf("applied tree %s, want session tree %s\n%s", got, want, git(t, check, "diff", "--cached", "--stat", "arbor/s"))
	}
}

func TestHunks(t *testing.T) {
	t.Parallel()
	old := "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\nn\n"
	cur := "a\nB\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nM\nn\n"
	hs, adds, dels := hunks(old, cur)
	if adds != 2 || dels != 2 || len(hs) != 2 {
		t.Fatalf("hunks = %d (+%d -%d), want 2 hunks +2 -2: %+v", len(hs), adds, dels, hs)
	}
	if hs[0].Header != "@@ -1,5 +1,5 @@" || hs[1].Header != "@@ -10,5 +10,5 @@ i" {
		t.Errorf("headers %q %q", hs[0].Header, hs[1].Header)
	}
	want := []string{" j", " k", " l", "-m", "+M", " n"}
	if strings.Join(hs[1].Lines, "|") != strings.Join(want, "|") {
		t.Errorf("lines %q", hs[1].Lines)
	}
	hs, _, _ = hunks("", "x\n")
	if len(hs) != 1 || hs[0].Header != "@@ -0,0 +1 @@" {
		t.Errorf("new file hunk %+v", hs)
	}
}

// TestDiffDetectsEditedRename: a moved file with a small edit is a rename, as with git diff -M.
func TestDiffDetectsEditedRename(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	long := strings.Repeat("some line of code\n", 30)
	writeFiles(t, root, map[string]string{"old/name.go": long})
	git(t, root, "add", "-A")
	git(t, root, "commit", "-q", "-m", "long file")
	r := openTest(t, root)
	wt := addSession(t, r, "ren")
	os.RemoveAll(filepath.Join(wt, "old"))
	writeFiles(t, wt, map[string]string{"new/name.go": long + "one more line\n"})
	if _, _, err := r.Checkpoint(t.Context(), wt, "move", nil); err != nil {
		t.Fatal(err)
	}
	d, err := r.Diff(t.Context(), "main", "arbor/ren")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Files) != 1 || d.Files[0].Status != Renamed || d.Files[0].OldPath != "old/name.go" || d.Files[0].Additions != 1 {
		t.Fatalf("diff = %+v, want one rename old/name.go -> new/name.go with +1", d.Files)
	}
	if got := git(t, root, "diff", "-M", "--name-status", d.Base, d.Head); !strings.HasPrefix(got, "R") {
		t.Errorf("git sees %q", got)
	}
}
