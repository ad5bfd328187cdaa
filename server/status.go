package server

import (
	"context"
	"os"
)

func (c *conn) daemonStatus(ctx context.Context, _ Empty) (*DaemonStatusResult, error) {
	s := c.srv
	ov := s.agents.Overrides()
	return &DaemonStatusResult{
		PID: os.Getpid(), Version: s.opts.Version, Socket: s.opts.Socket, Started: s.started,
		Sessions: s.agents.Count(), Live: s.agents.Live(), Clients: int(s.clients.Load()),
		Workspaces:   s.agents.Workspaces(),
		ModelBaseURL: ov.ModelBaseURL, Model: ov.Model, APIKeyEnv: ov.APIKeyEnv,
	}, nil
}

// daemonStop answers; handle stops the daemon once the reply is written.
func (c *conn) daemonStop(ctx context.Context, _ Empty) (*DaemonStatusResult, error) {
	return &DaemonStatusResult{PID: os.Getpid(), Socket: c.srv.opts.Socket}, nil
}
