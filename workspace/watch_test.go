package workspace

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestWatcherRecordsChangedPaths(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "a", "b"), 0o755)
	os.MkdirAll(filepath.Join(root, ".git"), 0o755)
	os.WriteFile(filepath.Join(root, "keep.txt"), []byte("x"), 0o644)
	w, err := Watch(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	os.WriteFile(filepath.Join(root, "a", "b", "new.txt"), []byte("x"), 0o644)
	os.Remove(filepath.Join(root, "keep.txt"))
	os.WriteFile(filepath.Join(root, ".git", "index"), []byte("x"), 0o644)
	os.MkdirAll(filepath.Join(root, "fresh", "deep"), 0o755)
	os.WriteFile(filepath.Join(root, "fresh", "deep", "f.txt"), []byte("x"), 0o644)

	want := map[string]bool{"a/b/new.txt": true, "keep.txt": true, "fresh": true}
	deadline := time.Now().Add(10 * time.Second) // hang guard only
	seen := map[string]bool{}
	for time.Now().Before(deadline) {
		paths, complete := w.Take()
		if !complete {
			t.Fatal("watcher reports an incomplete record without overflow")
		}
		for _, p := range paths {
			seen[p] = true
		}
		ok := true
		for p := range want {
			ok = ok && seen[p]
		}
		if ok {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for p := range want {
		if !seen[p] {
			t.Errorf("change to %s not recorded; saw %v", p, seen)
		}
	}
	for p := range seen {
		if p == ".git/index" || p == ".git" {
			t.Errorf(".git change recorded: %s", p)
		}
	}
	// A file created inside the new directory after it was watched is seen too, and Sync
	// makes Take see it without polling. (Drain first: f.txt may also have been recorded on its
	// own, if fresh/deep was watched before it was written.)
	w.Sync(10 * time.Second)
	w.Take()
	os.WriteFile(filepath.Join(root, "fresh", "deep", "later.txt"), []byte("x"), 0o644)
	w.Sync(10 * time.Second)
	got, complete := w.Take()
	if !complete || !reflect.DeepEqual(got, []string{"fresh/deep/later.txt"}) {
		t.Errorf("after the new directory: %v (complete %v)", got, complete)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 3 {
		t.Errorf("Sync left files behind: %v", entries)
	}
}

// After a watched directory is renamed, the watches below it report the old paths: the watcher
// says it is stale and its record incomplete, so the caller scans and watches afresh.
func TestWatcherStaleAfterADirectoryMoves(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "dir", "sub"), 0o755)
	w, err := Watch(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := os.Rename(filepath.Join(root, "dir"), filepath.Join(root, "lib")); err != nil {
		t.Fatal(err)
	}
	w.Sync(10 * time.Second)
	if _, complete := w.Take(); complete || !w.Stale() {
		t.Fatalf("after a directory rename: complete %v, stale %v; want incomplete and stale", complete, w.Stale())
	}
	os.WriteFile(filepath.Join(root, "lib", "sub", "c.txt"), []byte("x"), 0o644)
	w.Sync(10 * time.Second)
	if _, complete := w.Take(); complete {
		t.Fatal("a stale watcher reported a complete record")
	}
	// A fresh watcher sees the new paths.
	w2, err := Watch(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	os.WriteFile(filepath.Join(root, "lib", "sub", "c.txt"), []byte("y"), 0o644)
	w2.Sync(10 * time.Second)
	if got, complete := w2.Take(); !complete || !reflect.DeepEqual(got, []string{"lib/sub/c.txt"}) {
		t.Fatalf("fresh watcher: %v (complete %v)", got, complete)
	}
}
