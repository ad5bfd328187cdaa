package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recallScript answers by whether the global memory reached the system prompt.
const recallScript = `{"rules":[
 {"when":{"task":"^recall","system":"GLOBAL-MEMORY-7"},"text":"I see the global memory"},
 {"when":{"task":"^recall"},"text":"no global memory here"}
],"default":{"text":"ok"}}`

// TestFsckHarness: arbor fsck checks the harness stores — the workspace's, each session's and
// the global one — and lists each as ok when they are. Then the global store is damaged in
// three ways in turn (a blob truncated, its head tree removed, garbage in its ref file): each
// time a new session still runs its turn to the end, without the global memory, and fsck exits
// 1 naming the global store's path, what is broken and how to start it afresh.
func TestFsckHarness(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	script := filepath.Join(e.root, "recall.json")
	writeFile(t, script, recallScript)
	fm, url, err := startFakeModel(script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fm.Process.Kill(); fm.Wait() })
	e.vars["ARBOR_MODEL_BASE_URL"] = url
	global := filepath.Join(e.vars["XDG_DATA_HOME"], "arbor", "harness")
	const globalRef = "refs/arbor/harness/global"

	e.mustArbor("harness", "edit", "--scope", "global", "memory", "editor", "--title", "Editor", "--body", "GLOBAL-MEMORY-7: the user edits with vim.")
	e.mustArbor("harness", "edit", "note", "tests-first", "--title", "Run the tests first", "--body", "Before changing code, run the tests.")
	r := e.mustArbor("run", "recall the user's editor")
	if !strings.Contains(r.stdout, "I see the global memory") {
		t.Fatalf("the global memory did not reach a healthy turn:\n%s", r)
	}
	id := sessionID(t, r)
	e.mustArbor("harness", "edit", "--scope", "session", "--session", id, "note", "short-cells", "--title", "Short cells", "--body", "Keep cells short.")

	r = e.mustArbor("fsck")
	for _, want := range []string{
		"harness workspace (refs/arbor/harness/workspace): ok, 1 commits, 1 entries\n",
		fmt.Sprintf("harness session %s (refs/arbor/harness/session/%s): ok, 1 commits, 1 entries\n", id, id),
		fmt.Sprintf("harness global (%s): ok, 1 commits, 1 entries\n", global),
		"1 logs and 3 harness stores checked, 0 with problems\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("fsck of a healthy repository lacks %q:\n%s", want, r)
		}
	}

	object := func(rev string) string {
		t.Helper()
		oid := strings.TrimSpace(e.git(global, "rev-parse", rev))
		p := filepath.Join(global, "objects", oid[:2], oid[2:])
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	daemonLog := filepath.Join(e.vars["ARBOR_STATE_DIR"], "daemon.log")
	for i, c := range []struct {
		name    string
		corrupt func()
		want    string // in fsck's line for the global store
		warned  bool   // the daemon warns that the turn goes on without the global scope
	}{
		{"a blob truncated", func() {
			p := object(globalRef + ":memories/editor.md")
			fi, _ := os.Stat(p)
			if err := os.Truncate(p, fi.Size()-4); err != nil {
				t.Fatal(err)
			}
		}, "(memories/editor.md) is corrupt", true},
		{"the head tree removed", func() {
			if err := os.Remove(object(globalRef + "^{tree}")); err != nil {
				t.Fatal(err)
			}
		}, "is missing from the object store", true},
		// git skips a ref it cannot read with a warning; the store says it is damaged.
		{"garbage in the ref file", func() {
			writeFile(t, filepath.Join(global, "refs", "arbor", "harness", "global"), "garbage\n")
		}, `harness/global holds "garbage", not a commit id`, true},
	} {
		before, _ := os.ReadFile(daemonLog)
		c.corrupt()
		r := e.mustArbor("run", fmt.Sprintf("recall the user's editor (%d)", i))
		if !strings.Contains(r.stdout, "no global memory here") {
			t.Errorf("%s: the turn did not go on without the global store:\n%s", c.name, r)
		}
		if s := e.session(sessionID(t, r)); s.State != "idle" {
			t.Errorf("%s: the session is %s (%s), want idle", c.name, s.State, s.Error)
		}
		after, _ := os.ReadFile(daemonLog)
		logged := string(after[len(before):])
		if warned := strings.Contains(logged, "harness") && strings.Contains(logged, "scope=global"); warned != c.warned {
			t.Errorf("%s: daemon warned %v, want %v:\n%s", c.name, warned, c.warned, logged)
		}

		r = e.arbor("fsck")
		var line string
		for l := range strings.SplitSeq(r.stdout, "\n") {
			if strings.HasPrefix(l, "harness global ") {
				line = l
			}
		}
		prefix := fmt.Sprintf("harness global (%s): CORRUPT: ", global)
		if r.code != 1 || !strings.HasPrefix(line, prefix) || !strings.Contains(line, c.want) ||
			!strings.HasSuffix(line, "the sessions go on without it; to start it afresh move "+global+" aside") {
			t.Errorf("%s: fsck (exit %d) global line %q, want %q…%q", c.name, r.code, line, prefix, c.want)
		}
		if !strings.Contains(r.stdout, "3 harness stores checked, 1 with problems\n") ||
			!strings.Contains(r.stdout, "harness workspace (refs/arbor/harness/workspace): ok, 1 commits, 1 entries\n") {
			t.Errorf("%s: fsck:\n%s", c.name, r)
		}
	}

	// Moved aside as told, the global store starts afresh and fsck is clean again.
	if err := os.Rename(global, global+".broken"); err != nil {
		t.Fatal(err)
	}
	r = e.mustArbor("fsck")
	if !strings.Contains(r.stdout, fmt.Sprintf("harness global (%s): ok, empty (not created yet)\n", global)) {
		t.Errorf("fsck after moving the global store aside:\n%s", r)
	}
}
