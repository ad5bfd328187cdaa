package gitstate

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseIndex: index files come from disk, written by whatever git touched the worktree;
// a malformed one must be an error, never a panic.
func FuzzParseIndex(f *testing.F) {
	f.Add(encodeIndex(nil).data)
	root := newTestRepo(f)
	if b, err := os.ReadFile(filepath.Join(root, ".git", "index")); err == nil {
		f.Add(b)
	}
	f.Add([]byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		x, err := parseIndex(data)
		if err != nil {
			return
		}
		for i := range x.len() {
			x.entry(i)
			x.skipWorktree(i)
		}
		x.namesUnder("a")
		x.with(nil)
	})
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
