package refine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// Extraction errors. The message says what the reply held instead.
var (
	ErrNoJSON  = errors.New("the reply has no JSON object")
	ErrBadJSON = errors.New("the reply's JSON does not decode")
)

// shape is what a candidate holds once it decodes.
type shape int

const (
	shapeNone   shape = iota
	shapeReply        // {"edits": [...], ...}
	shapeEdit         // one edit object, {"op": ..., ...}
	shapeArray        // [edit, ...]
	shapeOther        // valid JSON of another shape
	shapeBroken       // not valid JSON
)

// extract finds the reply's JSON: the first candidate that decodes to one of the accepted
// shapes, trying the contents of ```json fences first, then the whole reply. A candidate is a
// balanced {…} or […] (strings and escapes respected), so prose with brackets around the JSON
// is passed over. An empty array counts only when it is all a fence or the reply holds.
func extract(reply string) (json.RawMessage, shape, error) {
	trimmed := strings.TrimSpace(reply)
	if trimmed == "" {
		return nil, shapeNone, fmt.Errorf("%w: the reply is empty", ErrNoJSON)
	}
	var firstBroken, firstOther string
	var brokenErr error
	try := func(text, whole string) (json.RawMessage, shape) {
		for _, c := range regions(text) {
			sh, err := classify(c, strings.TrimSpace(whole) == c)
			switch sh {
			case shapeReply, shapeEdit, shapeArray:
				return json.RawMessage(c), sh
			case shapeBroken:
				if brokenErr == nil {
					firstBroken, brokenErr = c, err
				}
			case shapeOther:
				if firstOther == "" {
					firstOther = c
				}
			}
		}
		return nil, shapeNone
	}
	for _, f := range jsonFences(reply) {
		if raw, sh := try(f, f); raw != nil {
			return raw, sh, nil
		}
	}
	if raw, sh := try(reply, reply); raw != nil {
		return raw, sh, nil
	}
	switch {
	case brokenErr != nil:
		return nil, shapeNone, fmt.Errorf("%w: %v; the JSON begins with %s", ErrBadJSON, brokenErr, quoteHead(firstBroken))
	case firstOther != "":
		return nil, shapeNone, fmt.Errorf("%w: found %s, which is not an object with \"edits\" nor an array of edits", ErrNoJSON, describe(firstOther))
	}
	return nil, shapeNone, fmt.Errorf("%w: it begins with %s", ErrNoJSON, quoteHead(trimmed))
}

// classify decodes one candidate far enough to know its shape.
func classify(c string, whole bool) (shape, error) {
	d := json.NewDecoder(strings.NewReader(c))
	var v json.RawMessage
	if err := d.Decode(&v); err != nil {
		return shapeBroken, syntaxDetail(c, err)
	}
	switch c[0] {
	case '{':
		var m map[string]json.RawMessage
		if json.Unmarshal(v, &m) != nil {
			return shapeOther, nil
		}
		for k := range m {
			switch normKey(k) {
			case "edits":
				return shapeReply, nil
			case "op", "operation":
				return shapeEdit, nil
			}
		}
	case '[':
		var a []json.RawMessage
		if json.Unmarshal(v, &a) != nil || (len(a) == 0 && !whole) {
			return shapeOther, nil
		}
		for _, e := range a {
			if e := bytes.TrimSpace(e); len(e) == 0 || e[0] != '{' {
				return shapeOther, nil
			}
		}
		return shapeArray, nil
	}
	return shapeOther, nil
}

// syntaxDetail says where the JSON broke, in words a repair request can quote.
func syntaxDetail(c string, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		at := min(max(int(se.Offset)-1, 0), len(c))
		return fmt.Errorf("%v at byte %d, near %s", se, se.Offset, quoteHead(c[at:]))
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("it is cut off: a { or [ is never closed")
	}
	return err
}

// maxCandidates bounds the spans tried in one text: prose citing "[seq 12]" a few times is
// passed over, and a reply of a million "{}" costs no more than a few hundred decodes.
const maxCandidates = 256

// regions lists the reply's top-level balanced {…} and […] spans, in order, at most
// maxCandidates. A span that is never closed runs to the end (and then fails to decode, saying
// so). After a span the scan goes on from its end, so the work is linear in the reply.
func regions(s string) []string {
	var out []string
	for i := 0; i < len(s) && len(out) < maxCandidates; {
		if s[i] != '{' && s[i] != '[' {
			i++
			continue
		}
		end := balancedEnd(s, i)
		out = append(out, s[i:end])
		i = end
	}
	return out
}

// balancedEnd returns the index just after the bracket that closes the one at s[start], the
// index after a mismatched closer, or len(s).
func balancedEnd(s string, start int) int {
	var stack []byte
	inString, escaped := false, false
	for i := start; i < len(s); i++ {
		c := s[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{':
			stack = append(stack, '}')
		case '[':
			stack = append(stack, ']')
		case '}', ']':
			if len(stack) == 0 || stack[len(stack)-1] != c {
				return i + 1
			}
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return i + 1
			}
		}
	}
	return len(s)
}

// jsonFences returns the contents of the reply's ```json fenced blocks (a fence left open runs
// to the end).
func jsonFences(s string) []string {
	var out []string
	lines := strings.SplitAfter(s, "\n")
	for i := 0; i < len(lines); i++ {
		open, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), "```")
		if !ok || !strings.HasPrefix(strings.ToLower(strings.TrimSpace(open)), "json") {
			continue
		}
		var b strings.Builder
		for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
			b.WriteString(lines[i])
		}
		out = append(out, b.String())
	}
	return out
}

// quoteHead quotes the start of s for an error message.
func quoteHead(s string) string {
	const n = 80
	if len(s) > n {
		return fmt.Sprintf("%q…", validPrefix(s[:n]))
	}
	return fmt.Sprintf("%q", s)
}

// describe names a JSON value's shape: "an object with keys a, b", "an array of 3 numbers".
func describe(c string) string {
	var v any
	_ = json.Unmarshal([]byte(c), &v)
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if len(keys) == 0 {
			return "an empty object"
		}
		return "an object with keys " + strings.Join(keys, ", ")
	case []any:
		if len(v) == 0 {
			return "an empty array inside prose"
		}
		k := kindName(v[0])
		if len(v) == 1 {
			k = strings.TrimSuffix(k, "s")
		}
		return fmt.Sprintf("an array of %d %s", len(v), k)
	case string:
		return "the string " + quoteHead(v)
	case float64:
		return "the number " + validPrefix(c[:min(len(c), 40)])
	case bool:
		return "the boolean " + c
	case nil:
		return "null"
	}
	return quoteHead(c)
}

func kindName(v any) string {
	switch v.(type) {
	case string:
		return "strings"
	case float64:
		return "numbers"
	case []any:
		return "arrays"
	case bool:
		return "booleans"
	case nil:
		return "nulls"
	}
	return "values"
}

// normKey folds the spellings a model uses for one field: "intended_effect", "intendedEffect"
// and "Intended-Effect" are all "intendedeffect".
func normKey(k string) string {
	var b strings.Builder
	for _, r := range k {
		switch {
		case r == '_' || r == '-' || r == ' ':
		case r < utf8.RuneSelf && 'A' <= r && r <= 'Z':
			b.WriteRune(r + 'a' - 'A')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
