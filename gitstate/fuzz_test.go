package gitstate

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// FuzzParseIndex: index files come from disk, written by whatever git touched the worktree;
// a malformed one must be an error, never a panic. One that parses survives a round trip
// (copied by with, or re-encoded by encodeIndex, it parses to the same entries), and one that
// git itself wrote reads as `git ls-files --stage` reads it.
func FuzzParseIndex(f *testing.F) {
	fromGit := gitIndexes(f)
	for data := range fromGit {
		f.Add([]byte(data))
	}
	f.Add(encodeIndex(nil).data)
	f.Add([]byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		want, byGit := fromGit[string(data)]
		if byGit {
			p := filepath.Join(t.TempDir(), "index")
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
			x, err := loadIndex(p) // v4 included
			if err != nil {
				t.Fatalf("git's own index: %v", err)
			}
			if got := stageListing(x); got != want {
				t.Errorf("read as:\n%s\ngit ls-files --stage:\n%s", got, want)
			}
		}
		x, err := parseIndex(data)
		if err != nil {
			return
		}
		x.namesUnder("a")
		copied, err := parseIndex(x.with(nil))
		if err != nil {
			t.Fatalf("with(nil) gave an unreadable index: %v", err)
		}
		if got, want := entryKeys(copied, true), entryKeys(x, true); got != want {
			t.Fatalf("with(nil) changed the entries:\n%s\nwant:\n%s", got, want)
		}
		var entries []*index.Entry
		for i := range x.len() {
			entries = append(entries, x.entry(i))
		}
		if got, want := entryKeys(encodeIndex(entries), false), entryKeys(x, false); got != want {
			t.Fatalf("encodeIndex changed the entries:\n%s\nwant:\n%s", got, want)
		}
	})
}

// entryKeys lists every entry's fields, sorted, times as an index stores them; flags says
// whether the extended flags (skip-worktree), which a v2 encoding drops, take part.
func entryKeys(x *rawIndex, flags bool) string {
	keys := make([]string, x.len())
	for i := range x.len() {
		e := x.entry(i)
		keys[i] = fmt.Sprintf("%q %o %s %d size=%d dev=%d ino=%d uid=%d gid=%d m=%d.%d c=%d.%d", e.Name, e.Mode, e.Hash, e.Stage,
			e.Size, e.Dev, e.Inode, e.UID, e.GID, uint32(e.ModifiedAt.Unix()), e.ModifiedAt.Nanosecond(),
			uint32(e.CreatedAt.Unix()), e.CreatedAt.Nanosecond())
		if flags && x.skipWorktree(i) {
			keys[i] += " skip-worktree"
		}
	}
	sort.Strings(keys)
	return strings.Join(keys, "\n")
}

// stageListing is the index as `git ls-files --stage -z` prints it.
func stageListing(x *rawIndex) string {
	var b strings.Builder
	for i := range x.len() {
		e := x.entry(i)
		fmt.Fprintf(&b, "%06o %s %d\t%s\x00", uint32(e.Mode), e.Hash, e.Stage, e.Name)
	}
	return b.String()
}

// gitIndexes has git write indexes with every kind of entry — files, executables, symlinks,
// gitlinks, conflict stages, skip-worktree and intent-to-add flags, a name longer than the
// 12-bit length field — in versions 2, 3 and 4, and returns each index's bytes with
// `git ls-files --stage -z` of it.
func gitIndexes(f *testing.F) map[string]string {
	root := newTestRepo(f)
	blob := git(f, root, "rev-parse", "HEAD:a.go")
	long := strings.Repeat(strings.Repeat("d", 200)+"/", 22) + "long.txt"
	out := map[string]string{}
	snap := func() {
		b, err := os.ReadFile(filepath.Join(root, ".git", "index"))
		if err != nil {
			f.Fatal(err)
		}
		out[string(b)] = git(f, root, "ls-files", "--stage", "-z")
	}
	snap()
	git(f, root, "update-index", "--add", "--cacheinfo", "160000,"+strings.Repeat("ab", 20)+",vendor/mod")
	git(f, root, "update-index", "--add", "--cacheinfo", "100644,"+blob+","+long)
	snap()
	stages := fmt.Sprintf("0 %s\tdir/sub/c.txt\n100644 %s 1\tdir/sub/c.txt\n100644 %s 2\tdir/sub/c.txt\n100755 %s 3\tdir/sub/c.txt\n",
		strings.Repeat("0", 40), blob, blob, blob)
	gitStdin(f, root, stages, "update-index", "--index-info")
	snap()
	git(f, root, "update-index", "--skip-worktree", "b.go")
	writeFiles(f, root, map[string]string{"later.txt": "intent\n"})
	git(f, root, "add", "-N", "later.txt")
	snap()
	git(f, root, "update-index", "--index-version", "4")
	snap()
	return out
}

func gitStdin(t testing.TB, dir, stdin string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Stdin = dir, strings.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// FuzzHunks: applying every hunk of a diff to the old text gives the new text, and applying
// none gives the old text back.
func FuzzHunks(f *testing.F) {
	f.Add("a\nb\nc\n", "a\nB\nc\n")
	f.Add("", "x")
	f.Add("no eol", "no eol\n")
	f.Add("1\n2\n3\n4\n5\n6\n7\n8\n9\n", "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n10")
	f.Fuzz(func(t *testing.T, old, cur string) {
		hs, _, _ := hunks(old, cur)
		all := map[int]bool{}
		for i := range hs {
			all[i] = true
		}
		if got := applyHunks(old, hs, all); got != cur {
			t.Fatalf("all hunks of %q -> %q gave %q\n%+v", old, cur, got, hs)
		}
		if got := applyHunks(old, hs, nil); got != old {
			t.Fatalf("no hunks of %q gave %q", old, got)
		}
	})
}
