package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestFindRootAndConfine(t *testing.T) {
	root := t.TempDir()
	os.Mkdir(filepath.Join(root, ".git"), 0o700)
	sub := filepath.Join(root, "a", "b")
	os.MkdirAll(sub, 0o700)
	if got, err := FindRoot(sub); err != nil || got != root {
		t.Errorf("FindRoot = %q, %v", got, err)
	}
	if _, err := FindRoot(t.TempDir()); !errors.Is(err, ErrNotRepo) {
		t.Errorf("FindRoot outside a repo: %v", err)
	}
	outside := t.TempDir()
	os.Symlink(outside, filepath.Join(root, "link"))
	for _, tc := range []struct {
		rel string
		ok  bool
	}{{"a/b", true}, {"../x", false}, {"a/../../x", false}, {"link/f", false}, {filepath.Join(root, "a"), true}, {"/etc/passwd", false}} {
		_, err := Confine(root, tc.rel)
		if (err == nil) != tc.ok {
			t.Errorf("Confine(%q) err = %v, want ok=%v", tc.rel, err, tc.ok)
		}
	}
}
