package sandbox

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// needBwrap skips, or fails under ARBOR_REQUIRE_KERNEL=1, when bubblewrap cannot work here.
func needBwrap(t *testing.T) Status {
	t.Helper()
	st := Probe(context.Background())
	if !st.Available {
		if req, _ := strconv.ParseBool(os.Getenv("ARBOR_REQUIRE_KERNEL")); req {
			t.Fatalf("sandbox unavailable: %s; required because ARBOR_REQUIRE_KERNEL=1", st.Reason)
		}
		t.Skipf("sandbox unavailable: %s", st.Reason)
	}
	return st
}

func runIn(t *testing.T, st Status, s Spec, script string) (string, error) {
	t.Helper()
	args, files, err := s.Build()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(st.Path, append(append(args, "--"), "sh", "-c", script)...)
	cmd.ExtraFiles = files
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}

// A directory given back inside a hidden one is visible whatever order the caller listed them
// in; its hidden siblings are not, and ~/.ssh stays hidden even when the home allowlist names
// a link to it.
func TestMasksAndGivebacks(t *testing.T) {
	st := needBwrap(t)
	root := t.TempDir()
	mk := func(p, body string) string {
		full := filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return full
	}
	mk("repo/main.go", "main")
	mk("repo/.git/HEAD", "ref")
	mk("repo/.git/arbor/worktrees/me/mine.txt", "mine")
	mk("repo/.git/arbor/worktrees/other/theirs.txt", "theirs")
	mk("home/.ssh/id_rsa", "PRIVATE")
	mk("home/.config/tool/rc", "rc")
	mk("home/secret.txt", "secret")
	os.Symlink(filepath.Join(root, "home/.ssh"), filepath.Join(root, "home/sshlink"))
	tmp := filepath.Join(root, "tmp")
	tmpf, err := OpenDir(root, "tmp", true)
	if err != nil {
		t.Fatal(err)
	}
	defer tmpf.Close()
	wt := filepath.Join(root, "repo/.git/arbor/worktrees/me")
	s := Spec{
		Dir:       wt,
		Hide:      []string{filepath.Join(root, "repo/.git/arbor"), filepath.Join(root, "repo")}, // deeper first on purpose
		ReadOnly:  []string{filepath.Join(root, "repo/.git")},
		Home:      filepath.Join(root, "home"),
		HomeAllow: []string{".config", "sshlink"},
		Binds:     []Bind{{File: tmpf, Dst: "/tmp", Writable: true}},
	}
	checks := []struct{ script, want string }{
		{"cat mine.txt", "mine"},
		{"echo w > new.txt && cat new.txt", "w"},
		{"cat " + root + "/repo/.git/HEAD", "ref"},
		{"echo x > " + root + "/repo/.git/HEAD 2>&1 || echo refused", "refused"},
		{"cat " + root + "/repo/main.go 2>&1 || echo hidden", "hidden"},
		{"ls " + root + "/repo/.git/arbor/worktrees", "me"},
		{"cat " + root + "/repo/.git/arbor/worktrees/other/theirs.txt 2>&1 || echo hidden", "hidden"},
		{"cat " + root + "/home/.ssh/id_rsa 2>&1 || echo hidden", "hidden"},
		{"cat " + root + "/home/secret.txt 2>&1 || echo hidden", "hidden"},
		{"cat " + root + "/home/.config/tool/rc", "rc"},
		{"echo t > /tmp/t && cat " + tmp + "/t 2>&1; cat /tmp/t", "t"},
		{"grep CapEff /proc/self/status", "0000000000000000"},
		{"mount -o remount,rw / 2>&1 || echo refused", "refused"},
		{"echo $$", "2"},
	}
	for _, c := range checks {
		out, err := runIn(t, st, s, c.script)
		if err != nil || strings.TrimSpace(out) != c.want && !strings.HasSuffix(strings.TrimSpace(out), c.want) {
			t.Errorf("%s → %q (%v), want it to end with %q", c.script, out, err, c.want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(wt, "new.txt")); string(b) != "w\n" {
		t.Errorf("a write in the worktree did not land: %q", b)
	}
	if _, err := os.Stat(filepath.Join(tmp, "t")); err != nil {
		t.Errorf("/tmp inside is not Spec.Tmp: %v", err)
	}
}

func TestHomeAllowRefusesSSH(t *testing.T) {
	for _, rel := range []string{".ssh", ".ssh/config", ".", "", "../x", "/etc"} {
		if _, err := (Spec{Dir: "/", Home: t.TempDir(), HomeAllow: []string{rel}}).Args(); err == nil {
			t.Errorf("HomeAllow %q accepted", rel)
		}
	}
}

// The info fd gives the host pid of the sandbox's init, and CommandPID the command's, which is
// not the pid the command sees for itself.
func TestCommandPID(t *testing.T) {
	st := needBwrap(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	args, files, err := Spec{Dir: t.TempDir(), Info: w}.Build()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(st.Path, append(append(args, "--"), "sleep", "30")...)
	cmd.ExtraFiles = files
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	info, _ := io.ReadAll(r) // bwrap closes the fd once the JSON is written
	child, err := ChildPID(info)
	if err != nil {
		t.Fatal(err)
	}
	// The init forks, then the child execs: until then it still runs bwrap.
	var pid int
	var b []byte
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if pid, err = CommandPID(child); err == nil {
			if b, _ = os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); strings.HasPrefix(string(b), "sleep\x0030") {
				return
			}
		}
	}
	t.Errorf("pid %d (%v) runs %q, want the sandboxed sleep", pid, err, b)
}

func TestEnv(t *testing.T) {
	t.Setenv("OPENAI_KEY", "sk-planted")
	t.Setenv("MY_TOOL_HOME", "/opt/tool")
	t.Setenv("ARBOR_API_KEY_ENV", "OPENAI_KEY")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "aws")
	t.Setenv("LC_ALL", "C.UTF-8")
	env := strings.Join(Env([]string{"MY_TOOL_HOME", "OPENAI_KEY"}, []string{"OPENAI_KEY"}), "\n")
	for _, gone := range []string{"OPENAI_KEY=", "ARBOR_API_KEY_ENV=", "AWS_SECRET_ACCESS_KEY="} {
		if strings.Contains(env, gone) {
			t.Errorf("%s passed", gone)
		}
	}
	for _, kept := range []string{"MY_TOOL_HOME=/opt/tool", "LC_ALL=C.UTF-8", "PATH="} {
		if !strings.Contains(env, kept) {
			t.Errorf("%s missing", kept)
		}
	}
}
