package gitstate

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// rot13 is a clean and smudge filter that is its own inverse, so a filtered file's blob and
// its checked-out bytes differ, as an LFS pointer and its content do.
const rot13 = "tr A-Za-z N-ZA-Mn-za-m"

// attrCase is a repository whose settings or attributes may make git transform content, and a
// turn's edits in a session worktree.
type attrCase struct {
	name    string
	config  [][2]string       // repository config set before the first commit
	files   map[string]string // the first commit, beside the common files
	edit    map[string]string // the turn's edits (beside the common ones)
	withGit bool              // the policy must send the repository through the git CLI
}

var attrCases = []attrCase{
	{name: "plain", files: map[string]string{"crlf.txt": "raw\r\ncrlf\r\n"},
		edit: map[string]string{"crlf.txt": "raw\r\ncrlf\r\nmore\r\n"}},
	{name: "eol=crlf", files: map[string]string{".gitattributes": "*.txt eol=crlf\n", "w.txt": "a\nb\n"},
		edit: map[string]string{"w.txt": "a\r\nb\r\nc\r\n", "new.txt": "n\r\n"}, withGit: true},
	{name: "eol=lf", files: map[string]string{".gitattributes": "*.txt eol=lf\n", "w.txt": "a\r\nb\r\n"},
		edit: map[string]string{"w.txt": "a\r\nb\r\nc\r\n"}, withGit: true},
	{name: "text=auto", files: map[string]string{".gitattributes": "* text=auto\n", "w.txt": "a\r\nb\r\n"},
		edit: map[string]string{"w.txt": "a\r\nB\r\n", "sub/new.md": "x\r\ny\r\n"}, withGit: true},
	{name: "-text and binary", files: map[string]string{".gitattributes": "*.raw -text\n*.dat binary\n",
		"k.raw": "keep\r\n", "t.dat": "looks like text\n"},
		edit: map[string]string{"k.raw": "keep\r\nthis\r\n", "t.dat": "still looks like text\n"}, withGit: true},
	{name: "required filter", config: [][2]string{{"filter.rot13.clean", rot13}, {"filter.rot13.smudge", rot13}, {"filter.rot13.required", "true"}},
		files: map[string]string{"sub/.gitattributes": "*.secret filter=rot13\n", "sub/s.secret": "Hello World\n"},
		edit:  map[string]string{"sub/s.secret": "Hello Again\n", "sub/t.secret": "New one\n"}, withGit: true},
	{name: "lfs-style filter", config: [][2]string{{"filter.lfs.clean", rot13}, {"filter.lfs.smudge", rot13}, {"filter.lfs.required", "true"}},
		files: map[string]string{".gitattributes": "*.psd filter=lfs diff=lfs merge=lfs -text\n", "art.psd": "Pixels\n"},
		edit:  map[string]string{"art.psd": "More pixels\n"}, withGit: true},
	{name: "core.autocrlf=true", config: [][2]string{{"core.autocrlf", "true"}}, files: map[string]string{"w.txt": "a\nb\n"},
		edit: map[string]string{"w.txt": "a\r\nb\r\nc\r\n"}, withGit: true},
	{name: "core.autocrlf=input", config: [][2]string{{"core.autocrlf", "input"}}, files: map[string]string{"w.txt": "a\nb\n"},
		edit: map[string]string{"w.txt": "a\r\nb\r\nc\r\n"}, withGit: true},
	{name: "attributes added by the session", config: [][2]string{{"filter.rot13.clean", rot13}, {"filter.rot13.smudge", rot13}},
		files: map[string]string{"w.txt": "a\n"},
		edit:  map[string]string{".gitattributes": "*.secret filter=rot13\n", "n.secret": "Secret\n"}},
	{name: "attributes that change nothing", files: map[string]string{".gitattributes": "*.go linguist-generated export-ignore\n", "g.go": "package g\n"},
		edit: map[string]string{"g.go": "package g // x\n"}},
}

