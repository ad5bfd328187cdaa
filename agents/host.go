package agents

import (
	"context"
	"encoding/json"
	"fmt"
)

// hostHandler answers the session's kernel over the host bridge. The caller's identity is the
// session itself, never something the kernel claims.
type hostHandler struct{ s *Session }

func (h hostHandler) HandleHost(ctx context.Context, method string, params json.RawMessage) (any, error) {
	switch method {
	case "ping":
		var p struct {
			Payload any `json:"payload"`
		}
		if len(params) > 0 {
			if err := json.Unmarshal(params, &p); err != nil {
				return nil, fmt.Errorf("ping: bad params: %w", err)
			}
		}
		return map[string]any{"pong": p.Payload, "session": h.s.meta.ID}, nil
	}
	return nil, fmt.Errorf("unknown host method %q", method)
}
