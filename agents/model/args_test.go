package model

import "testing"

func TestCodeFromArgs(t *testing.T) {
	t.Parallel()
	tests := []struct{ args, want string }{
		{`{"code": "print(1)"}`, "print(1)"},
		{`{"code": "a\nb", "timeout": 5}`, "a\nb"},
		{`{"source": "x = 2"}`, "x = 2"},
		{`"print(4)"`, "print(4)"},
		{`print(5)`, "print(5)"},
		{`{"a": "1", "b": "2"}`, `{"a": "1", "b": "2"}`},
		{`{"code": 7}`, `{"code": 7}`},
		{`{"code": "print(`, `{"code": "print(`}, // truncated (finish_reason length): the kernel reports it
		{``, ``},
	}
	for _, tt := range tests {
		if got := codeFromArgs(tt.args); got != tt.want {
			t.Errorf("codeFromArgs(%q) = %q; want %q", tt.args, got, tt.want)
		}
	}
}
