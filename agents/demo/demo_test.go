package demo

import (
	"bytes"
	"strings"
	"testing"
)

// TestDemo runs `arbor demo` as make demo does, on a real kernel and git.
func TestDemo(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	var out bytes.Buffer
	if err := Run(t.Context(), &out, Options{Dir: t.TempDir(), Python: "/usr/bin/python3"}); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	for _, want := range []string{"+def rect_area(width, height):", "+from geometry import rect_area, perimeter", "state idle", "python → OK",
		"end condition `python3 -m unittest -q` passed", "run complete after 1 turn(s): verified by `python3 -m unittest -q`: yes; the model claimed success: yes",
		"CalledProcessError: Command", "create memory how-to-test — pending, waiting for review", "+++ b/memories/how-to-test.md",
		"Arbor-Author: refine", "Arbor-Intended-Effect: the first test run of a session works", "Arbor-Proposal: p"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
	// The diff a newcomer reads holds the rename and nothing else.
	var files []string
	session, _, _ := strings.Cut(out.String(), "── /refine")
	for _, line := range strings.Split(session, "\n") {
		if f, ok := strings.CutPrefix(line, "diff --git a/"); ok {
			files = append(files, strings.Fields(f)[0])
		}
	}
	if strings.Join(files, " ") != "geometry.py report.py test_geometry.py" {
		t.Errorf("demo diff covers %v, want the three renamed files", files)
	}
}
