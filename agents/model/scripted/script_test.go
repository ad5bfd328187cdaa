package scripted

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, script, want string
	}{
		{"not json", `{"rules": [`, "script demo.json: unexpected end of JSON"},
		{"syntax error with line", "{\n\"rules\": [}\n", "script demo.json: line 2: invalid character '}'"},
		{"trailing data", `{"rules": []} {}`, "unexpected data after the JSON value"},
		{"unknown top-level field", `{"rulez": []}`, `script demo.json: json: unknown field "rulez"`},
		{"unknown rule field", `{"rules": [{"text": "a"}, {"txt": "b"}]}`, `script demo.json: rule 2: json: unknown field "txt"`},
		{"unknown when field", `{"rules": [{"when": {"tusk": "x"}, "text": "a"}]}`, `rule 1: json: unknown field "tusk"`},
		{"bad task regexp", `{"rules": [{"text":"a"},{"text":"b"},{"when": {"task": "("}, "text": "c"}]}`, "script demo.json: rule 3: when.task: invalid regexp: error parsing regexp: missing closing )"},
		{"bad last regexp", `{"rules": [{"when": {"last": "[z-a]"}, "text": "a"}]}`, "rule 1: when.last: invalid regexp"},
		{"negative turn", `{"rules": [{"when": {"turn": -1}, "text": "a"}]}`, "rule 1: when.turn: -1 is negative"},
		{"wrong type", `{"rules": [{"when": {"turn": "one"}, "text": "a"}]}`, "rule 1: when.turn: expected int, got JSON string"},
		{"empty reply", `{"rules": [{"when": {"turn": 1}}]}`, `rule 1: empty reply: set "text", "code" or "fail"`},
		{"negative delay", `{"rules": [{"text": "a", "delay_ms": -5}]}`, "rule 1: delay_ms: -5 is negative"},
		{"negative usage", `{"rules": [{"text": "a", "usage": {"prompt_tokens": -1}}]}`, "rule 1: usage: token counts must not be negative"},
		{"fail status not an error", `{"rules": [{"text": "a", "fail": {"status": 200}}]}`, "rule 1: fail.status: 200 is not an HTTP error status"},
		{"fail two kinds", `{"rules": [{"text": "a", "fail": {"status": 500, "cut": true}}]}`, `rule 1: fail: set exactly one of`},
		{"fail no kind", `{"rules": [{"text": "a", "fail": {"times": 1}}]}`, `rule 1: fail: set exactly one of`},
		{"fail times without reply", `{"rules": [{"fail": {"status": 500, "times": 1}}]}`, "rule 1: fail.times: after the failures the reply has nothing to say"},
		{"fail negative times", `{"rules": [{"text": "a", "fail": {"status": 500, "times": -1}}]}`, "rule 1: fail.times: -1 is negative"},
		{"default with when", `{"default": {"when": {"turn": 1}, "text": "a"}}`, `script demo.json: default: json: unknown field "when"`},
		{"empty default", `{"default": {}}`, "default: empty reply"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.script), "demo.json")
			if err == nil {
				t.Fatalf("Parse succeeded; want error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse error = %q; want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestParseDesignExample(t *testing.T) {
	t.Parallel()
	s, err := Load(filepath.Join("testdata", "design.json"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		conv     conversation
		wantRule int
	}{
		{conversation{task: "rename the type Foo", turn: 1}, 0},
		{conversation{task: "rename the type Foo", turn: 2}, 1},
		{conversation{task: "please update the tests", turn: 7}, 2},
		{conversation{task: "other", last: "Traceback (most recent call last)", turn: 3}, 3},
		{conversation{task: "other", last: "fine", turn: 3}, -1},
		{conversation{task: "rename the type Foo", last: "Traceback", turn: 3}, 3},
	}
	for _, tt := range tests {
		got, reply := s.match(tt.conv)
		if got != tt.wantRule {
			t.Errorf("match(%+v) = rule %d; want %d", tt.conv, got, tt.wantRule)
		}
		if got == -1 && reply.Text != "nothing scripted for this" {
			t.Errorf("default reply = %+v", reply)
		}
	}
}

func TestParseNoDefault(t *testing.T) {
	t.Parallel()
	s, err := Parse([]byte(`{"rules": []}`), "x.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, r := s.match(conversation{turn: 1}); !strings.Contains(r.Text, "no rule matched") {
		t.Errorf("reply without default = %q", r.Text)
	}
}

func TestLoadMissingFile(t *testing.T) {
	t.Parallel()
	_, err := Load(filepath.Join(t.TempDir(), "nope.json"))
	if err == nil || !strings.Contains(err.Error(), "nope.json") || !os.IsNotExist(unwrapAll(err)) {
		t.Errorf("Load(missing) = %v; want a not-exist error naming the file", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

// FuzzParse checks that Parse never panics and that whatever it accepts can
// be matched against.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"design.json", "robust.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"rules":[{"when":{"task":"(a+)+$","turn":2,"last":"x"},"text":"t","code":"c","usage":{"prompt_tokens":1,"completion_tokens":2}}]}`))
	f.Add([]byte(`{"rules":[{"fail":{"cut":true}}],"default":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data, "fuzz.json")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "script fuzz.json: ") {
				t.Fatalf("error does not name the script: %v", err)
			}
			return
		}
		s.match(conversation{task: "rename Foo", last: "Traceback", turn: 2})
	})
}

// A rule whose "last" has groups can quote them in its reply: {{last.N}}.
func TestReplyQuotesLastGroups(t *testing.T) {
	s, err := Parse([]byte(`{"rules":[{"when":{"last":"\\[seq (\\d+) (\\w+)"},"text":"trigger {{last.1}} of {{last.2}}, not {{last.3}}"},
		{"when":{"last":"plain"},"text":"kept {{last.1}} $HOME"}],"default":{"text":"none"}}`), "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, r := s.match(conversation{last: "x [seq 42 tool_finished error]"}); r.Text != "trigger 42 of tool_finished, not {{last.3}}" {
		t.Errorf("reply %q", r.Text)
	}
	if _, r := s.match(conversation{last: "plain"}); r.Text != "kept {{last.1}} $HOME" {
		t.Errorf("a rule without groups changed its reply: %q", r.Text)
	}
	// The rule's own reply is not rewritten for the next request.
	if _, r := s.match(conversation{last: "[seq 7 kernel"}); r.Text != "trigger 7 of kernel, not {{last.3}}" {
		t.Errorf("second reply %q", r.Text)
	}
}
