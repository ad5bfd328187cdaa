package server

import (
	"context"
	"os"

	"github.com/arborhq/arbor/sandbox"
)

func (c *conn) daemonStatus(ctx context.Context, _ Empty) (*DaemonStatusResult, error) {
	s := c.srv
	ov := s.agents.Overrides()
	return &DaemonStatusResult{
		PID: os.Getpid(), Version: s.opts.Version, Socket: s.opts.Socket, Started: s.started,
		Sessions: s.agents.Count(), Live: s.agents.Live(), Clients: int(s.clients.Load()),
		Workspaces:   s.agents.Workspaces(),
		ModelBaseURL: ov.ModelBaseURL, Model: ov.Model, APIKeyEnv: ov.APIKeyEnv,
		Sandbox:     sandboxStatus(s.agents.Sandbox()),
		Interrupted: s.interrupted.get(),
	}, nil
}

func sandboxStatus(st sandbox.Status) SandboxStatus {
	budget := sandbox.DetectBudget().String()
	if st.Available {
		return SandboxStatus{Mode: "bwrap", Available: true, Budget: budget}
	}
	return SandboxStatus{Mode: "unsandboxed", Reason: st.Reason, Budget: budget}
}

// daemonStop answers; handle stops the daemon once the reply is written.
func (c *conn) daemonStop(ctx context.Context, _ Empty) (*DaemonStatusResult, error) {
	return &DaemonStatusResult{PID: os.Getpid(), Socket: c.srv.opts.Socket}, nil
}
