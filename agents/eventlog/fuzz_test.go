package eventlog

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzParseLine feeds arbitrary lines to the line parser. It must never panic; the fast decoder
// must agree with encoding/json whenever it accepts; and whatever parses must survive a round
// trip through appendLine. Seeds are in testdata/fuzz/FuzzParseLine.
func FuzzParseLine(f *testing.F) {
	data, ends := fixture(3)
	f.Add(data[:ends[0]-1])
	raw := appendLineRaw([]byte(`{"seq":1,"ts":"2026-11-29T17:00:00Z","type":"a\u00e9\"b","data":{"x":[1,2,{"y":null}]}}`))
	f.Add(raw[:len(raw)-1])
	f.Fuzz(func(t *testing.T, line []byte) {
		rec, err := parseLine(line, nil)
		if js, cerr := checkCRC(line); cerr == nil {
			checkFastAgrees(t, js)
		}
		if err != nil {
			return
		}
		again, err := parseLine(bytes.TrimSuffix(appendLine(nil, rec), []byte("\n")), nil)
		if err != nil {
			t.Fatalf("re-encoded record does not parse: %v", err)
		}
		if again.Seq != rec.Seq || !again.TS.Equal(rec.TS) || again.Type != rec.Type || !jsonEqual(again.Data, rec.Data) {
			t.Fatalf("round trip changed %+v into %+v", rec, again)
		}
	})
}

// FuzzDecode checks the fast decoder against encoding/json on arbitrary JSON.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"seq":1,"ts":"2026-11-29T17:00:00.123456789Z","type":"user_message","data":{"text":"hi"}}`))
	f.Add([]byte(`{"seq":01,"ts":"2026-11-29T17:00:00Z","type":"x","data":1}`))
	f.Add([]byte(`{"seq":1,"ts":"2026-11-29T17:00:00Z","type":"x","data":1,"data":2}`))
	f.Fuzz(func(t *testing.T, js []byte) { checkFastAgrees(t, js) })
}

func checkFastAgrees(t *testing.T, js []byte) {
	t.Helper()
	fast, ok := decodeFast(js, nil)
	if !ok {
		return
	}
	var slow Record
	if err := json.Unmarshal(js, &slow); err != nil {
		t.Fatalf("fast decoder accepted %q, encoding/json says %v", js, err)
	}
	if fast.Seq != slow.Seq || !fast.TS.Equal(slow.TS) || fast.Type != slow.Type || !bytes.Equal(fast.Data, slow.Data) {
		t.Fatalf("fast decoder read %q as %+v, encoding/json as %+v", js, fast, slow)
	}
}

// FuzzScan scans arbitrary files. Whatever it accepts, cutting the file at ValidEnd must give a
// clean log with the same records: that is what Open and Repair rely on.
func FuzzScan(f *testing.F) {
	data, ends := fixture(4)
	f.Add(data)
	f.Add(data[:ends[2]+5])
	f.Add(append(bytes.Clone(data[:ends[1]]), data[ends[2]:]...))
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, res := scanBytes(t, b)
		if res.Torn && res.Corrupt || res.ValidEnd > res.Size || res.Size != int64(len(b)) || len(recs) != res.Records {
			t.Fatalf("inconsistent scan result %+v", res)
		}
		if !res.Torn && !res.Corrupt && res.ValidEnd != res.Size {
			t.Fatalf("clean scan stopped early: %+v", res)
		}
		again, res2 := scanBytes(t, b[:res.ValidEnd])
		if res2.Torn || res2.Corrupt || res2.Records != res.Records {
			t.Fatalf("valid prefix does not rescan clean: %+v", res2)
		}
		sameRecords(t, again, recs)
	})
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
