package eventlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"time"
)

// Record is one event. On disk it is the JSON object of these fields, in this order.
type Record struct {
	Seq  uint64          `json:"seq"`
	TS   time.Time       `json:"ts"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const hexDigits = "0123456789abcdef"

// appendLine appends the on-disk form of r to dst: JSON, TAB, CRC-32C as 8 lowercase hex, LF.
// r.Data must already be valid compact JSON.
func appendLine(dst []byte, r Record) []byte {
	start := len(dst)
	dst = append(dst, `{"seq":`...)
	dst = appendUint(dst, r.Seq)
	dst = append(dst, `,"ts":"`...)
	dst = r.TS.AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","type":`...)
	dst = appendJSONString(dst, r.Type)
	dst = append(dst, `,"data":`...)
	dst = append(dst, r.Data...)
	dst = append(dst, '}')
	sum := crc32.Checksum(dst[start:], castagnoli)
	dst = append(dst, '\t')
	for shift := 28; shift >= 0; shift -= 4 {
		dst = append(dst, hexDigits[(sum>>uint(shift))&0xf])
	}
	return append(dst, '\n')
}

func appendUint(dst []byte, v uint64) []byte {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return append(dst, b[i:]...)
}

// appendJSONString quotes s as encoding/json does, but without HTML escaping, so lines stay
// readable with grep.
func appendJSONString(dst []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return append(dst, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}

// marshalData encodes an Append payload as compact JSON without HTML escaping. json.RawMessage and
// []byte holding JSON pass through after validation and compaction.
func marshalData(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	switch x := v.(type) {
	case json.RawMessage:
		if err := json.Compact(&buf, x); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case nil:
		return json.RawMessage("null"), nil
	}
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Line problems. errTorn is what a crash can leave behind (a partial or garbled line whose CRC does
// not match); errInvalid is a line whose CRC matches but whose content is not a valid record, which
// no crash can produce.
var (
	errTorn    = errors.New("torn")
	errInvalid = errors.New("invalid")
)

// lineError says what is wrong with one line.
type lineError struct {
	kind   error // errTorn or errInvalid
	detail string
}

func (e *lineError) Error() string { return e.detail }
func (e *lineError) Unwrap() error { return e.kind }

func torn(format string, args ...any) error {
	return &lineError{kind: errTorn, detail: fmt.Sprintf(format, args...)}
}

func invalid(format string, args ...any) error {
	return &lineError{kind: errInvalid, detail: fmt.Sprintf(format, args...)}
}

// checkCRC splits a line (without its LF) into JSON and checksum and verifies the checksum.
func checkCRC(line []byte) (js []byte, err error) {
	i := bytes.LastIndexByte(line, '\t')
	if i < 0 {
		return nil, torn("no TAB before the checksum")
	}
	js, sum := line[:i], line[i+1:]
	if len(sum) != 8 {
		return nil, torn("checksum is %d characters, want 8", len(sum))
	}
	var want uint32
	for _, c := range sum {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		default:
			return nil, torn("checksum %q is not 8 lowercase hex digits", sum)
		}
		want = want<<4 | uint32(d)
	}
	if got := crc32.Checksum(js, castagnoli); got != want {
		return nil, torn("checksum mismatch: line says %08x, content has %08x", want, got)
	}
	return js, nil
}

// parseLine checks and decodes one line (without its LF). The returned Data may alias line.
func parseLine(line []byte, types typeNames) (Record, error) {
	js, err := checkCRC(line)
	if err != nil {
		return Record{}, err
	}
	return decodeJSON(js, types)
}

func decodeJSON(js []byte, types typeNames) (Record, error) {
	r, ok := decodeFast(js, types)
	if !ok {
		slow := new(Record) // its own variable, so that r does not escape on the fast path
		if err := json.Unmarshal(js, slow); err != nil {
			return Record{}, invalid("checksum matches but the JSON does not decode: %v", err)
		}
		r = *slow
	}
	switch {
	case r.Seq == 0:
		return Record{}, invalid("record has no seq")
	case r.TS.IsZero():
		return Record{}, invalid("record %d has no ts", r.Seq)
	case r.Type == "":
		return Record{}, invalid("record %d has no type", r.Seq)
	case len(r.Data) == 0:
		return Record{}, invalid("record %d has no data", r.Seq)
	}
	return r, nil
}
