package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/arborhq/arbor/server"
)

// printEvent writes one event: a JSON object per line, or a short human form.
func printEvent(w io.Writer, e server.Event, asJSON bool) {
	if asJSON {
		b, _ := json.Marshal(map[string]any{"seq": e.Seq, "ts": e.TS, "type": e.Type, "data": e.Data})
		fmt.Fprintf(w, "%s\n", b)
		return
	}
	var d map[string]any
	json.Unmarshal(e.Data, &d)
	str := func(k string) string { s, _ := d[k].(string); return s }
	ts := e.TS.Local().Format("15:04:05")
	switch e.Type {
	case "state_changed":
		line := "● " + str("state")
		if r := str("reason"); r != "" {
			line += ": " + r
		}
		fmt.Fprintf(w, "%s %s\n", ts, line)
	case "user_message":
		fmt.Fprintf(w, "%s %s: %s\n", ts, orDefault(str("from"), "user"), indent(str("text")))
	case "assistant_message":
		if t := strings.TrimSpace(str("text")); t != "" {
			fmt.Fprintf(w, "%s assistant: %s\n", ts, indent(t))
		}
		calls, _ := d["toolCalls"].([]any)
		for _, c := range calls {
			m, _ := c.(map[string]any)
			code, _ := m["Code"].(string)
			if code == "" {
				code, _ = m["code"].(string)
			}
			fmt.Fprintf(w, "%s python:\n%s\n", ts, block(code, "    "))
		}
	case "tool_finished":
		fmt.Fprintf(w, "%s result (%s):\n%s\n", ts, str("status"), block(strings.TrimRight(str("output"), "\n"), "    │ "))
	case "checkpoint":
		commit := str("commit")
		if len(commit) > 10 {
			commit = commit[:10]
		}
		fmt.Fprintf(w, "%s checkpoint %s (turn %v)\n", ts, commit, d["turn"])
	case "turn_failed":
		fmt.Fprintf(w, "%s turn failed: %s\n", ts, str("error"))
	case "session_created":
		fmt.Fprintf(w, "%s session %s created on %s: %s\n", ts, str("id"), str("branch"), firstLine(str("task")))
	case "kernel":
		line := "kernel " + str("event")
		if pid, ok := d["pid"]; ok {
			line += fmt.Sprintf(" (pid %v)", pid)
		}
		for _, k := range []string{"restored", "summary", "error"} {
			if v := str(k); v != "" {
				line += ": " + v
			}
		}
		fmt.Fprintf(w, "%s %s\n", ts, line)
	case "model_retry":
		fmt.Fprintf(w, "%s model retry %v: %s\n", ts, d["retry"], str("error"))
	case "subagent_spawned":
		fmt.Fprintf(w, "%s spawned subagent %s on %s: %s\n", ts, str("name"), str("branch"), firstLine(str("task")))
	case "message_sent":
		if t := str("text"); t != "" {
			fmt.Fprintf(w, "%s sent: %s\n", ts, indent(t))
		}
	case "compaction":
		fmt.Fprintf(w, "%s context compacted (%v messages summarised, %v kept)\n", ts, d["compacted"], d["kept"])
	case "message_queued", "tool_started", "turn_started":
		// shown by the events that follow them
	default:
		fmt.Fprintf(w, "%s %s %s\n", ts, e.Type, string(e.Data))
	}
}

func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n    ") }

func block(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n")
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
