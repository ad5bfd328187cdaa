package agents

import (
	"context"
	"encoding/json"
	"fmt"
)

// hostHandler answers the session's kernel over the host bridge. The caller's identity is the
// session itself, never something the kernel claims.
type hostHandler struct{ s *Session }

type hostMethod func(ctx context.Context, s *Session, params json.RawMessage) (any, error)

var hostMethods = map[string]hostMethod{
	"rlm.spawn":                 hostSpawn,
	"rlm.list":                  hostListChildren,
	"rlm.stop":                  hostStopChild,
	"rlm.merge":                 hostMergeChild,
	"agent_message.send":        hostSend,
	"agent_message.list_agents": hostListAgents,
	"agent_message.inbox":       hostInbox,
	"harness.list":              hostHarnessList,
	"harness.get":               hostHarnessGet,
	"harness.put":               hostHarnessPut,
	"harness.delete":            hostHarnessDelete,
	"harness.history":           hostHarnessHistory,
	"harness.search":            hostHarnessSearch,
	"refine.run":                hostRefineRun,
	"goal.set":                  hostGoalSet,
	"goal.complete":             hostGoalComplete,
	"goal.get":                  hostGoalGet,
	"heartbeat.create":          hostHeartbeatCreate,
	"heartbeat.list":            hostHeartbeatList,
	"heartbeat.delete":          hostHeartbeatDelete,
}

func (h hostHandler) HandleHost(ctx context.Context, method string, params json.RawMessage) (any, error) {
	m, ok := hostMethods[method]
	if !ok {
		return nil, fmt.Errorf("unknown host method %q", method)
	}
	return m(ctx, h.s, params)
}

// decodeStrict decodes bridge params, refusing fields the method does not take.
func decodeStrict(method string, raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytesReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	return nil
}
