package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/arborhq/arbor/agents"
	"github.com/arborhq/arbor/agents/harness"
	"github.com/arborhq/arbor/agents/heartbeat"
	"github.com/arborhq/arbor/gitstate"
	"github.com/arborhq/arbor/workspace"
	"go.lsp.dev/jsonrpc2"
)

// errShuttingDown answers requests that arrive while the daemon stops.
var errShuttingDown = errors.New("the arbor daemon is shutting down; retry in a moment and it will be started again")

// errInvalidParams marks bad input from the client.
type errInvalidParams struct{ msg string }

func (e errInvalidParams) Error() string { return e.msg }

// maxEcho bounds how much of a client's input comes back in an error message or goes to the
// log: a 30 MB "dir" must not come back as a 60 MB error. maxErrorMessage bounds a whole
// message, which may quote an input more than once.
const (
	maxEcho         = 256
	maxErrorMessage = 2048
)

// clip shortens s to about max bytes (never splitting a UTF-8 sequence), saying how much was
// left out.
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…[%d more bytes]", s[:cut], len(s)-cut)
}

// toRPCError maps Go errors to JSON-RPC codes in one place; the message stays the Go error's,
// which names what was wrong.
func toRPCError(err error) error {
	if err == nil {
		return nil
	}
	var rpcErr *jsonrpc2.Error
	if errors.As(err, &rpcErr) {
		e := *rpcErr // a copy: the error may be shared
		e.Message = clip(e.Message, maxErrorMessage)
		return &e
	}
	var untrusted *workspace.UntrustedError
	if errors.As(err, &untrusted) {
		// The data is what an editor needs to ask the user and grant: the settings and hash.
		data, _ := json.Marshal(trustState(untrusted.Trust))
		raw := json.RawMessage(data)
		e := jsonrpc2.NewError(CodeUntrusted, clip(err.Error(), maxErrorMessage))
		e.Data = &raw
		return e
	}
	var stale *harness.StaleError
	if errors.As(err, &stale) {
		// The data names the current version, so an editor can reread and offer the edit again.
		data, _ := json.Marshal(HarnessStale{Kind: string(stale.Kind), ID: stale.ID, Read: stale.Read, Current: stale.Current})
		raw := json.RawMessage(data)
		e := jsonrpc2.NewError(CodeStale, clip(err.Error(), maxErrorMessage))
		e.Data = &raw
		return e
	}
	code := jsonrpc2.InternalError
	var ip errInvalidParams
	var req agents.RequestError
	var outside *workspace.OutsideError
	var dirty *gitstate.DirtyError
	var conflict *gitstate.ConflictError
	switch {
	case errors.As(err, &ip), errors.As(err, &req), errors.Is(err, harness.ErrInvalid), errors.As(err, &outside), errors.Is(err, workspace.ErrNoDirectory),
		errors.Is(err, gitstate.ErrBadResolution):
		code = jsonrpc2.InvalidParams // the client's input was wrong; the message says how
	case errors.As(err, &dirty), errors.As(err, &conflict):
		// The message names the files; the data lists them for an editor to open.
		cd := ConflictData{Kind: "conflict"}
		if dirty != nil {
			cd = ConflictData{Kind: "dirty", Into: dirty.Dir, Files: dirty.Files}
		} else {
			cd.Into, cd.Files = conflict.Into, conflict.Files
		}
		data, _ := json.Marshal(cd)
		raw := json.RawMessage(data)
		e := jsonrpc2.NewError(CodeConflict, clip(err.Error(), maxErrorMessage))
		e.Data = &raw
		return e
	case errors.Is(err, harness.ErrNotFound), errors.Is(err, harness.ErrNoProposal), errors.Is(err, heartbeat.ErrNotFound):
		code = CodeNotFound
	case errors.Is(err, harness.ErrDecided):
		code = CodeStale // decided meanwhile: the message says how
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
	return jsonrpc2.NewError(code, clip(err.Error(), maxErrorMessage))
}
