package kernel

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestExecute(t *testing.T) {
	k := startKernel(t, Options{})
	tests := []struct {
		name, code string
		status     string
		text       string // substring of Result.Text
		kinds      []string
		errName    string
	}{
		{"expression", "1+1", "ok", "2\n", []string{"result"}, ""},
		{"print", "print('hello')", "ok", "hello\n", []string{"stdout"}, ""},
		{"stderr", "import sys; print('oops', file=sys.stderr)", "ok", "oops", []string{"stderr"}, ""},
		{"raise", "raise ValueError('bad value')", "error", "ValueError: bad value", []string{"error"}, "ValueError"},
		{"after error still runs", "2*21", "ok", "42", []string{"result"}, ""},
		{"input fails at once", "input('name? ')", "error", "StdinNotImplementedError", []string{"error"}, "StdinNotImplementedError"},
		{"top-level await", "import asyncio\nawait asyncio.sleep(0.01)\n'awaited'", "ok", "'awaited'", []string{"result"}, ""},
		{"debugpy importable after boot", "import importlib.util\nimportlib.util.find_spec('debugpy') is not None", "ok", "True", []string{"result"}, ""},
		{"display", "from IPython.display import display, HTML\ndisplay(HTML('<b>x</b>'))", "ok", "IPython.core.display.HTML object", []string{"display"}, ""},
		{"ordering", "import sys\nprint('a')\nsys.stdout.flush()\nprint('b', file=sys.stderr)\nsys.stderr.flush()\nprint('c')\n7", "ok", "a\nb\nc\n7\n", []string{"stdout", "stderr", "stdout", "result"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var streamed []string
			res, err := k.Execute(t.Context(), tc.code, ExecOptions{OnOutput: func(o Output) { streamed = append(streamed, o.Kind) }})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tc.status {
				t.Errorf("status = %q, want %q (text %q)", res.Status, tc.status, res.Text)
			}
			if !strings.Contains(res.Text, tc.text) {
				t.Errorf("text = %q, want it to contain %q", res.Text, tc.text)
			}
			if strings.Contains(res.Text, "\x1b[") {
				t.Errorf("text has ANSI escapes: %q", res.Text)
			}
			var kinds []string
			for _, o := range res.Outputs {
				kinds = append(kinds, o.Kind)
			}
			if strings.Join(kinds, ",") != strings.Join(tc.kinds, ",") {
				t.Errorf("output kinds = %v, want %v", kinds, tc.kinds)
			}
			if strings.Join(streamed, ",") != strings.Join(kinds, ",") {
				t.Errorf("streamed kinds = %v, outputs %v", streamed, kinds)
			}
			if tc.errName != "" && (res.Error == nil || res.Error.Name != tc.errName) {
				t.Errorf("error = %+v, want %s", res.Error, tc.errName)
			}
			if res.ExecutionCount == 0 {
				t.Errorf("execution count 0")
			}
		})
	}
}

// Cells are filtered by parent: a cell's result never contains output of a background task
// printing on behalf of an earlier cell... but prints inside the same cell all arrive.
func TestExecuteParentFiltering(t *testing.T) {
	k := startKernel(t, Options{})
	mustOK(t, k, "x = 0\nfor i in range(200): print(i)")
	res := mustOK(t, k, "'second'")
	if res.Text != "'second'\n" {
		t.Errorf("second cell text = %q", res.Text)
	}
	// History is in memory only, but the usual names still work.
	mustOK(t, k, "40+2")
	if res := mustOK(t, k, "(_, In[-2], Out[len(In)-2])"); res.Text != "(42, '40+2', 42)\n" {
		t.Errorf("history names: %q", res.Text)
	}
}

func TestExecuteCancelInterrupts(t *testing.T) {
	k := startKernel(t, Options{})
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		time.Sleep(300 * time.Millisecond)
		cancel()
	}()
	if _, err := k.Execute(ctx, "import time\ntime.sleep(60)", ExecOptions{}); err == nil {
		t.Fatal("Execute with a cancelled context returned no error")
	}
	// The interrupted cell frees the kernel for the next one.
	res := mustOK(t, k, "'free'")
	if !strings.Contains(res.Text, "free") {
		t.Errorf("text = %q", res.Text)
	}
}

// A 100 MB output streams through OnOutput in full while the Result keeps a bounded head and
// tail, so a runaway cell cannot exhaust the daemon's memory.
func TestExecuteLargeOutputBounded(t *testing.T) {
	k := startKernel(t, Options{})
	const mb = 100
	seen := 0
	res, err := k.Execute(t.Context(),
		"import sys\nchunk = 'y' * (1 << 20)\nsys.stdout.write('HEAD')\nfor i in range("+itoa(mb)+"):\n    sys.stdout.write(chunk)\n_ = sys.stdout.write('TAIL')",
		ExecOptions{MaxOutput: 1 << 20, OnOutput: func(o Output) { seen += len(o.Text) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusOK {
		t.Fatalf("status %s", res.Status)
	}
	if want := mb<<20 + 8; seen != want {
		t.Errorf("OnOutput saw %d bytes, want %d", seen, want)
	}
	if len(res.Text) > 1<<20+200 {
		t.Errorf("Result.Text is %d bytes, want about 1 MB", len(res.Text))
	}
	if !strings.HasPrefix(res.Text, "HEADyyy") || !strings.HasSuffix(res.Text, "yyyTAIL") || !strings.Contains(res.Text, "bytes of output omitted") {
		t.Errorf("bounded text: head %q … tail %q", res.Text[:20], res.Text[len(res.Text)-20:])
	}
}

func TestExecuteOutputBoundTable(t *testing.T) {
	tests := []struct {
		name   string
		max    int
		chunks []string
		want   string
	}{
		{"under", 100, []string{"ab", "cd"}, "abcd"},
		{"unbounded", -1, []string{"abcdef", "ghij"}, "abcdefghij"},
		{"split", 8, []string{"abcdef", "ghijkl"}, "abcd\n[… 4 bytes of output omitted: over Arbor's in-memory bound of 8 bytes …]\nijkl"},
		{"many chunks", 4, []string{"ab", "cd", "ef", "gh", "ij"}, "ab\n[… 6 bytes of output omitted: over Arbor's in-memory bound of 4 bytes …]\nij"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &execState{res: &Result{}, max: tc.max}
			for _, c := range tc.chunks {
				s.emit(Output{Kind: KindStdout, Text: c})
			}
			if got := s.fullText(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
