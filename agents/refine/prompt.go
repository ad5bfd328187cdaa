package refine

import (
	_ "embed"
	"errors"
	"fmt"
	"strings"
)

//go:embed refine.md
var systemPrompt string

// SystemPrompt is the refiner's system message: its role, its rules (minimal edits; never
// weaken a test or a check; the base prompt is immutable), the JSON schema with an example,
// and "reply with JSON only".
func SystemPrompt() string { return systemPrompt }

// UserPrompt is the refiner's request: the scope its edits go to, the user's focus, the
// trajectory's digest and the harness as the session sees it now (harnessBlock, as
// harness.Render gives it). The same arguments give the same bytes.
func UserPrompt(t Trajectory, harnessBlock, focus, scope string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Propose harness edits for the %s scope.\n", orDefault(strings.TrimSpace(scope), "session"))
	if f := strings.TrimSpace(focus); f != "" {
		fmt.Fprintf(&b, "Focus given by the user: %s\n", clip(f, maxMessageText))
	} else {
		b.WriteString("No focus was given: look for the habits that cost the most (repeated failures, corrections, slow cells).\n")
	}
	if t.Task != "" {
		fmt.Fprintf(&b, "\nThe session's task (context only, not an event to cite):\n%s\n", t.Task)
	}
	b.WriteString("\n## Current harness\n")
	if strings.TrimSpace(harnessBlock) == "" {
		b.WriteString("(empty: no notes, memories, skills or subagent specs yet)\n")
	} else {
		b.WriteString(strings.TrimRight(harnessBlock, "\n") + "\n")
	}
	fmt.Fprintf(&b, "\n## Events %d–%d\n", t.FromSeq, max(t.ToSeq, t.FromSeq))
	c := t.Counts
	fmt.Fprintf(&b, "Signals: failures %d, retries %d, corrections %d, long cells %d.\n",
		c["failures"], c["retries"], c["corrections"], c["longCells"])
	if len(t.Items) == 0 {
		b.WriteString("\nNothing was selected: no failures, retries, corrections or long cells since the last refinement, so no edit has a trigger to cite. Reply {\"edits\": []}.\n")
		return b.String()
	}
	b.WriteString("\n" + t.Digest)
	b.WriteString("Cite as trigger only seqs from the [seq N …] headers above. Reply with JSON only.\n")
	return b.String()
}

// RepairPrompt is the one request sent after a reply that could not be used: it names what was
// wrong and restates the schema briefly.
func RepairPrompt(err error) string {
	var b strings.Builder
	b.WriteString("Your reply could not be used: ")
	b.WriteString(err.Error())
	b.WriteString(".\n\n")
	switch {
	case errors.Is(err, ErrBasePrompt):
		b.WriteString("The base prompt is immutable: drop that edit. To add a rule, create a note instead.\n")
	case errors.Is(err, ErrNoJSON), errors.Is(err, ErrBadJSON):
		b.WriteString("Reply with one JSON object and nothing else: no prose, no comments, no trailing commas.\n")
	case errors.Is(err, ErrSchema):
		b.WriteString("Fix what is named above and keep the edits that were fine.\n")
	}
	b.WriteString(`
The shape, again:
{"edits": [{"op": "create" | "update" | "delete",
            "entry": {"kind": "note" | "memory" | "skill" | "subagent", "id": "...", "title": "...",
                      "body": "..." (note, memory, skill doc), "module": "..." (skill source),
                      "spec": {"instructions": "..."} (subagent)},
            "trigger": [seq, ...] (from the digest's [seq N …] headers),
            "rationale": "...", "intended": "..."}],
 "summary": "..."}
At most 8 edits; {"edits": []} if nothing should change. Reply with JSON only.
`)
	return b.String()
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
