package sandbox

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
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

// What only its owner may read under /etc (shadow passwords, TLS and SSH host keys) is absent
// from the sandbox, which as root would otherwise read it through the read-only /etc; what
// everyone may read is there, the same bytes. The host's private entries are found here by a
// walk of the test's own, and the walk is checked on a tree of its own too, so the test means
// something on a machine whose /etc holds nothing private.
func TestPrivateSystemFilesAbsent(t *testing.T) {
	root := t.TempDir()
	for p, mode := range map[string]os.FileMode{"pub": 0o644, "secret": 0o640, "keys/k": 0o600, "deep/open/x": 0o644, "deep/s": 0o600, "whole/y": 0o644} {
		os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(root, p), []byte("S"), mode)
	}
	os.Chmod(filepath.Join(root, "keys"), 0o700)
	os.Symlink("secret", filepath.Join(root, "link"))
	args, priv := viewDir(root)
	got := strings.ReplaceAll(strings.Join(args, " "), root, "R")
	want := "--dir R --dir R/deep --ro-bind-try R/deep/open R/deep/open --symlink secret R/link --ro-bind-try R/pub R/pub --ro-bind-try R/whole R/whole"
	if !priv || got != want {
		t.Errorf("viewDir = %v %q\nwant true %q", priv, got, want)
	}

	st := needBwrap(t)
	var private, public []string
	filepath.WalkDir("/etc", func(p string, d os.DirEntry, err error) error {
		if err != nil || p == "/etc" {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		switch perm := fi.Mode().Perm(); {
		case d.IsDir() && perm&0o005 != 0o005:
			private = append(private, p)
			return filepath.SkipDir
		case fi.Mode().IsRegular() && perm&0o004 == 0:
			private = append(private, p)
		case fi.Mode().IsRegular() && len(public) < 40:
			public = append(public, p)
		}
		return nil
	})
	if os.Geteuid() == 0 && len(private) == 0 {
		if _, err := os.Stat("/etc/shadow"); err == nil {
			t.Fatal("no private entry found in /etc, which has /etc/shadow")
		}
	}
	script := ""
	for _, p := range private {
		script += fmt.Sprintf("test -e %q -o -L %q && echo %q there\n", p, p, p)
	}
	for _, p := range public {
		script += fmt.Sprintf("cksum < %q\n", p)
	}
	out, err := runIn(t, st, Spec{Dir: t.TempDir()}, script)
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	host, _ := exec.Command("sh", "-c", script).Output()
	var leaked []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasSuffix(l, " there") {
			leaked = append(leaked, l)
		}
	}
	if len(leaked) > 0 {
		t.Errorf("private entries in the sandbox: %v", leaked)
	}
	if strings.Count(out, "\n") != len(public) || !strings.HasSuffix(string(host), out) {
		t.Errorf("public files differ in the sandbox:\n%s\non the host:\n%s", out, host)
	}
	t.Logf("absent in the sandbox: %v; %d public files read alike", private, len(public))
}

// A private file that the host replaces by a rename while a sandbox runs (as useradd and
// passwd do with /etc/shadow) stays out of the running sandbox: it was left out, not masked,
// and a mask over the old file would have been detached by the rename.
func TestPrivateFileRenamedOverStaysOut(t *testing.T) {
	st := needBwrap(t)
	root := t.TempDir()
	secret := filepath.Join(root, "secret")
	os.WriteFile(filepath.Join(root, "pub"), []byte("public\n"), 0o644)
	os.WriteFile(secret, []byte("OLD\n"), 0o600)
	base, _, err := Spec{Dir: t.TempDir()}.Build()
	if err != nil {
		t.Fatal(err)
	}
	view, _ := viewDir(root)
	args := append(append(base, view...), "--", "sh", "-c",
		fmt.Sprintf("echo ready; read x; cat %q 2>/dev/null || echo absent; cat %q", secret, filepath.Join(root, "pub")))
	cmd := exec.Command(st.Path, args...)
	in, _ := cmd.StdinPipe()
	outp, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(outp)
	if l, err := r.ReadString('\n'); l != "ready\n" {
		t.Fatalf("sandbox did not start: %q %v %s", l, err, stderr.String())
	}
	os.WriteFile(secret+"+", []byte("NEW\n"), 0o600)
	if err := os.Rename(secret+"+", secret); err != nil {
		t.Fatal(err)
	}
	in.Write([]byte("go\n"))
	rest, _ := io.ReadAll(r)
	cmd.Wait()
	if string(rest) != "absent\npublic\n" {
		t.Errorf("after the host renamed over the private file the sandbox read %q, want %q (%s)", rest, "absent\npublic\n", stderr.String())
	}
}
