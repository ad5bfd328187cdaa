package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// arbor reject takes a session's change back on its own branch: the user's branch and tree
// stay as they were, nothing is left to review, the log says so.
func TestRejectFromTheCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := sessionID(t, e.mustArbor("run", "write a file please"))
	s := e.session(id)
	before := e.userTree(s.Branch)
	r := e.mustArbor("reject", id)
	if !strings.Contains(r.stdout, "reverted on the session's branch") || !strings.Contains(r.stdout, "hello.txt") {
		t.Errorf("reject said:\n%s", r)
	}
	if got := e.git(e.repo, "ls-tree", "--name-only", s.Branch, "hello.txt"); got != "" {
		t.Errorf("hello.txt still on %s", s.Branch)
	}
	after := e.userTree(s.Branch)
	after.sessionTip, before.sessionTip = "", ""
	if after != before {
		t.Errorf("the reject changed the user's checkout:\nbefore %+v\nafter  %+v", before, after)
	}
	if d := e.mustArbor("diff", id); strings.TrimSpace(d.stdout) != "" {
		t.Errorf("diff after rejecting everything:\n%s", d.stdout)
	}
	if l := e.mustArbor("log", id); !strings.Contains(l.stdout, "rejected by the user") {
		t.Errorf("the log does not show the rejection:\n%s", l.stdout)
	}
	if r := e.arbor("reject", id); r.code == 0 || !strings.Contains(r.stderr, "changes nothing") {
		t.Errorf("rejecting an empty change:\n%s", r)
	}
}

// arbor merge of a conflicting child writes git's merge of each conflicted file to a
// directory and says how to finish; with the files resolved there, --resolved merges them.
func TestMergeConflictFromTheCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pid := sessionID(t, e.mustArbor("run", "merge clash parent"))
	var child lsJSON
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		for _, s := range e.ls() {
			if s.Parent != nil && *s.Parent == pid && s.State == "idle" {
				child = s
			}
		}
		if child.ID != "" || time.Now().After(deadline) {
			break
		}
	}
	if child.ID == "" {
		t.Fatalf("the child never went idle: %+v", e.ls())
	}
	for deadline := time.Now().Add(60 * time.Second); e.session(pid).State != "idle"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the parent never went idle: %+v", e.session(pid))
		}
	}
	r := e.arbor("merge", child.ID)
	if r.code == 0 || !strings.Contains(r.stderr, "calc.py") || !strings.Contains(r.stderr, "--resolved") {
		t.Fatalf("a conflicting merge:\n%s", r)
	}
	m := regexp.MustCompile(`--resolved (\S+)`).FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("no directory in:\n%s", r.stderr)
	}
	dir := m[1]
	t.Cleanup(func() { os.RemoveAll(dir) })
	merged, err := os.ReadFile(filepath.Join(dir, "calc.py"))
	if err != nil || !strings.Contains(string(merged), "<<<<<<<") || !strings.Contains(string(merged), "# child") || !strings.Contains(string(merged), "# parent") {
		t.Fatalf("the conflicted calc.py (%v):\n%s", err, merged)
	}
	// Markers left: refused, nothing merged.
	if r := e.arbor("merge", child.ID, "--resolved", dir); r.code == 0 || !strings.Contains(r.stderr, "conflict markers") {
		t.Errorf("a resolution with markers:\n%s", r)
	}
	resolved := "def add(a, b):\n    return a + b  # both\n"
	writeFile(t, filepath.Join(dir, "calc.py"), resolved)
	r = e.mustArbor("merge", child.ID, "--resolved", dir)
	if !strings.Contains(r.stdout, "merged into the parent's branch") {
		t.Errorf("merge said:\n%s", r)
	}
	parent := e.session(pid)
	if got := e.git(e.repo, "show", parent.Branch+":calc.py"); got != resolved {
		t.Errorf("calc.py on the parent's branch = %q", got)
	}
	if parents := strings.Fields(e.git(e.repo, "log", "-1", "--format=%P", parent.Branch)); len(parents) != 2 {
		t.Errorf("the merge commit has parents %v", parents)
	}
}
