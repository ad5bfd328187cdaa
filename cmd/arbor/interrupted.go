package main

import (
	"fmt"
	"strings"

	"github.com/arborhq/arbor/server"
)

// interruptedNote says, for `arbor run` and `arbor ls`, that requests an earlier daemon had
// received were not redone at its restart (or could not be), so the user learns of them
// without reading the daemon log. Requests replayed or found already applied need nothing.
func interruptedNote(st *server.DaemonStatusResult) string {
	var lines []string
	for _, r := range st.Interrupted {
		switch r.Outcome {
		case "replayed", "already applied":
			continue
		}
		what := r.Method
		if what == "" {
			what = "a request"
		}
		if r.Session != "" {
			what += " (session " + r.Session[:min(8, len(r.Session))] + ")"
		}
		lines = append(lines, fmt.Sprintf("  %s: %s", what, r.Outcome))
	}
	if len(lines) == 0 {
		return ""
	}
	return fmt.Sprintf("arbor: the daemon stopped before it answered %d request(s), which it did not redo:\n%s\n"+
		"  `arbor daemon status` says why and what to do", len(lines), strings.Join(lines, "\n"))
}
