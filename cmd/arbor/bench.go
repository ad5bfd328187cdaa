package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"

	"github.com/arborhq/arbor/acp/acpbench"
	"github.com/arborhq/arbor/agents/agentbench"
	"github.com/arborhq/arbor/agents/evalbench"
	"github.com/arborhq/arbor/agents/harness/harnessbench"
	"github.com/arborhq/arbor/agents/longrunbench"
	"github.com/arborhq/arbor/agents/tokenbench"
	"github.com/arborhq/arbor/bench"
	"github.com/arborhq/arbor/gitstate/gitbench"
	"github.com/arborhq/arbor/kernel/kernelbench"
	"github.com/arborhq/arbor/server/startbench"
)

func cmdBench(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	runs := fs.Int("runs", 5, "repetitions of each measurement; figures are their medians")
	sessions := fs.Int("sessions", 1000, "sessions in the agents scale figure")
	children := fs.Int("budget", 1000, "children of the agents disk-budget figure")
	only := fs.String("only", "", "agents and kernel: the groups to run, comma-separated (agents: spawn, warm, forks, scale, budget, eventlog; kernel: "+strings.Join(kernelbench.Groups, ", ")+")")
	entries := fs.Int("entries", 10000, "entries in the harness figures")
	heartbeats := fs.Int("heartbeats", 1000, "heartbeats scheduled on the idle daemon of the longrun figures")
	turns := fs.Int("turns", 200, "cells of the recorded trajectory the tokens figures replay")
	windows := fs.String("windows", "8000,2000", "context windows (tokens, comma-separated) the tokens figures replay the trajectory in")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole benchmark to this file (read it with `go tool pprof`)")
	pos, err := flags(fs, args)
	if err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	if *entries < 1 {
		return fmt.Errorf("--entries %d: want at least 1", *entries)
	}
	if *runs < 1 {
		return fmt.Errorf("--runs %d: want at least 1", *runs)
	}
	if len(pos) != 1 {
		return fmt.Errorf("usage: arbor bench startup|flood|kernel|git|agents|harness|eval|longrun|tokens|acp [--runs N] [--json]")
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var groups []string
	if *only != "" {
		groups = strings.Split(*only, ",")
	}
	var rep *bench.Report
	switch pos[0] {
	case "startup":
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		rep, err = startbench.Run(ctx, exe, *runs)
		if err != nil {
			return err
		}
	case "flood":
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		rep, err = startbench.Flood(ctx, startbench.FloodOptions{Exe: exe})
		if err != nil {
			return err
		}
	case "acp":
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		rep, err = acpbench.Run(ctx, acpbench.Options{Exe: exe, Runs: *runs * 4})
		if err != nil {
			return err
		}
	case "kernel":
		rep, err = kernelbench.Run(ctx, kernelbench.Options{Runs: *runs, Groups: groups, Logger: logger})
	case "git":
		rep, err = gitbench.RunOptions(ctx, logger, gitbench.Options{Rounds: *runs})
	case "agents":
		exe, xerr := os.Executable()
		if xerr != nil {
			return xerr
		}
		rep, err = agentbench.Run(ctx, agentbench.Options{Exe: exe, Runs: *runs, Sessions: *sessions, Budget: *children, Only: groups})
	case "harness":
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		rep, err = harnessbench.Run(ctx, harnessbench.Options{Exe: exe, Runs: *runs, Entries: *entries})
		if err != nil {
			return err
		}
	case "eval":
		rep, err = evalbench.Run(ctx, evalbench.Options{Repeat: 3, Logger: logger})
	case "longrun":
		rep, err = longrunbench.Run(ctx, longrunbench.Options{Heartbeats: *heartbeats, Logger: logger})
	case "tokens":
		ws, werr := parseWindows(*windows)
		if werr != nil {
			return werr
		}
		if *turns < 1 {
			return fmt.Errorf("--turns %d: want at least 1", *turns)
		}
		rep, err = tokenbench.Run(ctx, tokenbench.Options{Turns: *turns, Windows: ws, Logger: logger})
	default:
		return fmt.Errorf("unknown benchmark %q: want startup, flood, kernel, git, agents, harness, eval, longrun, tokens or acp", pos[0])
	}
	if err != nil {
		if rep != nil && len(rep.Figures) > 0 {
			rep.WriteTable(os.Stdout) // the figures measured before the failure
		}
		return err
	}
	if *asJSON {
		return rep.WriteJSON(os.Stdout)
	}
	return rep.WriteTable(os.Stdout)
}

// parseWindows reads --windows: context window sizes in tokens, comma-separated.
func parseWindows(s string) ([]int, error) {
	var ws []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 500 {
			return nil, fmt.Errorf("--windows %q: want context windows of at least 500 tokens, comma-separated, such as 8000,2000", s)
		}
		ws = append(ws, n)
	}
	return ws, nil
}
