package acp

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/arborhq/arbor/jsonlimit"
)

// FuzzLineGuard feeds arbitrary client input through the guard: what it passes on is exactly
// the input's lines that are within the depth limit, in order; every other line gets one
// well-formed parse error.
func FuzzLineGuard(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}` + "\n",
		strings.Repeat("[", 1001) + "\n" + `{"id":2}` + "\n",
		`{"id":3,"params":` + strings.Repeat(`{"a":`, 1001) + "\n",
		`{"id":4,"params":"` + strings.Repeat(`[\"`, 1001) + `"}` + "\n",
		"no newline at the end",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var out bytes.Buffer
		g := newLineGuard(bytes.NewReader(data), &out, slog.New(slog.DiscardHandler))
		passed, err := io.ReadAll(g)
		if err != nil {
			t.Fatalf("ReadAll: %v", err)
		}
		var want []byte
		refused := 0
		for _, line := range bytes.SplitAfter(data, []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			if jsonlimit.Check(line, jsonlimit.MaxDepth) != nil {
				refused++
				continue
			}
			want = append(want, line...)
		}
		if !bytes.Equal(passed, want) {
			t.Fatalf("passed on %q, want %q", passed, want)
		}
		dec := json.NewDecoder(&out)
		for range refused {
			var r struct {
				ID    json.RawMessage `json:"id"`
				Error struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := dec.Decode(&r); err != nil || r.Error.Code != -32700 || !strings.Contains(r.Error.Message, "exceeds the limit") {
				t.Fatalf("refusal %+v: %v", r, err)
			}
		}
		if dec.More() {
			t.Fatalf("more replies than refused lines")
		}
	})
}
