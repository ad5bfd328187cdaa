package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// OpenDir walks what sandboxed code may have written without following it: a symlink in any
// component, a file where a directory should be, or ".." is refused; missing dirs are made.
func TestOpenDirRefusesWhatACellCouldPlant(t *testing.T) {
	root := t.TempDir()
	home := t.TempDir()
	os.MkdirAll(filepath.Join(root, "state/cache"), 0o700)
	os.Symlink(home, filepath.Join(root, "state/tmp"))
	os.Symlink(home, filepath.Join(root, "link"))
	os.WriteFile(filepath.Join(root, "state/snapshot"), nil, 0o600)
	for _, rel := range []string{"state/tmp", "link/x", "state/snapshot", "../" + filepath.Base(home), "state/../../x"} {
		if f, err := OpenDir(root, rel, true); err == nil {
			f.Close()
			t.Errorf("OpenDir(%q) opened %s", rel, f.Name())
		} else if !strings.Contains(err.Error(), "refused") && !strings.Contains(err.Error(), "leaves") {
			t.Errorf("OpenDir(%q): %v, want a refusal", rel, err)
		}
	}
	if ents, _ := os.ReadDir(home); len(ents) != 0 {
		t.Errorf("OpenDir created %v in the symlink's target", ents)
	}
	for _, rel := range []string{"state/cache", "state/new/deeper"} {
		f, err := OpenDir(root, rel, true)
		if err != nil {
			t.Fatalf("OpenDir(%q): %v", rel, err)
		}
		f.Close()
	}
	if _, err := OpenFile(filepath.Join(root, "link")); err == nil {
		t.Error("OpenFile followed a symlink")
	}
}

// The view is default-deny: host places outside the system dirs are absent, /var/tmp and
// /dev/shm are the sandbox's own, and a file bound read-only by descriptor cannot be rewritten
// or renamed away.
func TestDefaultDenyView(t *testing.T) {
	st := needBwrap(t)
	wt := t.TempDir()
	if err := os.WriteFile(filepath.Join(wt, ".git"), []byte("gitdir: /somewhere\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	shared := map[string]string{}
	for _, d := range []string{"/var/tmp", "/dev/shm"} {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			continue
		}
		p, err := os.MkdirTemp(d, "arbor-view-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(p) })
		os.WriteFile(filepath.Join(p, "host.txt"), []byte("HOST"), 0o644)
		shared[d] = p
	}
	gitf, err := OpenFile(filepath.Join(wt, ".git"))
	if err != nil {
		t.Fatal(err)
	}
	defer gitf.Close()
	s := Spec{Dir: wt, Binds: []Bind{{File: gitf, Dst: filepath.Join(wt, ".git")}}}
	checks := []struct{ script, want string }{
		{"cat .git", "gitdir: /somewhere"},
		{"echo 'gitdir: /evil' > .git 2>/dev/null || echo refused", "refused"},
		{"mv .git moved 2>/dev/null || echo refused", "refused"},
		{"echo w > new.txt && cat new.txt", "w"},
		{"ls /srv /mnt /root /run/user 2>/dev/null | wc -w", "0"},
		{"cat /etc/hostname >/dev/null && echo system", "system"},
	}
	for d, p := range shared {
		checks = append(checks,
			struct{ script, want string }{"cat " + p + "/host.txt 2>/dev/null || echo absent", "absent"},
			struct{ script, want string }{"echo in > " + d + "/from-sandbox && cat " + d + "/from-sandbox", "in"})
	}
	for _, c := range checks {
		out, err := runIn(t, st, s, c.script)
		if err != nil || !strings.HasSuffix(strings.TrimSpace(out), c.want) {
			t.Errorf("%s → %q (%v), want it to end with %q", c.script, out, err, c.want)
		}
	}
	for d := range shared {
		if _, err := os.Stat(filepath.Join(d, "from-sandbox")); err == nil {
			os.Remove(filepath.Join(d, "from-sandbox"))
			t.Errorf("a write to %s inside the sandbox landed on the host's", d)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(wt, ".git")); string(b) != "gitdir: /somewhere\n" {
		t.Errorf(".git is now %q", b)
	}
}
