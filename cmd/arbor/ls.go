package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/arborhq/arbor/server"
)

type lsEntry struct {
	ID       string       `json:"id"`
	Parent   string       `json:"parent"`
	Name     string       `json:"name,omitempty"`
	Task     string       `json:"task"`
	State    string       `json:"state"`
	Error    string       `json:"error,omitempty"`
	Branch   string       `json:"branch"`
	ForkOf   string       `json:"forkOf,omitempty"`
	ForkSeq  uint64       `json:"forkSeq,omitempty"`
	Worktree string       `json:"worktree"`
	Model    string       `json:"model"`
	Profile  string       `json:"profile,omitempty"`
	Usage    server.Usage `json:"usage"`
	Own      server.Usage `json:"own"`
	Total    server.Usage `json:"total"`
	Children []string     `json:"children"`
}

func listSessions(ctx context.Context, all bool) ([]server.Session, error) {
	c, err := connect(ctx, true, nil)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	p := &server.SessionsParams{}
	if !all {
		p.Dir, _ = os.Getwd()
	}
	res, err := server.Sessions.Call(ctx, c, *p)
	if err != nil {
		return nil, err
	}
	if st, err := server.DaemonStatus.Call(ctx, c, server.Empty{}); err == nil {
		if note := interruptedNote(st); note != "" {
			fmt.Fprintln(os.Stderr, note)
		}
	}
	return res.Sessions, nil
}

func toEntries(ss []server.Session) []lsEntry {
	out := make([]lsEntry, 0, len(ss))
	for _, s := range ss {
		ch := s.Children
		if ch == nil {
			ch = []string{}
		}
		out = append(out, lsEntry{ID: s.ID, Parent: s.Parent, Name: s.Name, Task: s.Task, State: s.State.String(), Error: s.Error,
			Branch: s.Branch, ForkOf: s.ForkOf, ForkSeq: s.ForkSeq, Worktree: s.Worktree, Model: s.Model, Profile: s.Profile, Usage: s.Usage, Own: s.Usage, Total: s.Total, Children: ch})
	}
	return out
}

// sessionsOrJSON parses ls/tree flags and fetches the sessions; with --json it prints them and
// returns nil sessions.
func sessionsOrJSON(ctx context.Context, name string, args []string) ([]server.Session, bool, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print a JSON array of sessions with own and total usage")
	all := fs.Bool("all", false, "sessions of every repository")
	if _, err := flags(fs, args); err != nil {
		return nil, false, err
	}
	ss, err := listSessions(ctx, *all)
	if err != nil || !*asJSON {
		return ss, false, err
	}
	return nil, true, printJSON(toEntries(ss))
}

func cmdLs(ctx context.Context, args []string) error {
	ss, printed, err := sessionsOrJSON(ctx, "ls", args)
	if err != nil || printed {
		return err
	}
	if len(ss) == 0 {
		fmt.Println(`no sessions in this repository; start one with: arbor run "task"`)
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tMODEL\tTOKENS\tBRANCH\tWORKTREE\tTASK")
	for _, s := range ss {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", s.ID[:12], s.State, modelLabel(s),
			s.Total.InputTokens+s.Total.OutputTokens, s.Branch, worktreeLabel(s), truncate(firstLine(s.Task), 50))
	}
	return tw.Flush()
}

// harnessAccounting is the session's harness accounting, apart from the task's tokens: "" when
// there is none.
func harnessAccounting(u server.Usage) string {
	out := ""
	if u.HarnessEdits > 0 {
		out += fmt.Sprintf("  harness edits %d", u.HarnessEdits)
	}
	if u.RefineCalls > 0 {
		out += fmt.Sprintf("  refine %d call(s) %d tokens", u.RefineCalls, u.RefineInputTokens+u.RefineOutputTokens)
	}
	return out
}

func cmdTree(ctx context.Context, args []string) error {
	ss, printed, err := sessionsOrJSON(ctx, "tree", args)
	if err != nil || printed {
		return err
	}
	byID := map[string]server.Session{}
	for _, s := range ss {
		byID[s.ID] = s
	}
	var walk func(id, prefix string, last bool, root bool)
	walk = func(id, prefix string, last, root bool) {
		s := byID[id]
		branch, next := "├─ ", prefix+"│  "
		if last {
			branch, next = "└─ ", prefix+"   "
		}
		if root {
			branch, next = "", ""
		}
		label := s.ID[:8]
		if s.Name != "" {
			label += " " + s.Name
		}
		if s.Profile != "" {
			label += " profile=" + s.Profile
		}
		if s.ForkOf != "" {
			label += fmt.Sprintf(" (fork of %s@%d)", s.ForkOf[:min(8, len(s.ForkOf))], s.ForkSeq)
		}
		goal := ""
		if g := s.Goal; g != nil {
			goal = "  goal " + strings.ReplaceAll(g.Status, "_", " ")
			if g.Waiting != "" {
				goal += " (waiting on " + g.Waiting + ")"
			}
		}
		fmt.Printf("%s%s%s [%s] %s  tokens %d (total %d)%s%s  %s\n", prefix, branch, label, s.State, s.Branch,
			s.Usage.InputTokens+s.Usage.OutputTokens, s.Total.InputTokens+s.Total.OutputTokens, harnessAccounting(s.Usage), goal, truncate(firstLine(s.Task), 40))
		for i, c := range s.Children {
			if _, ok := byID[c]; ok {
				walk(c, next, i == len(s.Children)-1, false)
			}
		}
	}
	for _, s := range ss {
		if _, hasParent := byID[s.Parent]; !hasParent {
			walk(s.ID, "", true, true)
		}
	}
	return nil
}

// modelLabel is the session's model, and the profile it runs with.
// worktreeLabel says whether a session holds a worktree on disk.
func worktreeLabel(s server.Session) string {
	switch {
	case s.Discarded:
		return "-"
	case s.WorktreeReleased:
		return "released"
	case s.WorktreeQueued:
		return "queued"
	case s.WorktreeWriting:
		return "writing"
	}
	return "yes"
}

func modelLabel(s server.Session) string {
	if s.Profile == "" {
		return s.Model
	}
	return s.Model + " profile=" + s.Profile
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.TrimSpace(s[:n-1]) + "…"
}
