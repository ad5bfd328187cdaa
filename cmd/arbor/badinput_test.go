package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Bad input from a user: unknown ids, no repository, no model, a broken model or kernel,
// wrong arguments. Each gets a non-zero exit and a message naming what was wrong.

func TestUnknownSessionID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, args := range [][]string{{"log", "nope"}, {"stop", "deadbeef"}, {"diff", "cafe0000"}, {"log", "nope", "--follow"}} {
		r := e.arbor(args...)
		if r.code == 0 || !strings.Contains(r.stderr, args[1]) || !strings.Contains(r.stderr, "unknown session") {
			t.Errorf("want a non-zero exit and a message naming %q as an unknown session:\n%s", args[1], r)
		}
	}
}

func TestRunOutsideGitRepository(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.arborIn(t.TempDir(), "run", "compute two")
	if r.code == 0 || !regexp.MustCompile(`not (inside )?a git repository`).MatchString(r.stderr) {
		t.Errorf("want a non-zero exit and \"not a git repository\":\n%s", r)
	}
}

func TestRunWithoutModel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.vars["ARBOR_MODEL_BASE_URL"], e.vars["ARBOR_MODEL"] = "", ""
	r := e.arbor("run", "compute two")
	if r.code == 0 || !strings.Contains(r.stderr, "no model configured") || !strings.Contains(r.stderr, "ARBOR_MODEL_BASE_URL") {
		t.Errorf("want a non-zero exit and a message saying how to configure a model:\n%s", r)
	}
	if out := e.git(e.repo, "branch", "--list", "arbor/*"); out != "" {
		t.Errorf("a refused run left a branch behind: %q", out)
	}
}

func TestModelUnreachableFailsTheSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.vars["ARBOR_MODEL_BASE_URL"] = "http://127.0.0.1:1/v1"
	r := e.arbor("run", "compute two")
	id := sessionID(t, r)
	if r.code == 0 || !strings.Contains(r.stdout, "● failed") || !strings.Contains(r.stdout, "127.0.0.1:1") {
		t.Errorf("want a non-zero exit and the session failed with the endpoint named:\n%s", r)
	}
	if s := e.session(id); s.State != "failed" || !strings.Contains(s.Error, "127.0.0.1:1") {
		t.Errorf("arbor ls --json: state %q error %q, want failed naming the endpoint", s.State, s.Error)
	}
}

func TestModelAnswersGarbage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.arbor("run", "garbage in")
	id := sessionID(t, r)
	s := e.session(id)
	if r.code == 0 || s.State != "failed" || s.Error == "" {
		t.Errorf("want a non-zero exit and a failed session with a reason; state %q error %q\n%s", s.State, s.Error, r)
	}
}

func TestCellThatRaisesReachesTheModel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.mustArbor("run", "divide by zero")
	id := sessionID(t, r)
	for _, want := range []string{"ZeroDivisionError", "the cell raised ZeroDivisionError; stopping here", "● idle"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("run output lacks %q:\n%s", want, r)
		}
	}
	evs := parseEvents(t, e.mustArbor("log", id, "--json"))
	var sawError bool
	for _, ev := range evs {
		if ev.Type == "tool_finished" {
			var d struct{ Status, Output string }
			json.Unmarshal(ev.Data, &d)
			sawError = d.Status == "error" && strings.Contains(d.Output, "ZeroDivisionError")
		}
	}
	if !sawError {
		t.Errorf("no tool_finished with status error and the traceback")
	}
	if s := e.session(id); s.State != "idle" {
		t.Errorf("state = %q, want idle: a failing cell does not end the session", s.State)
	}
}

func TestNoPythonWithIPykernel(t *testing.T) {
	t.Parallel()
	pythons := map[string]string{"bin-false": "/bin/false"}
	if p := pythonWithoutIPykernel(); p != "" {
		pythons["path-python3"] = p
	}
	for name, python := range pythons {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.vars["ARBOR_KERNEL_PYTHON"] = python
			r := e.mustArbor("run", "no python here")
			if !regexp.MustCompile(`result \(unavailable\):\n\s+│ the python tool is unavailable: \S`).MatchString(r.stdout) {
				t.Errorf("the tool result does not say the python tool is unavailable, with a reason:\n%s", r)
			}
			if !strings.Contains(r.stdout, "python is unavailable, so I stop") || !strings.Contains(r.stdout, "● idle") {
				t.Errorf("the model did not see the unavailable tool, or the session did not settle:\n%s", r)
			}
		})
	}
}

// pythonWithoutIPykernel finds an interpreter on PATH that cannot import ipykernel (often a
// pyenv or virtualenv python3 first on PATH), resolved to its real executable.
func pythonWithoutIPykernel() string {
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		p := filepath.Join(dir, "python3")
		if _, err := os.Stat(p); err != nil {
			continue
		}
		out, err := exec.Command(p, "-c", "import sys, importlib.util as u; print(sys.executable); sys.exit(3 if u.find_spec('ipykernel') else 0)").Output()
		if err == nil {
			if exe := strings.TrimSpace(string(out)); exe != "" {
				return exe
			}
		}
	}
	return ""
}

func TestUnknownModelName(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.arbor("run", "--model", "no-such-model", "compute two")
	if r.code == 0 || !strings.Contains(r.stderr, "no-such-model") {
		t.Errorf("want a non-zero exit and a message naming the unknown model:\n%s", r)
	}
}

func TestFakeModelRefusesABrokenScript(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bad := filepath.Join(e.root, "bad.json")
	writeFile(t, bad, `{"rules":[{"when":{"task":"ok"},"text":"fine"},{"when":{"task":"(unclosed"},"text":"x"}]}`)
	r := e.arborIn(e.root, "fake-model", "--script", bad)
	if r.code == 0 || !strings.Contains(r.stderr, filepath.Base(bad)) || !strings.Contains(r.stderr, "rule 2") {
		t.Errorf("want a refusal naming the file and rule 2:\n%s", r)
	}
}

// TestBadArguments: each mistake gets a non-zero exit and a message naming what was wrong.
func TestBadArguments(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := sessionID(t, e.mustArbor("run", "hello there"))
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"run", ""}, "task is empty"},
		{[]string{"run", "   "}, "task is empty"},
		{[]string{"run"}, "usage: arbor run"},
		{[]string{"run", "--dir", "/nonexistent", "x"}, "/nonexistent is not a directory"},
		{[]string{"log"}, "usage: arbor log ID"},
		{[]string{"send", id, "hi", "--mode", "weird"}, `"weird"`},
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"run", "--no-such-flag", "x"}, "no-such-flag"},
	} {
		r := e.arbor(tt.args...)
		if r.code == 0 || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("want a non-zero exit and %q:\n%s", tt.want, r)
		}
	}
	if out := e.git(e.repo, "branch", "--list", "arbor/*"); strings.Count(out, "\n") != 1 {
		t.Errorf("refused runs left branches behind:\n%s", out)
	}
}
