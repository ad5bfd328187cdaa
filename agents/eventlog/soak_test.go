package eventlog

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestCheckSoakLog makes sure the soak's verifier catches what it is there to catch.
func TestCheckSoakLog(t *testing.T) {
	t.Parallel()
	rec := func(seq uint64, c, w, n int) Record {
		d, _ := json.Marshal(soakTick{C: c, W: w, N: n})
		return Record{Seq: seq, TS: time.Unix(1, 0), Type: "soak_tick", Data: d}
	}
	good := []Record{rec(1, 0, 0, 0), rec(2, 0, 1, 0), rec(3, 0, 0, 1), rec(4, 1, 0, 0)}
	ackOf := func(seq uint64, c, w, n int) ack { return ack{seq: seq, tick: soakTick{C: c, W: w, N: n}} }
	tests := []struct {
		name  string
		recs  []Record
		acked []ack
		want  string
	}{
		{"ok", good, []ack{ackOf(1, 0, 0, 0), ackOf(3, 0, 0, 1), ackOf(4, 1, 0, 0)}, ""},
		{"lost", good[:2], []ack{ackOf(3, 0, 0, 1)}, "lost"},
		{"duplicated", []Record{rec(1, 0, 0, 0), rec(2, 0, 0, 0)}, nil, "duplicated"},
		{"reordered", []Record{rec(1, 0, 0, 1), rec(2, 0, 0, 0)}, nil, "reordered"},
		{"gap in a writer", []Record{rec(1, 0, 0, 0), rec(2, 0, 0, 2)}, nil, "want 1"},
		{"ack names other record", good, []ack{ackOf(2, 0, 0, 1)}, "was acknowledged"},
		{"seq gap", []Record{rec(1, 0, 0, 0), rec(3, 0, 0, 1)}, nil, "has seq 3"},
	}
	for _, tt := range tests {
		err := checkSoakLog("log", tt.recs, tt.acked)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: checkSoakLog = %v, want %q", tt.name, err, tt.want)
		}
	}
}
