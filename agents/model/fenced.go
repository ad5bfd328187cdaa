package model

import (
	"crypto/rand"
	"encoding/hex"
	"regexp"
	"strings"
)

// fenceRE finds ```python (or ```py) blocks. The closing fence must start a
// line, so backticks inside the code do not end the block early.
var fenceRE = regexp.MustCompile("(?ms)^[ \t]*```(?:python|py|python3)[ \t]*\r?\n(.*?)^[ \t]*```[ \t]*\r?$")

// parseFenced splits reply text into prose and the python blocks it holds.
// The returned text has the blocks removed; each block becomes a tool call
// with a synthesized ID.
func parseFenced(text string) (string, []ToolCall) {
	locs := fenceRE.FindAllStringSubmatchIndex(text, -1)
	if len(locs) == 0 {
		return text, nil
	}
	var prose strings.Builder
	var calls []ToolCall
	prev := 0
	for _, loc := range locs {
		prose.WriteString(text[prev:loc[0]])
		code := strings.TrimRight(text[loc[2]:loc[3]], "\r\n")
		if strings.TrimSpace(code) != "" {
			calls = append(calls, ToolCall{ID: newCallID("call_fenced_"), Code: code})
		}
		prev = loc[1]
	}
	prose.WriteString(text[prev:])
	return collapseBlankLines(prose.String()), calls
}

// renderFenced is the inverse of parseFenced, for assistant messages that go
// back to the model: the prose, then each call as a block.
func renderFenced(text string, calls []ToolCall) string {
	var b strings.Builder
	b.WriteString(text)
	for _, tc := range calls {
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString("```python\n")
		b.WriteString(strings.TrimRight(tc.Code, "\n"))
		b.WriteString("\n```")
	}
	return b.String()
}

func collapseBlankLines(s string) string {
	for strings.Contains(s, "\n\n\n") {
		s = strings.ReplaceAll(s, "\n\n\n", "\n\n")
	}
	return strings.TrimSpace(s)
}

// newCallID synthesizes a tool call ID where the model gave none.
func newCallID(prefix string) string {
	var b [8]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
