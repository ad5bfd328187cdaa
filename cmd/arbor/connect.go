package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/arborhq/arbor/server"
	"github.com/arborhq/arbor/workspace"
)

// connect dials the daemon, starting it when needed, and initializes the LSP session.
func connect(ctx context.Context, autostart bool, onNotify func(string, json.RawMessage)) (*server.Client, error) {
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
