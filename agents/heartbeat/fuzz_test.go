package heartbeat

import (
	"strings"
	"testing"
	"time"
)

// FuzzParse: whatever a user or a model's code passes as every or cron, Parse returns a
// schedule that is due after its start, or an error that quotes the input; it never panics.
// The error's field diagnosis (cronFault) runs on every bad expression.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"10m", "1s", "1h30m", "-5m", "10x", "", ".", "1e9h", "*/15 * * * *", "61 * * * *",
		"0 0 30 2 *", "@hourly", "@every 5m", "CRON_TZ=UTC 0 3 * * *", "TZ=Nowhere * * * * *", "* * *", "1-2-3 * * * *", "*/0 * * * *"} {
		f.Add(s, true)
		f.Add(s, false)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, in string, every bool) {
		var sch Schedule
		var err error
		if every {
			sch, err = Parse(in, "", start)
		} else {
			sch, err = Parse("", in, start)
		}
		if err != nil {
			if in != "" && !strings.Contains(err.Error(), strings.ToValidUTF8(in[:min(len(in), 8)], "\uFFFD")) && !strings.Contains(err.Error(), "%!") {
				// %q escapes odd bytes, so only the plain start of the input is looked for.
				if isPlain(in[:min(len(in), 8)]) {
					t.Errorf("error %q does not quote the input %q", err, in)
				}
			}
			return
		}
		if next := sch.Next(start); !next.After(start) {
			t.Errorf("%q: next %v is not after %v", in, next, start)
		}
	})
}

func isPlain(s string) bool {
	for _, r := range s {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return false
		}
	}
	return true
}
