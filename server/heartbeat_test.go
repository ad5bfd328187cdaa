package server

import (
	"errors"
	"strings"
	"testing"

	"go.lsp.dev/jsonrpc2"
)

// TestHeartbeatErrorCodes: arbor/heartbeat.* map their errors to the codes an editor acts on.
func TestHeartbeatErrorCodes(t *testing.T) {
	d := startTestDaemon(t, "")
	c := dialClient(t, d.sock)
	ctx := t.Context()
	code := func(err error, want jsonrpc2.Code, text string) {
		t.Helper()
		var e *jsonrpc2.Error
		if !errors.As(err, &e) || e.Code != want || !strings.Contains(e.Message, text) {
			t.Errorf("got %v, want code %d with %q", err, want, text)
		}
	}
	_, err := HeartbeatCreate.Call(ctx, c, HeartbeatCreateParams{Instruction: "x", Every: "1m"})
	code(err, jsonrpc2.InvalidParams, "name the session")
	_, err = HeartbeatCreate.Call(ctx, c, HeartbeatCreateParams{Session: "nosuchsession", Instruction: "x", Every: "1m"})
	code(err, CodeUnknownSession, "nosuchsession")
	_, err = HeartbeatDelete.Call(ctx, c, HeartbeatID{ID: "hbnope"})
	code(err, CodeNotFound, `unknown heartbeat "hbnope"`)
	_, err = HeartbeatDelete.Call(ctx, c, HeartbeatID{})
	code(err, jsonrpc2.InvalidParams, "give the id")
	_, err = HeartbeatList.Call(ctx, c, HeartbeatListParams{Session: "nosuchsession"})
	code(err, CodeUnknownSession, "nosuchsession")
	res, err := HeartbeatList.Call(ctx, c, HeartbeatListParams{})
	if err != nil || res.Heartbeats == nil || len(res.Heartbeats) != 0 {
		t.Errorf("list of none: %+v %v", res, err)
	}
}