// newAttrRepo makes the case's repository: its config, its files, and the files every case
// has (an executable, a symlink, a gitlink and a file whose name changes case in the turn).
func newAttrRepo(t *testing.T, c attrCase) string {
	t.Helper()
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	setIdentity(t, dir)
	for _, kv := range c.config {
		git(t, dir, "config", kv[0], kv[1])
	}
	files := map[string]string{"README.md": "readme\n", "tool.sh": "#!/bin/sh\n", "plain.txt": "one\ntwo\n"}
	for k, v := range c.files {
		files[k] = v
	}
	writeFiles(t, dir, files)
	if err := os.Chmod(filepath.Join(dir, "tool.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("plain.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "add", "-A")
	git(t, dir, "update-index", "--add", "--cacheinfo", "160000,"+strings.Repeat("ab", 20)+",vendor/mod")
	git(t, dir, "commit", "-q", "-m", "initial")
	return dir
}

// editTurn applies the case's edits and the common ones: an executable bit set and cleared, a
// case-only rename, a symlink retargeted, a deletion.
func editTurn(t *testing.T, wt string, c attrCase) {
	t.Helper()
	writeFiles(t, wt, c.edit)
	for _, step := range []error{
		os.Chmod(filepath.Join(wt, "tool.sh"), 0o644),
		os.Chmod(filepath.Join(wt, "plain.txt"), 0o755),
		os.Rename(filepath.Join(wt, "README.md"), filepath.Join(wt, "readme.md")),
		os.Remove(filepath.Join(wt, "link")),
		os.Symlink("tool.sh", filepath.Join(wt, "link")),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
}

// TestAttributesMatchGit: on repositories with and without content-changing attributes,
// worktrees, checkpoints and diffs are what the git CLI makes of them.
func TestAttributesMatchGit(t *testing.T) {
	t.Parallel()
	for _, c := range attrCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			root := newAttrRepo(t, c)
			r := openTest(t, root)
			wt := addSession(t, r, "s")
			ref := filepath.Join(t.TempDir(), "ref")
			git(t, root, "worktree", "add", "-q", "-b", "ref", ref, "main")
			assertSameFiles(t, wt, ref)
			if st := git(t, wt, "status", "--porcelain"); st != "" {
				t.Errorf("fresh worktree not clean:\n%s", st)
			}

			x, err := loadIndex(filepath.Join(r.adminDir("s"), "index"))
			if err != nil {
				t.Fatal(err)
			}
			why, err := r.indexReason(t.Context(), x)
			if err != nil || (why != "") != c.withGit {
				t.Errorf("policy reason %q (%v), want the CLI path: %v", why, err, c.withGit)
			}

			editTurn(t, wt, c)
			want := gitWriteTree(t, wt)
			commit, changed, err := r.Checkpoint(t.Context(), wt, "turn", nil)
			if err != nil || !changed {
				t.Fatalf("checkpoint: %v (changed %v)", err, changed)
			}
			if got := git(t, root, "rev-parse", commit+"^{tree}"); got != want {
				t.Errorf("checkpoint tree %s, git add -A && git write-tree gives %s\n%s", got, want,
					git(t, root, "diff-tree", "-r", want, got))
			}
			if st := git(t, wt, "status", "--porcelain"); st != "" {
				t.Errorf("worktree not clean after the checkpoint:\n%s", st)
			}
			assertDiffsMatchGit(t, r, root, commit)

			// A fork at the checkpoint is checked out as git would check it out.
			fork := filepath.Join(r.CommonDir(), "arbor", "worktrees", "f")
			if err := r.Fork(t.Context(), WorktreeSpec{Name: "f", Branch: "arbor/f", Base: commit, Dir: fork}); err != nil {
				t.Fatal(err)
			}
			ref2 := filepath.Join(t.TempDir(), "ref2")
			git(t, root, "worktree", "add", "-q", "-b", "ref2", ref2, commit)
			assertSameFiles(t, fork, ref2)
			if files, err := r.uncommitted(t.Context(), mustLinked(t, r, fork)); err != nil || len(files) > 0 {
				t.Errorf("fresh fork has uncommitted %v (%v)", files, err)
			}
			assertFsck(t, root)
		})
	}
}

