package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arborhq/arbor/server"
)

var updateRender = flag.Bool("update", false, "rewrite testdata/golden/*.txt from the event fixtures")

// TestRenderGoldenEvents renders the event logs recorded from real sessions
// (extensions/test/golden, see agents.TestRecordGoldenEvents) as `arbor log` prints them, and
// compares with testdata/golden/<name>.txt.
func TestRenderGoldenEvents(t *testing.T) {
	local := time.Local
	time.Local = time.UTC
	defer func() { time.Local = local }()
	files, _ := filepath.Glob("../../extensions/test/golden/*.jsonl")
	if len(files) == 0 {
		t.Fatal("no event fixtures")
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".jsonl")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			sc := bufio.NewScanner(bytes.NewReader(data))
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var e server.Event
				if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
					t.Fatal(err)
				}
				printEvent(&out, e, false)
			}
			golden := filepath.Join("testdata", "golden", name+".txt")
			if *updateRender {
				os.WriteFile(golden, out.Bytes(), 0o644)
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test ./cmd/arbor -run Golden -update)", err)
			}
			if !bytes.Equal(out.Bytes(), want) {
				t.Errorf("rendered %s differs from %s:\n%s", name, golden, out.String())
			}
			if strings.Contains(out.String(), "{") && strings.Contains(out.String(), "map[") {
				t.Errorf("an event fell through to the raw form:\n%s", out.String())
			}
		})
	}
}
