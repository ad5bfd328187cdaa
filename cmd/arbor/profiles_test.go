package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunWithAProfile: `arbor run --profile NAME` runs with the profile (here fenced tool
// mode: the model's code comes as a python block, and still runs), the session shows and
// records it; an unknown profile is refused listing the defined ones; a repository's
// completion gate waits for `arbor trust`, which `arbor profiles` says.
func TestRunWithAProfile(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	writeFile(t, filepath.Join(e.repo, "arbor.json"), `{"models":{"scripted":{}},"profiles":{
		"fenced":{"toolMode":"fenced","maxTurnSteps":3,"cellTimeout":"5m"},
		"ci":{"until":"test -f calc.py","maxWall":"2h"}}}`)

	r := e.mustArbor("run", "--profile", "fenced", "compute two plus two minus two")
	id := sessionID(t, r)
	if !strings.Contains(r.stdout, "the answer is 2") {
		t.Fatalf("the run with the profile did not finish:\n%s", r)
	}
	log := parseEvents(t, e.mustArbor("log", id, "--json"))
	var created struct {
		Profile         string `json:"profile"`
		ProfileSettings struct {
			ToolMode     string `json:"toolMode"`
			MaxTurnSteps int    `json:"maxTurnSteps"`
			CellTimeout  string `json:"cellTimeout"`
		} `json:"profileSettings"`
	}
	if err := json.Unmarshal(log[0].Data, &created); err != nil || log[0].Type != "session_created" {
		t.Fatalf("first event %s %s: %v", log[0].Type, log[0].Data, err)
	}
	if created.Profile != "fenced" || created.ProfileSettings.ToolMode != "fenced" || created.ProfileSettings.MaxTurnSteps != 3 || created.ProfileSettings.CellTimeout != "5m0s" {
		t.Fatalf("session_created records %+v", created)
	}
	fencedBlock := false
	for _, ev := range log {
		// The client names the calls it parses out of python blocks call_fenced_*.
		if ev.Type == "assistant_message" && strings.Contains(string(ev.Data), `"id":"call_fenced_`) {
			fencedBlock = true
		}
	}
	if !fencedBlock {
		t.Fatalf("no assistant message wrote its code as a python block:\n%s", e.mustArbor("log", id, "--json").stdout)
	}
	if ls := e.mustArbor("ls"); !strings.Contains(ls.stdout, "scripted profile=fenced") {
		t.Fatalf("arbor ls does not show the profile:\n%s", ls)
	}
	if tree := e.mustArbor("tree"); !strings.Contains(tree.stdout, id[:8]+" profile=fenced") {
		t.Fatalf("arbor tree does not show the profile:\n%s", tree)
	}
	if ls := e.mustArbor("ls", "--json"); !strings.Contains(ls.stdout, `"profile": "fenced"`) {
		t.Fatalf("arbor ls --json does not carry the profile:\n%s", ls)
	}

	r = e.arbor("run", "--profile", "nope", "compute two plus two minus two")
	if r.code == 0 || !strings.Contains(r.stderr, `unknown profile "nope": the defined profiles are ci, fenced`) || strings.Contains(r.stdout, "session ") {
		t.Fatalf("an unknown profile:\n%s", r)
	}
	e.refused(e.arbor("run", "--profile", "ci", "compute two plus two minus two"), `profiles.ci.until = "test -f calc.py"`)

	p := e.mustArbor("profiles")
	for _, want := range []string{"ci  (" + filepath.Join(e.repo, "arbor.json") + ")", "not applied", "arbor trust " + e.repo,
		`profiles.ci.until = "test -f calc.py"`, "maxWall       2h0m0s", "fenced  (", "toolMode      fenced"} {
		if !strings.Contains(p.stdout, want) {
			t.Errorf("arbor profiles lacks %q:\n%s", want, p)
		}
	}
	e.mustArbor("trust", "--yes")
	p = e.mustArbor("profiles", "--json")
	var listed struct {
		Profiles []struct {
			Name      string            `json:"name"`
			Settings  map[string]any    `json:"settings"`
			Untrusted []json.RawMessage `json:"untrusted"`
		} `json:"profiles"`
	}
	if err := json.Unmarshal([]byte(p.stdout), &listed); err != nil || len(listed.Profiles) != 2 {
		t.Fatalf("arbor profiles --json: %v\n%s", err, p)
	}
	if ci := listed.Profiles[0]; ci.Name != "ci" || ci.Settings["until"] != "test -f calc.py" || len(ci.Untrusted) != 0 {
		t.Fatalf("arbor profiles after trust: %+v", ci)
	}
	// Trusted, the profile's gate ends the run once it passes (an autonomous run: see
	// TestProfileMakesTheRunAutonomous).
	r = e.mustArbor("run", "--profile", "ci", "compute two plus two minus two")
	if s := e.session(sessionID(t, r)); s.Model != "scripted" || !strings.Contains(r.stdout, "test -f calc.py") {
		t.Fatalf("the trusted profile's run: %+v\n%s", s, r)
	}
}
