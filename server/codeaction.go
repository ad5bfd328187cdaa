package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"go.lsp.dev/protocol"
)

// codeAction offers "Refactor with agent…" and "Spawn subagent on selection" on any range.
// The task text is asked for by the editor (the command carries the selection).
func (c *conn) codeAction(ctx context.Context, p protocol.CodeActionParams) ([]protocol.CodeAction, error) {
	if len(p.Context.Only) > 0 && !kindWanted(p.Context.Only) {
		return []protocol.CodeAction{}, nil
	}
	file := p.TextDocument.URI.Filename()
	sel := Selection{URI: string(p.TextDocument.URI), StartLine: int(p.Range.Start.Line), EndLine: int(p.Range.End.Line)}
	if text, err := readLines(file, sel.StartLine, sel.EndLine); err == nil {
		sel.Text = text
	}
	args := func(task string) []any {
		return []any{map[string]any{"task": task, "dir": dirOf(file), "selection": sel}}
	}
	return []protocol.CodeAction{
		{Title: "Refactor with agent…", Kind: CodeActionKind,
			Command: &protocol.Command{Title: "Refactor with agent…", Command: CmdNewTask, Arguments: args("")}},
		{Title: "Spawn subagent on selection", Kind: CodeActionKind,
			Command: &protocol.Command{Title: "Spawn subagent on selection", Command: CmdSpawnSubagent, Arguments: args("")}},
	}, nil
}

func kindWanted(only []protocol.CodeActionKind) bool {
	for _, k := range only {
		if strings.HasPrefix(string(CodeActionKind), string(k)) {
			return true
		}
	}
	return false
}

// commandMethods maps each command to the arbor/* request it runs.
var commandMethods = map[string]string{
	CmdNewTask: MethodSessionCreate, CmdSpawnSubagent: MethodSessionCreate, CmdStop: MethodSessionStop,
	CmdSend: MethodSessionSend, CmdFork: MethodSessionFork, CmdAccept: MethodSessionAccept, CmdDiscard: MethodSessionDiscard,
}

// executeCommand runs the same actions as the arbor/* requests; each argument object is that
// request's params.
func (c *conn) executeCommand(ctx context.Context, p protocol.ExecuteCommandParams) (any, error) {
	var arg json.RawMessage = []byte("{}")
	if len(p.Arguments) > 0 {
		arg, _ = json.Marshal(p.Arguments[0])
	}
	if m, ok := commandMethods[p.Command]; ok {
		return c.serve(ctx, routes[m], arg, 0)
	}
	return nil, errInvalidParams{fmt.Sprintf("unknown command %q: Arbor's commands are %s", p.Command,
		strings.Join([]string{CmdNewTask, CmdSpawnSubagent, CmdStop, CmdSend, CmdFork, CmdAccept, CmdDiscard}, ", "))}
}
