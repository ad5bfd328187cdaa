package agents

import (
	_ "embed"
	"fmt"
	"strings"
)

// basePrompt is the immutable base of every system prompt.
//
//go:embed prompt.md
var basePrompt string

// systemPrompt builds the system message for a session.
func systemPrompt(meta Meta) string {
	var b strings.Builder
	b.WriteString(basePrompt)
	fmt.Fprintf(&b, "\nYour session: id %s, branch %s, worktree %s.\n", meta.ID, meta.Branch, meta.Worktree)
	if meta.Parent != "" {
		fmt.Fprintf(&b, "You are a subagent (name %q) of session %s. Report your result to your parent with agent_message.send when done.\n", meta.Name, meta.Parent)
	}
	return b.String()
}
