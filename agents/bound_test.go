package agents

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
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
 {"when":{"task":"^big","turn":2},"code":"print(len(_arbor_out[1].splitlines()), _arbor_out[1].splitlines()[12345])"},
 {"when":{"task":"^big"},"text":"ok"}
],"default":{"text":"ok"}}`

func TestLargeOutputStaysInKernel(t *testing.T) {
	e := newEnv(t, bigOutputScript)
	s := e.create("big output")
	e.settled(s)
	outs := e.events(s, EvToolFinished)
	if len(outs) != 2 {
		t.Fatalf("tool results: %v", outs)
	}
	if first := fmt.Sprint(outs[0]["output"]); len(first) > 9000 || !strings.Contains(first, "_arbor_out[1]") {
		t.Errorf("first output not bounded (%d bytes)", len(first))
	}
	if second := fmt.Sprint(outs[1]["output"]); !strings.Contains(second, "20000 line 12345") {
		t.Errorf("the kernel does not hold the full output: %q", second)
	}
}
