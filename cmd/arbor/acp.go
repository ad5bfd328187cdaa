package main

import (
	"context"
	"encoding/json"
	"flag"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/arborhq/arbor/acp"
	"github.com/arborhq/arbor/server"
	"github.com/arborhq/arbor/workspace"
)

// cmdACP runs Arbor as an Agent Client Protocol agent on stdio (Zed, JetBrains, CodeCompanion,
// avante.nvim), a client of the daemon it starts when needed. Its log goes to stderr, which
// ACP clients show in their agent logs; stdout is the protocol.
func cmdACP(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("acp", flag.ContinueOnError)
	verbose := fs.Bool("verbose", false, "log every warning and info line to stderr")
	if _, err := flags(fs, args); err != nil {
		return err
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(log) // the ACP SDK's own diagnostics go there too; stdout is the protocol
	dial := func(ctx context.Context, onNotify func(string, json.RawMessage)) (*server.Client, error) {
		nc, err := server.Dial(ctx, server.DialOptions{
			Socket: workspace.SocketPath(), Autostart: true,
			LogFile: filepath.Join(workspace.UserDirs().State, "daemon.log"),
		})
		if err != nil {
			return nil, err
		}
		c := server.NewClient(context.Background(), nc, onNotify)
		cwd, _ := os.Getwd()
		params := map[string]any{"processId": os.Getpid(), "rootPath": cwd, "capabilities": map[string]any{},
			"clientInfo": map[string]any{"name": "arbor-acp", "version": version}}
		if err := c.Call(ctx, "initialize", params, nil); err != nil {
			c.Close()
			return nil, err
		}
		// "initialized" subscribes the connection to the session tree (children's states).
		if err := c.Notify(ctx, "initialized", map[string]any{}); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
	return acp.Serve(ctx, acp.Options{Dial: dial, StateDir: workspace.UserDirs().State, Version: version, Logger: log}, os.Stdin, os.Stdout)
}
