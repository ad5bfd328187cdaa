package model

import (
	"strings"
	"testing"
)

func TestParseFenced(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, wantText string
		wantCode           []string
	}{
		{"no block", "just words", "just words", nil},
		{"one block", "Let me look.\n```python\nprint(1)\n```\n", "Let me look.", []string{"print(1)"}},
		{"two blocks with prose between", "a\n```python\nx = 1\n```\nthen\n```py\nprint(x)\n```\nend", "a\n\nthen\n\nend", []string{"x = 1", "print(x)"}},
		{"other language stays text", "```bash\nls\n```", "```bash\nls\n```", nil},
		{"backticks inside code", "```python\ns = '```'\nprint(s)\n```", "", []string{"s = '```'\nprint(s)"}},
		{"indented fence and CRLF", "  ```python\r\nprint(2)\r\n  ```\r\n", "", []string{"print(2)"}},
		{"empty block dropped", "```python\n\n```\nok", "ok", nil},
		{"unclosed block stays text", "```python\nprint(1)\n", "```python\nprint(1)\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			text, calls := parseFenced(tt.in)
			if text != tt.wantText {
				t.Errorf("text = %q; want %q", text, tt.wantText)
			}
			var codes []string
			for _, c := range calls {
				if !strings.HasPrefix(c.ID, "call_fenced_") {
					t.Errorf("ID = %q; want a synthesized call_fenced_ id", c.ID)
				}
				codes = append(codes, c.Code)
			}
			if strings.Join(codes, "\x00") != strings.Join(tt.wantCode, "\x00") {
				t.Errorf("code = %q; want %q", codes, tt.wantCode)
			}
		})
	}
}

// FuzzFenced checks that rendering calls and parsing them back is lossless
// for any code and prose without fences of their own (an unclosed fence in
// the prose would swallow the rendered block: that ambiguity is inherent).
func FuzzFenced(f *testing.F) {
	f.Add("prose", "print(1)")
	f.Add("", "s = '```'")
	f.Add("a\n```python\nx\n```", "for i in range(3):\n    print(i)\n")
	f.Fuzz(func(t *testing.T, prose, code string) {
		text, calls := parseFenced(prose) // must not panic on anything
		_ = text
		code = strings.TrimRight(code, "\r\n")
		if len(calls) > 0 || strings.Contains(prose, "```") || strings.TrimSpace(code) == "" || strings.Contains(code, "```") || strings.Contains(code, "\r") {
			return
		}
		_, back := parseFenced(renderFenced(prose, []ToolCall{{Code: code}}))
		if len(back) != 1 || back[0].Code != code {
			t.Fatalf("round trip of %q gave %+v", code, back)
		}
	})
}
