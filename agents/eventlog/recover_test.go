package eventlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
)

// fixture returns a valid log of n records with varied sizes and the byte offset at which each
// line ends.
func fixture(n int) (data []byte, ends []int) {
	ts := time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC)
	types := []string{"user_message", "assistant_message", "tool_started", "tool_finished", "state_changed"}
	for i := 1; i <= n; i++ {
		d, _ := json.Marshal(map[string]any{"i": i, "text": strings.Repeat("x", i%37), "ok": i%2 == 0})
		data = appendLine(data, Record{Seq: uint64(i), TS: ts.Add(time.Duration(i) * 1234567 * time.Nanosecond), Type: types[i%len(types)], Data: d})
		ends = append(ends, len(data))
	}
	return data, ends
}

// completeLines is how many lines of the fixture lie wholly within its first off bytes.
func completeLines(ends []int, off int) int {
	n := 0
	for n < len(ends) && ends[n] <= off {
		n++
	}
	return n
}

func scanBytes(t *testing.T, b []byte) ([]Record, scanResult) {
	t.Helper()
	var recs []Record
	res, err := scan(bytes.NewReader(b), func(r Record) error {
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return recs, res
}

func sameRecords(t *testing.T, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Seq != w.Seq || !g.TS.Equal(w.TS) || g.Type != w.Type || !bytes.Equal(g.Data, w.Data) {
			t.Fatalf("record %d = %+v, want %+v", i, g, w)
		}
	}
}

// TestTruncateEveryOffset cuts a log at every byte offset and scans each cut in full, as Open and
// ReadFile do: the result is exactly the longest complete prefix, and the rest is a torn tail.
// ARBOR_SOAK=1 runs it on 1,000 records.
func TestTruncateEveryOffset(t *testing.T) {
	t.Parallel()
	n := 300
	switch {
	case os.Getenv("ARBOR_SOAK") == "1":
		n = 1000
	case raceEnabled:
		n = 150
	}
	data, ends := fixture(n)
	want, res := scanBytes(t, data)
	if res.Records != n || res.Torn || res.Corrupt {
		t.Fatalf("fixture scans as %+v", res)
	}
	var g errgroup.Group
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		g.Go(func() error {
			for off := w; off <= len(data); off += workers {
				if err := checkCut(data[:off], ends, want); err != nil {
					return fmt.Errorf("cut at byte %d: %w", off, err)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

func checkCut(b []byte, ends []int, want []Record) error {
	i := 0
	res, err := scan(bytes.NewReader(b), func(r Record) error {
		if w := want[i]; r.Seq != w.Seq || !r.TS.Equal(w.TS) || r.Type != w.Type || !bytes.Equal(r.Data, w.Data) {
			return fmt.Errorf("record %d = %+v, want %+v", i, r, w)
		}
		i++
		return nil
	})
	if err != nil {
		return err
	}
	k := completeLines(ends, len(b))
	atBoundary := prefixLen(ends, k) == len(b)
	if res.Records != k || res.Corrupt || res.Torn == atBoundary || res.ValidEnd != int64(prefixLen(ends, k)) {
		return fmt.Errorf("scan = %+v, want %d records, torn=%v", res, k, !atBoundary)
	}
	return nil
}

func prefixLen(ends []int, k int) int {
	if k == 0 {
		return 0
	}
	return ends[k-1]
}

// TestOpenTruncated runs the real Open on truncated copies: the torn bytes are copied aside, the
// file is cut to the longest complete prefix and appending continues from there.
func TestOpenTruncated(t *testing.T) {
	t.Parallel()
	data, ends := fixture(200)
	want, _ := scanBytes(t, data)
	var offsets []int
	for off := 0; off <= len(data); off += 211 {
		offsets = append(offsets, off)
	}
	for off := ends[len(ends)-2]; off <= len(data); off++ {
		offsets = append(offsets, off)
	}
	for _, off := range offsets {
		dir := t.TempDir()
		path := filepath.Join(dir, "events.jsonl")
		if err := os.WriteFile(path, data[:off], 0o600); err != nil {
			t.Fatal(err)
		}
		l, err := Open(path, Options{})
		if err != nil {
			t.Fatalf("offset %d: %v", off, err)
		}
		k := completeLines(ends, off)
		if l.LastSeq() != uint64(k) {
			t.Fatalf("offset %d: LastSeq %d, want %d", off, l.LastSeq(), k)
		}
		r, err := l.Append(t.Context(), "recovered", nil)
		if err != nil || r.Seq != uint64(k+1) {
			t.Fatalf("offset %d: Append = %+v, %v", off, r, err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		got, err := ReadFile(path)
		if err != nil {
			t.Fatalf("offset %d: %v", off, err)
		}
		sameRecords(t, got[:k], want[:k])
		aside, _ := filepath.Glob(path + ".torn-*")
		if tail := data[prefixLen(ends, k):off]; len(tail) == 0 {
			if len(aside) != 0 {
				t.Fatalf("offset %d: nothing torn but %v written", off, aside)
			}
		} else {
			if len(aside) != 1 {
				t.Fatalf("offset %d: torn copies %v, want one", off, aside)
			}
			if b, _ := os.ReadFile(aside[0]); !bytes.Equal(b, tail) {
				t.Fatalf("offset %d: torn copy holds %q, want %q", off, b, tail)
			}
			if fi, err := os.Stat(aside[0]); err != nil {
				t.Fatal(err)
			} else if fi.Mode().Perm() != 0o600 {
				t.Fatalf("offset %d: torn copy has mode %v, want 0600", off, fi.Mode().Perm())
			}
		}
		if temps, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*tmp*")); len(temps) != 0 {
			t.Fatalf("offset %d: temporary files left: %v", off, temps)
		}
	}
}

// TestBitFlips flips single bits at random: every flip is caught, either as a torn tail cut before
// the flipped byte or as corruption; no flipped byte is ever accepted.
func TestBitFlips(t *testing.T) {
	t.Parallel()
	data, _ := fixture(64)
	want, _ := scanBytes(t, data)
	rng := rand.New(rand.NewPCG(4, 9))
	var torn, corrupt int
	for i := range 10000 {
		b := bytes.Clone(data)
		pos := rng.IntN(len(b))
		b[pos] ^= 1 << rng.IntN(8)
		got, res := scanBytes(t, b)
		if res.ValidEnd > int64(pos) {
			t.Fatalf("flip %d at byte %d accepted: %+v", i, pos, res)
		}
		sameRecords(t, got, want[:res.Records])
		switch {
		case res.Corrupt:
			corrupt++
		case res.Torn:
			torn++
		default:
			t.Fatalf("flip %d at byte %d not detected: %+v", i, pos, res)
		}
		if i%500 == 0 {
			checkOpenFlipped(t, b, res)
		}
	}
	t.Logf("10000 flips: %d torn tails, %d quarantined", torn, corrupt)
}

// checkOpenFlipped runs Open on a damaged file: quarantine leaves it byte for byte, a torn tail is
// cut to the valid prefix.
func checkOpenFlipped(t *testing.T, b []byte, res scanResult) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := Open(path, Options{})
	if res.Corrupt {
		if !errors.Is(err, ErrQuarantined) {
			t.Fatalf("Open = %v, want ErrQuarantined", err)
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(after, b) {
			t.Fatal("Open modified a quarantined log")
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.LastSeq() != res.LastSeq {
		t.Fatalf("LastSeq %d, want %d", l.LastSeq(), res.LastSeq)
	}
	if fi, _ := os.Stat(path); fi.Size() != res.ValidEnd {
		t.Fatalf("size %d after Open, want %d", fi.Size(), res.ValidEnd)
	}
}

func TestDamage(t *testing.T) {
	t.Parallel()
	data, ends := fixture(10)
	line := func(i int) (int, int) { return prefixLen(ends, i-1), ends[i-1] } // 1-based
	s4, e4 := line(4)
	s10, e10 := line(10)
	rec := func(seq uint64) []byte {
		return appendLine(nil, Record{Seq: seq, TS: time.Unix(1, 0).UTC(), Type: "x", Data: json.RawMessage(`{}`)})
	}
	splice := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	flipCRC := bytes.Clone(data)
	flipCRC[e4-3] = 'g'
	badLast := bytes.Clone(data)
	badLast[e10-2] = "10"[badLast[e10-2]&1] // another hex digit
	upper := bytes.Clone(data)
	copy(upper[e10-9:], bytes.ToUpper(upper[e10-9:e10-1]))
	if bytes.Equal(upper, data) {
		t.Fatal("fixture: last checksum has no letter to uppercase")
	}
	flipJSON := bytes.Clone(data)
	flipJSON[s4+5] ^= 0x01
	tests := []struct {
		name       string
		b          []byte
		torn       bool
		corrupt    bool
		records    int
		badLine    int
		badOffset  int
		detailHint string
	}{
		{"clean", data, false, false, 10, 0, 0, ""},
		{"empty", nil, false, false, 0, 0, 0, ""},
		{"no newline", data[:len(data)-1], true, false, 9, 10, s10, "no newline"},
		{"half line", data[:s10+7], true, false, 9, 10, s10, ""},
		{"zeros after", splice(data, make([]byte, 4096)), true, false, 10, 11, len(data), ""},
		{"huge zero run after", splice(data, make([]byte, lineLimit+100)), true, false, 10, 11, len(data), "over the"},
		{"garbage lines after", splice(data, []byte("junk\n\nmore\tjunk\n")), true, false, 10, 11, len(data), ""},
		{"bad crc last", badLast, true, false, 9, 10, s10, "checksum mismatch"},
		{"bad crc middle", flipCRC, false, true, 3, 4, s4, "valid checksum"},
		{"flipped json middle", flipJSON, false, true, 3, 4, s4, "checksum mismatch"},
		{"seq gap", splice(data, rec(12)), false, true, 10, 11, len(data), "seq 12 where 11 belongs"},
		{"seq duplicate", splice(data, rec(10)), false, true, 10, 11, len(data), "seq 10 where 11 belongs"},
		{"first seq not 1", rec(2), false, true, 0, 1, 0, "seq 2 where 1 belongs"},
		{"valid crc bad json", splice(data, appendLineRaw([]byte(`{"seq":11,`))), false, true, 10, 11, len(data), "does not decode"},
		{"valid crc no type", splice(data, appendLineRaw([]byte(`{"seq":11,"ts":"2026-01-01T00:00:00Z","data":1}`))), false, true, 10, 11, len(data), "no type"},
		{"uppercase crc", upper, true, false, 9, 10, s10, "lowercase"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "events.jsonl")
			if err := os.WriteFile(path, tt.b, 0o600); err != nil {
				t.Fatal(err)
			}
			rep, err := Check(path)
			if err != nil {
				t.Fatal(err)
			}
			if rep.TornTail != tt.torn || rep.Corrupt != tt.corrupt || rep.Records != tt.records ||
				(!rep.OK() && rep.CorruptAt != int64(tt.badOffset)) || !strings.Contains(rep.Detail, tt.detailHint) {
				t.Fatalf("Check = %+v", rep)
			}
			_, rerr := ReadFile(path)
			l, err := Open(path, Options{})
			if tt.corrupt {
				want := fmt.Sprintf("line %d (byte %d)", tt.badLine, tt.badOffset)
				for _, err := range []error{err, rerr} {
					if !errors.Is(err, ErrQuarantined) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
						t.Fatalf("error = %v, want ErrQuarantined naming %s and %q", err, path, want)
					}
				}
				if after, _ := os.ReadFile(path); !bytes.Equal(after, tt.b) {
					t.Fatal("quarantined log was modified")
				}
				checkRepair(t, path, tt.b, tt.records, tt.badOffset)
				return
			}
			if err != nil || rerr != nil {
				t.Fatalf("Open = %v, ReadFile = %v", err, rerr)
			}
			defer l.Close()
			if l.LastSeq() != uint64(tt.records) {
				t.Fatalf("LastSeq = %d", l.LastSeq())
			}
		})
	}
}

func checkRepair(t *testing.T, path string, orig []byte, records, cut int) {
	t.Helper()
	rep, err := Repair(path)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Repaired || rep.Records != records || rep.Backup == "" || !strings.Contains(rep.Detail, rep.Backup) {
		t.Fatalf("Repair = %+v", rep)
	}
	if b, _ := os.ReadFile(rep.Backup); !bytes.Equal(b, orig) {
		t.Fatal("backup differs from the original")
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, orig[:cut]) {
		t.Fatalf("repaired log is %d bytes, want the %d-byte prefix", len(b), cut)
	}
	again, err := Repair(path)
	if err != nil || again.Repaired || !again.OK() {
		t.Fatalf("second Repair = %+v, %v", again, err)
	}
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
}

// appendLineRaw frames arbitrary bytes as a line with a correct checksum.
func appendLineRaw(js []byte) []byte {
	return fmt.Appendf(nil, "%s\t%08x\n", js, crc32.Checksum(js, castagnoli))
}

func TestCheckTree(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	data, ends := fixture(5)
	files := map[string][]byte{
		"a/events.jsonl":          data,
		"b/events.jsonl":          data[:ends[3]+4],
		"b/events.jsonl.torn-x":   []byte("junk"),
		"c/artifacts/other.jsonl": []byte("ignored"),
	}
	for name, b := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	reps, err := CheckTree(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 2 || !reps[0].OK() || reps[0].Records != 5 || !reps[1].TornTail || reps[1].Records != 4 {
		for _, r := range reps {
			t.Logf("%+v", r)
		}
		t.Fatal("unexpected reports")
	}
}

// TestDocExample keeps the line shown in the package doc honest.
func TestDocExample(t *testing.T) {
	t.Parallel()
	line := "{\"seq\":1,\"ts\":\"2026-11-29T17:00:00.123Z\",\"type\":\"user_message\",\"data\":{\"text\":\"hi\"}}\tb0ddac96"
	r, err := parseLine([]byte(line), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(appendLine(nil, r)); got != line+"\n" {
		t.Fatalf("appendLine = %q, want %q", got, line+"\n")
	}
}

func TestScanFile(t *testing.T) {
	t.Parallel()
	data, ends := fixture(20)
	path := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	var seen []uint64
	err := ScanFile(path, func(r Record) error {
		seen = append(seen, r.Seq)
		if r.Seq == 5 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || len(seen) != 5 {
		t.Fatalf("ScanFile = %v after %v, want stop after 5", err, seen)
	}
	// Damage in the middle: the records before it are seen, then ErrQuarantined.
	bad := bytes.Clone(data)
	bad[ends[9]+3] ^= 0x20
	if err := os.WriteFile(path, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	n := 0
	err = ScanFile(path, func(Record) error { n++; return nil })
	if !errors.Is(err, ErrQuarantined) || n != 10 {
		t.Fatalf("ScanFile = %v after %d records, want ErrQuarantined after 10", err, n)
	}
}
