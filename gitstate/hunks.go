package gitstate

import (
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/utils/diff"
	"github.com/sergi/go-diff/diffmatchpatch"
)

const contextLines = 3

const noEOL = `\ No newline at end of file`

type lineOp struct {
	kind byte   // ' ', '-' or '+'
	text string // without its newline
	eol  bool   // the line ends with a newline
}

// hunks computes a line diff of two texts as unified hunks with three lines of context.
func hunks(old, cur string) ([]Hunk, int, int) {
	var ops []lineOp
	adds, dels := 0, 0
	for _, d := range diff.Do(old, cur) {
		kind := byte(' ')
		switch d.Type {
		case diffmatchpatch.DiffInsert:
			kind = '+'
		case diffmatchpatch.DiffDelete:
			kind = '-'
		}
		for text := d.Text; text != ""; {
			line, rest, eol := strings.Cut(text, "\n")
			ops = append(ops, lineOp{kind, line, eol})
			text = rest
			switch kind {
			case '+':
				adds++
			case '-':
				dels++
			}
		}
	}
	oldLines := strings.Split(old, "\n")
	var out []Hunk
	oldNo, newNo := make([]int, len(ops)+1), make([]int, len(ops)+1) // lines before op i
	for i, op := range ops {
		oldNo[i+1], newNo[i+1] = oldNo[i], newNo[i]
		if op.kind != '+' {
			oldNo[i+1]++
		}
		if op.kind != '-' {
			newNo[i+1]++
		}
	}
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(0, i-contextLines)
		end := i // one past the last change of this hunk
		for j := i; j < len(ops); j++ {
			if ops[j].kind != ' ' {
				end = j + 1
			} else if j-end >= 2*contextLines {
				break
			}
		}
		stop := min(len(ops), end+contextLines)
		h := Hunk{OldStart: oldNo[start] + 1, OldLines: oldNo[stop] - oldNo[start],
			NewStart: newNo[start] + 1, NewLines: newNo[stop] - newNo[start]}
		if h.OldLines == 0 {
			h.OldStart--
		}
		if h.NewLines == 0 {
			h.NewStart--
		}
		for _, op := range ops[start:stop] {
			h.Lines = append(h.Lines, string(op.kind)+op.text)
			if !op.eol {
				h.Lines = append(h.Lines, noEOL)
			}
		}
		h.Header = fmt.Sprintf("@@ -%s +%s @@", rangeOf(h.OldStart, h.OldLines), rangeOf(h.NewStart, h.NewLines))
		if fn := funcContext(oldLines, oldNo[start]); fn != "" {
			h.Header += " " + fn
		}
		out = append(out, h)
		i = stop
	}
	return out, adds, dels
}

func rangeOf(start, n int) string {
	if n == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, n)
}

// funcContext finds git's default hunk-header context: the nearest line above the hunk that
// starts with a letter, '_' or '$'.
func funcContext(lines []string, before int) string {
	for i := min(before, len(lines)) - 1; i >= 0; i-- {
		l := lines[i]
		if l == "" {
			continue
		}
		if c := l[0]; c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			l = strings.TrimRight(l, " \t\r")
			if len(l) > 80 {
				l = l[:80]
			}
			return l
		}
	}
	return ""
}
