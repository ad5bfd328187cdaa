package kernel

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestDecodeVerifies(t *testing.T) {
	s := signer{key: []byte("secret")}
	good, err := s.encode(newHeader("sess", "execute_request"), map[string]string{"code": "1"})
	if err != nil {
		t.Fatal(err)
	}
	tamper := func(f func(fr [][]byte) [][]byte) [][]byte {
		cp := make([][]byte, len(good))
		for i := range good {
			cp[i] = append([]byte(nil), good[i]...)
		}
		return f(cp)
	}
	tests := []struct {
		name   string
		frames [][]byte
		err    string
	}{
		{"good", good, ""},
		{"with identity and topic", append([][]byte{[]byte("kernel.abc.stream")}, good...), ""},
		{"bad signature", tamper(func(f [][]byte) [][]byte { f[1][0] ^= 1; return f }), "signature"},
		{"content changed", tamper(func(f [][]byte) [][]byte { f[5] = []byte(`{"code":"2"}`); return f }), "signature"},
		{"no delimiter", good[1:], "delimiter"},
		{"too few frames", good[:4], "frames"},
		{"other key", func() [][]byte { f, _ := signer{key: []byte("x")}.encode(newHeader("s", "t"), 1); return f }(), "signature"},
		{"content nested too deeply", func() [][]byte {
			f, _ := s.encode(newHeader("sess", "execute_request"), json.RawMessage(strings.Repeat("[", 1001)+strings.Repeat("]", 1001)))
			return f
		}(), "content: JSON nesting depth 1001 at byte 1000 exceeds the limit of 1000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := s.decode(tc.frames)
			if tc.err == "" {
				if err != nil || m.Header.MsgType != "execute_request" {
					t.Fatalf("decode = %+v, %v", m, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("decode err = %v, want %q", err, tc.err)
			}
			if tc.err == "signature" && !errors.Is(err, errBadSignature) {
				t.Errorf("not errBadSignature: %v", err)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	s := signer{key: []byte("k")}
	good, _ := s.encode(newHeader("s", "status"), map[string]string{"execution_state": "idle"})
	f.Add(strings.Join(bytesToStrings(good), "\x00"))
	f.Add("<IDS|MSG>\x00x\x00{}\x00{}\x00{}\x00{}")
	f.Add("<IDS|MSG>\x00x\x00" + strings.Repeat("[", 1001) + "\x00{}\x00{}\x00" + strings.Repeat(`{"a":`, 1001))
	f.Fuzz(func(t *testing.T, joined string) {
		var frames [][]byte
		for _, p := range strings.Split(joined, "\x00") {
			frames = append(frames, []byte(p))
		}
		m, err := s.decode(frames)
		if err == nil && (m.Header.MsgID == "" || m.Header.MsgType == "") {
			t.Fatalf("accepted a message without id or type: %+v", m)
		}
	})
}

func bytesToStrings(bs [][]byte) []string {
	var out []string
	for _, b := range bs {
		out = append(out, string(b))
	}
	return out
}

func TestDecodeStream(t *testing.T) {
	for _, c := range []string{
		`{"name": "stdout", "text": "hello\n"}`,
		`{"text": "a\"b\\c\/\t\u00e9\ud83d\ude00 \ud800 x", "name": "stderr"}`,
		`{"name":"stdout","text":""}`,
		`{"name": "stdout", "text": "snow ☃"}`,
		`{"name": "stdout", "text": "x", "extra": 1}`,
	} {
		n, txt, err := decodeStream([]byte(c))
		var want struct{ Name, Text string }
		if jerr := json.Unmarshal([]byte(c), &want); jerr != nil || err != nil {
			t.Fatalf("%s: %v %v", c, err, jerr)
		}
		if n != want.Name || txt != want.Text {
			t.Errorf("%s: got %q %q want %q %q", c, n, txt, want.Name, want.Text)
		}
	}
}

// FuzzFastStream checks the fast stream decoder against encoding/json: whenever it accepts an
// input, it must agree exactly.
func FuzzFastStream(f *testing.F) {
	for _, s := range []string{`{"name": "stdout", "text": "hi\n"}`, `{"text":"\u00e9\ud83d\ude00","name":"x"}`, `{"name":"a","text":"\ud800"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, txt, ok := fastStream([]byte(s))
		if !ok {
			return
		}
		var want struct {
			Name *string `json:"name"`
			Text *string `json:"text"`
		}
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			t.Fatalf("fast path accepted invalid JSON %q: %v", s, err)
		}
		if want.Name == nil || want.Text == nil || *want.Name != n || *want.Text != txt {
			t.Fatalf("%q: fast %q %q, json %v %v", s, n, txt, want.Name, want.Text)
		}
	})
}
