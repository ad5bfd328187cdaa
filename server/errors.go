package server

import (
	"encoding/json"
	"errors"

	"github.com/arborhq/arbor/agents"
	"github.com/arborhq/arbor/gitstate"
	"github.com/arborhq/arbor/workspace"
	"go.lsp.dev/jsonrpc2"
)

// errShuttingDown answers requests that arrive while the daemon stops.
var errShuttingDown = errors.New("the arbor daemon is shutting down; retry in a moment and it will be started again")

// errInvalidParams marks bad input from the client.
type errInvalidParams struct{ msg string }

func (e errInvalidParams) Error() string { return e.msg }

// toRPCError maps Go errors to JSON-RPC codes in one place; the message stays the Go error's,
// which names what was wrong.
func toRPCError(err error) error {
	if err == nil {
		return nil
	}
	var rpcErr *jsonrpc2.Error
	if errors.As(err, &rpcErr) {
		return err
	}
	var untrusted *workspace.UntrustedError
	if errors.As(err, &untrusted) {
		// The data is what an editor needs to ask the user and grant: the settings and hash.
		data, _ := json.Marshal(trustState(untrusted.Trust))
		raw := json.RawMessage(data)
		e := jsonrpc2.NewError(CodeUntrusted, err.Error())
		e.Data = &raw
		return e
	}
	code := jsonrpc2.InternalError
	var ip errInvalidParams
	var dirty *gitstate.DirtyError
	var conflict *gitstate.ConflictError
	switch {
	case errors.As(err, &ip):
		code = jsonrpc2.InvalidParams
	case errors.As(err, &dirty), errors.As(err, &conflict):
		code = CodeConflict // the messages name the files
	case errors.Is(err, agents.ErrUnknownSession):
		code = CodeUnknownSession
	case errors.Is(err, workspace.ErrNotRepo), errors.Is(err, gitstate.ErrNotRepo), errors.Is(err, gitstate.ErrNoCommits):
		code = CodeNotRepository
	case errors.Is(err, workspace.ErrNoModel):
		code = CodeModelUnavailable
	case errors.Is(err, agents.ErrInvalidState):
		code = CodeInvalidState
	case errors.Is(err, gitstate.ErrNoIdentity):
		code = CodeNoGitIdentity
	case errors.Is(err, errShuttingDown):
		code = CodeShuttingDown
	}
	return jsonrpc2.NewError(code, err.Error())
}
