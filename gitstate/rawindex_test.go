package gitstate

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// TestRawIndexOnGitsOwnIndex reads an index git wrote (v3 with extended flags, a cache-tree
// extension), edits it, and checks git accepts the result.
func TestRawIndexOnGitsOwnIndex(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	writeFiles(t, root, map[string]string{"dir.txt": "sorts between dir and dir/\n", "dir-x/y": "y\n"})
	git(t, root, "add", "-A")
	git(t, root, "commit", "-q", "-m", "tricky names")
	git(t, root, "update-index", "--skip-worktree", "b.go") // forces v3 extended flags
	git(t, root, "write-tree")                              // leaves a TREE extension
	path := filepath.Join(root, ".git", "index")
	x, err := loadIndex(path)
	if err != nil {
		t.Fatal(err)
	}
	if x.version != 3 {
		t.Errorf("version = %d, want 3", x.version)
	}
	if got := strings.Join(x.namesUnder("dir"), ","); got != "dir/d.bin,dir/sub/c.txt" {
		t.Errorf("namesUnder(dir) = %s", got)
	}
	if !x.hasUnder("dir") || x.hasUnder("dir.txt") || x.hasUnder("a.go") {
		t.Error("hasUnder wrong")
	}
	e := x.get("a.go")
	if e == nil || e.Hash.String() != git(t, root, "rev-parse", "HEAD:a.go") || e.Mode != filemode.Regular {
		t.Fatalf("get(a.go) = %+v", e)
	}
	// Change a.go, add new.txt, remove dir.txt: git must read the result.
	writeFiles(t, root, map[string]string{"a.go": "changed\n", "new.txt": "new\n"})
	os.Remove(filepath.Join(root, "dir.txt"))
	repl := map[string]*index.Entry{"dir.txt": nil}
	for _, p := range []string{"a.go", "new.txt"} {
		b, _ := os.ReadFile(filepath.Join(root, p))
		ne := &index.Entry{Name: p, Mode: filemode.Regular, Hash: plumbing.ComputeHash(plumbing.BlobObject, b)}
		fi, _ := os.Lstat(filepath.Join(root, p))
		fillStat(ne, fi)
		repl[p] = ne
	}
	if err := writeIndexBytes(path, x.with(repl)); err != nil {
		t.Fatal(err)
	}
	if got := git(t, root, "diff", "--cached", "--name-status"); got != "M\ta.go\nD\tdir.txt\nA\tnew.txt" {
		t.Errorf("git diff --cached:\n%s", got)
	}
	if got := git(t, root, "ls-files", "-t", "b.go"); got != "S b.go" {
		t.Errorf("skip-worktree flag lost: %q", got)
	}
	y, err := loadIndex(path)
	if err != nil || y.len() != x.len()+0 {
		t.Fatalf("reload: %v, %d entries, want %d", err, y.len(), x.len())
	}
}

func TestEncodeIndexMatchesGoGit(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 5000) // longer than the 12-bit name length field
	var entries []*index.Entry
	for _, n := range []string{"b", "a/c", long, "a"} {
		entries = append(entries, &index.Entry{Name: n, Mode: filemode.Executable, Hash: plumbing.ComputeHash(plumbing.BlobObject, []byte(n)), Size: 3})
	}
	x := encodeIndex(entries)
	var idx index.Index
	if err := index.NewDecoder(bytes.NewReader(x.data)).Decode(&idx); err != nil {
		t.Fatal(err)
	}
	if len(idx.Entries) != 4 || idx.Entries[3].Name != long || idx.Entries[0].Name != "a" {
		t.Fatalf("go-git decoded %d entries", len(idx.Entries))
	}
	if e := x.get(long); e == nil || e.Mode != filemode.Executable || e.Size != 3 {
		t.Errorf("get(long) = %+v", e)
	}
	y, err := parseIndex(x.with(map[string]*index.Entry{"a/c": nil}))
	if err != nil || y.len() != 3 || y.get("a/c") != nil || y.get(long) == nil {
		t.Errorf("after removal: %v %d", err, y.len())
	}
}
