package jsonlimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		limit  int
		depth  int   // the DepthError's Depth; 0 when Check passes
		offset int64 // its Offset
	}{
		{name: "scalar", in: `42`, limit: 1},
		{name: "at the limit", in: `[[{"a":[]}]]`, limit: 4},
		{name: "one past the limit", in: `[[{"a":[]}]]`, limit: 3, depth: 4, offset: 7},
		{name: "siblings do not add up", in: `[[],[],{},{"a":[]}]`, limit: 3},
		{name: "brackets in strings", in: `["[[[[{{{{", "]]\"[[[["]`, limit: 1},
		{name: "escaped backslash ends the escape", in: `["\\", [[]]]`, limit: 2, depth: 3, offset: 8},
		{name: "three million arrays", in: strings.Repeat("[", 3_000_000), limit: MaxDepth, depth: MaxDepth + 1, offset: MaxDepth},
		{name: "nested objects", in: strings.Repeat(`{"a":`, 10), limit: 5, depth: 6, offset: 25},
		{name: "stray closers are no credit", in: `]]]]][[`, limit: 1, depth: 2, offset: 6},
		{name: "zero limit refuses any container", in: `{}`, limit: 0, depth: 1, offset: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check([]byte(tt.in), tt.limit)
			var de *DepthError
			switch {
			case tt.depth == 0 && err != nil:
				t.Fatalf("Check = %v, want nil", err)
			case tt.depth == 0:
			case !errors.As(err, &de):
				t.Fatalf("Check = %v, want a *DepthError", err)
			case de.Depth != tt.depth || de.Limit != tt.limit || de.Offset != tt.offset:
				t.Errorf("Check = %+v, want depth %d at byte %d over limit %d", de, tt.depth, tt.offset, tt.limit)
			}
		})
	}
}

func TestDepthErrorSaysWhatWasWrong(t *testing.T) {
	err := Check([]byte(strings.Repeat("[", 5000)), MaxDepth)
	want := "JSON nesting depth 1001 at byte 1000 exceeds the limit of 1000"
	if err == nil || err.Error() != want {
		t.Errorf("Check = %v, want %q", err, want)
	}
}

// The Scanner fed piece by piece agrees with Check on the whole, stops once the limit is
// passed, and starts afresh after Reset.
func TestScannerPieces(t *testing.T) {
	in := []byte(`{"a":"[\"]","b":[[` + strings.Repeat("[", 20))
	whole := Check(in, 10)
	for size := 1; size <= len(in); size++ {
		s := NewScanner(10)
		var err error
		for off := 0; off < len(in) && err == nil; off += size {
			_, err = s.Write(in[off:min(off+size, len(in))])
		}
		if err == nil || err.Error() != whole.Error() {
			t.Fatalf("pieces of %d: %v, want %v", size, err, whole)
		}
		if _, again := s.Write([]byte("1")); again != err {
			t.Fatalf("pieces of %d: a write after the error = %v, want the same error", size, again)
		}
		s.Reset()
		if _, err := s.Write([]byte("[[]]")); err != nil {
			t.Fatalf("after Reset: %v", err)
		}
	}
}

// depthOf is a reference: the nesting of valid JSON by encoding/json's token stream (which
// stops at its own limit of 10,000).
func depthOf(data []byte) (int, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	depth, most := 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return most, nil
		}
		if err != nil {
			return 0, err
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			depth++
			most = max(most, depth)
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
	}
}

// FuzzCheck holds Check to the decoder's own view of valid JSON's nesting, and to itself when
// the same bytes arrive in two pieces.
func FuzzCheck(f *testing.F) {
	for _, seed := range []string{
		`[]`, `{"a":[1,{"b":"]]"}]}`, `"\\"`, `["\"[",[[]]]`,
		strings.Repeat("[", 1001), strings.Repeat("[", 1000) + strings.Repeat("]", 1000),
		strings.Repeat(`{"a":`, 1001), strings.Repeat(`[{"a":`, 600) + "1" + strings.Repeat("}]", 600),
	} {
		f.Add([]byte(seed), 3)
	}
	f.Fuzz(func(t *testing.T, data []byte, split int) {
		for _, limit := range []int{0, 3, MaxDepth} {
			err := Check(data, limit)
			if err != nil && !errors.As(err, new(*DepthError)) {
				t.Fatalf("Check = %v, not a *DepthError", err)
			}
			if json.Valid(data) {
				if depth, rerr := depthOf(data); rerr == nil && (depth > limit) != (err != nil) {
					t.Fatalf("nesting %d, limit %d: Check = %v", depth, limit, err)
				}
			}
			if len(data) > 0 {
				at := (split%len(data) + len(data)) % len(data)
				s := NewScanner(limit)
				_, e := s.Write(data[:at])
				if e == nil {
					_, e = s.Write(data[at:])
				}
				if (e == nil) != (err == nil) || e != nil && e.Error() != err.Error() {
					t.Fatalf("in two pieces split at %d: %v, whole: %v", at, e, err)
				}
			}
		}
	})
}
