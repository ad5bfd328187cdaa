//go:build !arbortest

package main

import (
	"github.com/arborhq/arbor/agents"
	"github.com/arborhq/arbor/server"
)

// The binary users run has no test hooks: no environment variable makes its daemon kill itself
// or resizes a queue. The tests build arbor with -tags arbortest (testhooks_arbortest.go).

func daemonTestHooks(*agents.Options, *server.DaemonOptions) {}

func followQueue() int { return defaultFollowQueue }
