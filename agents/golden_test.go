package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/harness"
)

var updateGolden = flag.Bool("update", false, "record the golden event fixtures in extensions/test/golden anew")

// goldenDir holds event logs recorded from real sessions; the CLI, the VS Code transcript and
// the Neovim log each render them in their own tests.
const goldenDir = "../extensions/test/golden"

const goldenScript = `{"rules":[
 {"when":{"system":"You refine the harness","last":"(?s)\\[seq (\\d+) tool_finished error"},"text":"{\"summary\":\"a missing module\",\"edits\":[{\"op\":\"create\",\"entry\":{\"kind\":\"note\",\"id\":\"check-modules\",\"title\":\"Check modules\",\"body\":\"Check a module is installed before importing it.\"},\"trigger\":[{{last.1}}],\"rationale\":\"the import failed\",\"intended\":\"no failed imports\"}]}"},
 {"when":{"task":"^learn","turn":1},"code":"await harness.notes.create('tests-first', 'Run the tests first', body='Run the tests before you commit.')\np = await harness.memories.create('db-port', 'Database port', body='The test database listens on 5433.', scope='workspace')\nprint(p['status'])\nimport no_such_module_q"},
 {"when":{"task":"^learn"},"text":"learned"},
 {"when":{"task":"^Summarise"},"text":"SUMMARY: the agent printed numbered blocks."},
 {"when":{"task":"^rename","last":"helper written"},"code":"print(1/0)"},
 {"when":{"task":"^rename","last":"ZeroDivisionError"},"text":"The division failed; the helper is in place, so I leave it there."},
 {"when":{"task":"^rename","turn":1},"code":"h = await rlm('write the helper', name='helper')\nprint('spawned', h.name)"},
 {"when":{"task":"^rename","last":"spawned"},"text":"Waiting for the helper."},
 {"when":{"task":"^write the helper","turn":1},"code":"open('helper.py','w').write('def helper():\\n    return 1\\n')\nawait agent_message.send('helper written', receiver_role='parent')"},
 {"when":{"task":"^write the helper"},"text":"done"},
 {"when":{"task":"^grow","last":"block 6 "},"text":"done growing"},
 {"when":{"task":"^grow"},"code":"n = globals().get('n', 0) + 1\nprint('block', n, 'x' * 400)"},
 {"when":{"task":"^broken"},"fail":{"status":400,"message":"the model refused this request","times":0},"text":"never"}
],"default":{"text":"ok"}}`

// TestRecordGoldenEvents records, with -update, the logs of real sessions that cover a child,
// a message, a failing cell, a failed turn, a compaction and a fork. Without -update it checks
// that the recorded fixtures still decode, field for field, into today's payload structs.
func TestRecordGoldenEvents(t *testing.T) {
	if !*updateGolden {
		checkGolden(t)
		return
	}
	e := newEnv(t, goldenScript)
	os.WriteFile(filepath.Join(e.repo, "arbor.json"), []byte(`{"models":{"scripted":{"contextWindow":1200}}}`), 0o644)
	root := e.create("rename area_of to rect_area")
	e.waitFor("the root hears from its child and finishes", func() bool {
		return len(e.events(root, event.TypeToolFinished)) >= 2 && e.quiet(root) && len(root.childIDs()) == 1
	})
	child, _ := e.svc.Get(root.childIDs()[0])
	e.settled(child)
	fork, err := e.svc.Fork(context.Background(), root.meta.ID, 0, "second try")
	if err != nil {
		t.Fatal(err)
	}
	grow := e.create("grow the context")
	e.settled(grow)
	broken := e.create("broken model")
	e.waitFor("the broken session fails", func() bool { return broken.State() == Failed })
	learn := e.create("learn the habits")
	e.settled(learn)
	ctx := context.Background()
	if out, err := e.svc.Refine(ctx, learn.meta.ID, RefineRequest{Trigger: "user"}); err != nil || len(out.Proposals) != 1 {
		t.Fatalf("refine = %+v, %v", out, err)
	}
	pending, err := e.svc.Proposals(ctx, e.repo, harness.Pending)
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending = %+v, %v", pending, err)
	}
	if _, err := e.svc.RejectProposal(ctx, e.repo, pending[0].ID, "not for this team"); err != nil {
		t.Fatal(err)
	}
	st, _ := e.svc.HarnessStore(ctx, e.repo, harness.ScopeSession, learn.meta.ID)
	hist, _ := st.History(ctx, harness.Note, "tests-first")
	if _, err := st.Delete(ctx, harness.Note, "tests-first", hist[0].Commit, harness.Change{Author: "user"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Rollback(ctx, harness.Note, "tests-first", hist[0].Commit, harness.Change{Author: "user"}); err != nil {
		t.Fatal(err)
	}
	head, _ := st.Head(ctx)
	e.svc.RolledBack(ctx, learn.meta.ID, event.HarnessRolledBack{Scope: "session", Kind: "note", ID: "tests-first", To: hist[0].Commit, Commit: head, Author: "user"})
	for name, s := range map[string]*Session{"root": root, "child": child, "fork": fork, "compaction": grow, "failure": broken, "harness": learn} {
		writeGolden(t, name, s)
	}
}

// goldenEvent is server.Event's shape; server's tests check the two agree.
type goldenEvent struct {
	Session string          `json:"session"`
	Seq     uint64          `json:"seq"`
	TS      time.Time       `json:"ts"`
	Type    string          `json:"type"`
	Data    json.RawMessage `json:"data"`
}

func writeGolden(t *testing.T, name string, s *Session) {
	recs, err := s.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, r := range recs {
		line, _ := json.Marshal(goldenEvent{Session: s.meta.ID, Seq: r.Seq, TS: r.TS, Type: r.Type, Data: r.Data})
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join(goldenDir, name+".jsonl"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkGolden decodes every fixture record strictly: a payload field renamed or removed in Go
// makes this fail until the fixtures are recorded again (go test ./agents -run Golden -update).
func checkGolden(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(goldenDir, "*.jsonl"))
	if len(files) < 6 {
		t.Fatalf("want 6 golden logs in %s, have %d (record them: go test ./agents -run Golden -update)", goldenDir, len(files))
	}
	seen := map[event.Type]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
			var ge goldenEvent
			if err := strictDecode(line, &ge); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			p, err := event.Decode(event.Type(ge.Type), nil)
			if err != nil {
				t.Fatalf("%s seq %d: %v", f, ge.Seq, err)
			}
			if err := strictDecode(ge.Data, reflect.New(reflect.TypeOf(p)).Interface()); err != nil {
				t.Errorf("%s seq %d %s: %v (record the fixtures again with -update)", f, ge.Seq, ge.Type, err)
			}
			seen[event.Type(ge.Type)] = true
		}
	}
	for _, want := range []event.Type{event.TypeSubagentSpawned, event.TypeMessageSent, event.TypeTurnFailed,
		event.TypeCompaction, event.TypeForked, event.TypeToolFinished, event.TypeCheckpoint, event.TypeStateChanged,
		event.TypeHarnessProposed, event.TypeHarnessApplied, event.TypeHarnessRejected, event.TypeHarnessRolledBack, event.TypeRefined} {
		if !seen[want] {
			t.Errorf("the golden logs hold no %s event", want)
		}
	}
}

func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
