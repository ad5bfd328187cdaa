package kernel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A run dir holds Unix sockets: one under a root too deep for sun_path, or under a root that
// is a link (a squatted name in a shared temp dir), is made in a fresh private temp dir instead.
func TestRunDirIsShortAndPrivate(t *testing.T) {
	deep := filepath.Join(t.TempDir(), strings.Repeat("d", 90))
	if err := os.MkdirAll(deep, 0o700); err != nil {
		t.Fatal(err)
	}
	target := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(target, link)
	for name, root := range map[string]string{"deep": deep, "link": link, "plain": t.TempDir()} {
		d, err := makeRunDir(root)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defer os.RemoveAll(d)
		if n := len(d) + len("/zmq-01234567-5"); n > 107 {
			t.Errorf("%s: run dir %s gives socket paths of %d bytes", name, d, n)
		}
		if fi, err := os.Lstat(d); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: run dir %s: %v %v, want a 0700 directory", name, d, fi, err)
		}
		if name == "plain" && filepath.Dir(d) != root {
			t.Errorf("plain: run dir %s is not under %s", d, root)
		}
		if name != "plain" && strings.HasPrefix(d, root) {
			t.Errorf("%s: run dir %s is under the unusable root", name, d)
		}
	}
	if ents, _ := os.ReadDir(target); len(ents) != 0 {
		t.Errorf("a run dir was made through the link: %v", ents)
	}
}