// gitWriteTree is `git add -A && git write-tree` in the worktree at dir, on a copy of its index.
func gitWriteTree(t *testing.T, dir string) string {
	t.Helper()
	idx := filepath.Join(t.TempDir(), "index")
	orig := filepath.Join(git(t, dir, "rev-parse", "--absolute-git-dir"), "index")
	b, err := os.ReadFile(orig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(idx, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// The copy keeps the index's mtime: git tells a racily clean entry (a file changed in the
	// same tick the index was written) by comparing with it, and a fresh mtime would make it
	// trust a stale stat and stage the old content.
	fi, err := os.Stat(orig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(idx, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	env := []string{"GIT_INDEX_FILE=" + idx}
	gitEnv(t, dir, env, "add", "-A")
	return gitEnv(t, dir, env, "write-tree")
}

func assertDiffsMatchGit(t *testing.T, r *Repo, root, commit string) {
	t.Helper()
	d, err := r.Diff(t.Context(), "main", commit)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := diffSummary(d), gitDiffSummary(t, root, "main", commit); got != want {
		t.Errorf("Diff:\n%s\ngit diff:\n%s", got, want)
	}
	if got, want := d.Unified(), git(t, root, "diff", "--full-index", "-M", "main", commit)+"\n"; got != want {
		t.Errorf("Unified:\n%s\ngit diff:\n%s", got, want)
	}
	dc, err := r.DiffCommits(t.Context(), "main", commit)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := diffSummary(dc), gitDiffSummary(t, root, "main", commit); got != want {
		t.Errorf("DiffCommits:\n%s\ngit diff:\n%s", got, want)
	}
}

// diffSummary is one line per file: status letter, added and deleted lines ("-" for binary),
// paths, as git's --name-status and --numstat give them.
func diffSummary(d *Diff) string {
	var lines []string
	for _, f := range d.Files {
		counts := fmt.Sprintf("%d %d", f.Additions, f.Deletions)
		if f.Binary {
			counts = "- -"
		}
		p := f.Path
		if f.OldPath != "" {
			p = f.OldPath + " " + f.Path
		}
		lines = append(lines, fmt.Sprintf("%c %s %s", strings.ToUpper(f.Status)[0], counts, p))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func gitDiffSummary(t *testing.T, root, from, to string) string {
	t.Helper()
	status := strings.Split(git(t, root, "diff", "-M", "--name-status", from, to), "\n")
	numstat := strings.Split(git(t, root, "diff", "-M", "--numstat", from, to), "\n")
	if len(status) != len(numstat) {
		t.Fatalf("git diff: %d statuses, %d numstats", len(status), len(numstat))
	}
	var lines []string
	for i, s := range status {
		f := strings.Split(s, "\t")
		n := strings.Split(numstat[i], "\t")
		lines = append(lines, fmt.Sprintf("%c %s %s %s", f[0][0], n[0], n[1], strings.Join(f[1:], " ")))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// assertSameFiles compares two worktrees file by file: names, modes, bytes, link targets.
func assertSameFiles(t *testing.T, got, want string) {
	t.Helper()
	a, b := treeListing(t, got), treeListing(t, want)
	if a != b {
		t.Errorf("worktree %s:\n%s\ngit's checkout %s:\n%s", got, a, want, b)
	}
}

func treeListing(t *testing.T, dir string) string {
	t.Helper()
	var out bytes.Buffer
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == ".git" {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			fmt.Fprintf(&out, "%s/ %v\n", rel, fi.Mode().Perm())
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			fmt.Fprintf(&out, "%s -> %s\n", rel, target)
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&out, "%s %v %q\n", rel, fi.Mode().Perm(), b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func TestAttrsChangeContent(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]bool{
		"*.go linguist-generated\n":             false,
		"# *.txt eol=crlf\n":                    false,
		"*.txt   eol=crlf\n":                    true,
		"*.bin -text\n":                         true,
		"*.png binary\n":                        true,
		"[attr]mine text eol=lf\n*.x mine\n":    true,
		"*.psd filter=lfs diff=lfs merge=lfs\n": true,
		"docs/ export-ignore\n*.c whitespace\n": false,
		"*.x !diff\n":                           true,
	} {
		if got := attrsChangeContent([]byte(text)); got != want {
			t.Errorf("attrsChangeContent(%q) = %v, want %v", text, got, want)
		}
	}
}

// TestPolicyFollowsConfig: settings and attributes files changed after Open are noticed at
// the next operation, both ways.
func TestPolicyFollowsConfig(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)
	reason := func() string {
		t.Helper()
		unlock, err := r.lock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer unlock()
		why, err := r.repoReason(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return why
	}
	if why := reason(); why != "" {
		t.Fatalf("plain repository takes the CLI path: %s", why)
	}
	git(t, root, "config", "core.autocrlf", "input")
	if why := reason(); why != "core.autocrlf=input" {
		t.Errorf("after core.autocrlf=input: %q", why)
	}
	git(t, root, "config", "core.autocrlf", "false")
	if why := reason(); why != "" {
		t.Errorf("after core.autocrlf=false: %q", why)
	}
	info := filepath.Join(root, ".git", "info", "attributes")
	writeFiles(t, filepath.Dir(info), map[string]string{"attributes": "*.txt eol=crlf\n"})
	if why := reason(); why != info {
		t.Errorf("after info/attributes: %q", why)
	}
	// The worktree made now is checked out as git would: CRLF.
	wt := addSession(t, r, "s")
	if b, _ := os.ReadFile(filepath.Join(wt, "dir/sub/c.txt")); !bytes.HasPrefix(b, []byte("one\r\n")) {
		t.Errorf("c.txt checked out as %q", b)
	}
	os.Remove(info)
	if why := reason(); why != "" {
		t.Errorf("after removing info/attributes: %q", why)
	}
}

// TestCheckpointWithGitLeavesOut: on the CLI path, a checkpoint leaves out what the scan leaves
// out: Setup's copies and repositories nested in the worktree.
func TestCheckpointWithGitLeavesOut(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	writeFiles(t, root, map[string]string{".gitattributes": "* text=auto\n", ".env": "SECRET=1\n"})
	git(t, root, "add", ".gitattributes")
	git(t, root, "commit", "-q", "-m", "attributes")
	r := openTest(t, root)
	wt := addSession(t, r, "s")
	if err := r.SetupWorktree(t.Context(), wt, Setup{Copy: []string{".env"}}); err != nil {
		t.Fatal(err)
	}
	nested := filepath.Join(wt, "lib")
	if err := os.MkdirAll(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, nested, "init", "-q")
	writeFiles(t, wt, map[string]string{"lib/x.go": "package lib\n", "new.txt": "a\r\nb\r\n"})
	commit, _, err := r.Checkpoint(t.Context(), wt, "turn", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := git(t, root, "diff", "--name-only", "main", commit); got != "new.txt" {
		t.Errorf("checkpoint committed %q, want only new.txt", got)
	}
	if got := git(t, root, "cat-file", "blob", commit+":new.txt"); got != "a\nb" {
		t.Errorf("new.txt stored as %q, want LF line ends", got)
	}
	files, err := r.uncommitted(t.Context(), mustLinked(t, r, wt))
	if err != nil || strings.Join(files, ",") != "lib/ (a git repository of its own)" {
		t.Errorf("uncommitted = %v (%v), want only the nested repository", files, err)
	}
}
