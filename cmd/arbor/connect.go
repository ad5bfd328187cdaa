package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/arborhq/arbor/server"
	"github.com/arborhq/arbor/workspace"
)

// connect dials the daemon, starting it when needed, and initializes the LSP session. A daemon
// that closes the connection before it answers initialize is one on its way out (killed, or
// stopping): its socket still accepted. The dial is tried again, so the next attempt finds the
// socket dead and, with autostart, starts a new daemon; nothing was sent but initialize.
func connect(ctx context.Context, autostart bool, onNotify func(string, json.RawMessage)) (*server.Client, error) {
	var err error
	for attempt := 1; attempt <= connectAttempts; attempt++ {
		var c *server.Client
		if c, err = connectOnce(ctx, autostart, onNotify); err == nil || !errors.Is(err, server.ErrConnectionClosed) {
			return c, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
		}
	}
	return nil, err
}

// connectAttempts bounds connect's retries of a daemon that closed the connection at initialize.
const connectAttempts = 4

func connectOnce(ctx context.Context, autostart bool, onNotify func(string, json.RawMessage)) (*server.Client, error) {
	nc, err := server.Dial(ctx, server.DialOptions{
		Socket: workspace.SocketPath(), Autostart: autostart,
		LogFile: filepath.Join(workspace.UserDirs().State, "daemon.log"),
	})
	if err != nil {
		return nil, err
	}
	c := server.NewClient(ctx, nc, onNotify)
	cwd, _ := os.Getwd()
	params := map[string]any{"processId": os.Getpid(), "rootPath": cwd, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "arbor-cli", "version": version}}
	if err := c.Call(ctx, "initialize", params, nil); err != nil {
		c.Close()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	return c, nil
}

// flags parses args allowing flags after positional arguments (`arbor log ID --json`).
func flags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func needArgs(pos []string, n int, usage string) error {
	if len(pos) != n {
		return fmt.Errorf("usage: arbor %s", usage)
	}
	return nil
}

func absDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", dir)
	}
	return abs, nil
}
