package agents

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/arborhq/arbor/agents/event"
)

func TestBoundOutput(t *testing.T) {
	dir := t.TempDir()
	small, err := boundOutput("hello", 100, dir, "_arbor_out[1]")
	if err != nil || small.Cut || small.Text != "hello" {
		t.Fatalf("small output changed: %+v %v", small, err)
	}
	big := strings.Repeat("héllo wörld\n", 5000)
	b, err := boundOutput(big, 1000, dir, "_arbor_out[7]")
	if err != nil {
		t.Fatal(err)
	}
	if !b.Cut || len(b.Text) > 1300 || !utf8.ValidString(b.Text) {
		t.Fatalf("bounded text: cut=%v len=%d valid=%v", b.Cut, len(b.Text), utf8.ValidString(b.Text))
	}
	for _, want := range []string{"_arbor_out[7]", fmt.Sprint(len(big)), "omitted"} {
		if !strings.Contains(b.Text, want) {
			t.Errorf("note lacks %q: %s", want, b.Text[600:900])
		}
	}
	if !strings.HasPrefix(b.Text, "héllo") || !strings.HasSuffix(b.Text, "wörld\n") {
		t.Errorf("head or tail lost")
	}
	full, err := os.ReadFile(b.Artifact)
	if err != nil || string(full) != big {
		t.Errorf("artifact does not hold the full output: %v", err)
	}
}

const bigOutputScript = `{"rules":[
 {"when":{"task":"^big","turn":1},"code":"print('\\n'.join(f'line {i}' for i in range(20000)))"},
 {"when":{"task":"^big","turn":2},"code":"print(len(_arbor_out[1].splitlines()), _arbor_out[1].splitlines()[12345], _arbor_out[-1] is _arbor_out[1])"},
 {"when":{"task":"^big"},"text":"ok"}
],"default":{"text":"ok"}}`

func TestLargeOutputStaysInKernel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bigOutputScript)
	s := e.create("big output")
	e.settled(s)
	outs := e.events(s, event.TypeToolFinished)
	if len(outs) != 2 {
		t.Fatalf("tool results: %v", outs)
	}
	if first := fmt.Sprint(outs[0]["output"]); len(first) > 9000 || !strings.Contains(first, "_arbor_out[1]") {
		t.Errorf("first output not bounded (%d bytes)", len(first))
	}
	if second := fmt.Sprint(outs[1]["output"]); !strings.Contains(second, "20000 line 12345 True") {
		t.Errorf("the kernel does not hold the full output as _arbor_out[1] and [-1]: %q", second)
	}
	// Keeping it ran no cell of the model's: the second cell is cell 2.
	if n := fmt.Sprint(outs[1]["executionCount"]); n != "2" {
		t.Errorf("second cell numbered %s, want 2", n)
	}
}

const richScript = `{"rules":[
 {"when":{"task":"^plot","turn":1},"code":"from IPython.display import display, Image, HTML\nimport base64\npng = base64.b64decode('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==')\ndisplay(Image(data=png))\ndisplay(HTML('<b>hi</b>'))"},
 {"when":{"task":"^plot"},"text":"ok"}
],"default":{"text":"ok"}}`

func TestRichOutputsBecomeArtifacts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, richScript)
	s := e.create("plot something")
	e.settled(s)
	out := e.events(s, event.TypeToolFinished)[0]
	text := fmt.Sprint(out["output"])
	if !strings.Contains(text, "[image/png output, 70 bytes, saved as ") || !strings.Contains(text, "[text/html output") {
		t.Fatalf("model-facing output does not name the saved files: %q", text)
	}
	rich, _ := out["rich"].([]any)
	if len(rich) != 2 {
		t.Fatalf("rich artifacts: %v", out["rich"])
	}
	png, err := os.ReadFile(fmt.Sprint(rich[0]))
	if err != nil || string(png[1:4]) != "PNG" {
		t.Errorf("saved image is not the PNG: %v %q", err, png[:8])
	}
}
