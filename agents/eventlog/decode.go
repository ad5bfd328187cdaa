package eventlog

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// decodeFast decodes the exact shape appendLine writes without going through encoding/json's
// reflection, which makes recovery several times faster. It reports false for anything else
// (escapes in strings, other field orders, unknown fields, whitespace), and decodeJSON then
// decides with encoding/json. When it reports true it agrees with json.Unmarshal; the fuzz target
// checks that. The returned Data aliases js.
func decodeFast(js []byte, types typeNames) (Record, bool) {
	var r Record
	rest, ok := bytes.CutPrefix(js, []byte(`{"seq":`))
	if !ok {
		return r, false
	}
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		if n == 19 || r.Seq > (1<<64-1-9)/10 { // keep clear of overflow; json handles the rest
			return r, false
		}
		r.Seq = r.Seq*10 + uint64(rest[n]-'0')
		n++
	}
	if n == 0 || n > 1 && rest[0] == '0' {
		return r, false
	}
	if rest, ok = bytes.CutPrefix(rest[n:], []byte(`,"ts":"`)); !ok {
		return r, false
	}
	ts, rest, ok := cutPlainString(rest)
	if !ok || r.TS.UnmarshalText(ts) != nil {
		return r, false
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"type":"`)); !ok {
		return r, false
	}
	typ, rest, ok := cutPlainString(rest)
	if !ok {
		return r, false
	}
	r.Type = types.get(typ)
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"data":`)); !ok {
		return r, false
	}
	data, ok := bytes.CutSuffix(rest, []byte("}"))
	if !ok || len(data) == 0 || isSpace(data[0]) || isSpace(data[len(data)-1]) || !json.Valid(data) {
		return r, false
	}
	r.Data = data // aliases js: scan copies it only for callers that keep records
	return r, true
}

// cutPlainString returns the bytes up to the closing quote of a JSON string that needs no
// unescaping, and what follows the quote.
func cutPlainString(b []byte) (s, rest []byte, ok bool) {
	for i, c := range b {
		switch {
		case c == '"':
			return b[:i], b[i+1:], utf8.Valid(b[:i])
		case c == '\\' || c < 0x20:
			return nil, nil, false
		}
	}
	return nil, nil, false
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// typeNames shares the strings of event types within one scan: a log has a few dozen types and
// up to millions of records, and a string per record was half of what recovery allocated.
type typeNames map[string]string

func (m typeNames) get(b []byte) string {
	if s, ok := m[string(b)]; ok {
		return s
	}
	s := string(b)
	if m != nil && len(m) < 1024 {
		m[s] = s
	}
	return s
}
