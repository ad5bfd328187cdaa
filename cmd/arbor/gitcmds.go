package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/arborhq/arbor/server"
)

// listFlag collects a repeated flag (--hunk a#0 --hunk b#1).
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// call connects, makes one request, and closes.
func call[P, R any](ctx context.Context, m server.Method[P, R], p P) (R, error) {
	c, err := connect(ctx, true, nil)
	if err != nil {
		var zero R
		return zero, err
	}
	defer c.Close()
	return m.Call(ctx, c, p)
}

func cmdFork(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("fork", flag.ContinueOnError)
	at := fs.Uint64("at", 0, "event seq to fork at, as arbor log ID shows them; 0 = now")
	name := fs.String("name", "", "a name for the fork, also used in its branch name")
	pos, err := flags(fs, args)
	if err != nil {
		return err
	}
	if err := needArgs(pos, 1, "fork ID [--at SEQ] [--name N]"); err != nil {
		return err
	}
	s, err := call(ctx, server.SessionFork, server.ForkParams{ID: pos[0], AtSeq: *at, Name: *name})
	if err != nil {
		return err
	}
	fmt.Printf("session %s on branch %s\nworktree %s\nit is idle: arbor send %s \"…\" starts it\n", s.ID, s.Branch, s.Worktree, abbrev(s.ID, 8))
	return nil
}

func cmdAccept(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("accept", flag.ContinueOnError)
	files := fs.String("files", "", "comma-separated paths to take (default: all)")
	var hunks listFlag
	fs.Var(&hunks, "hunk", "path#i: take hunk i (from 0, as in `arbor diff ID --json`) of path; repeatable")
	merge := fs.Bool("merge", false, "record a merge commit instead of one squashed commit")
	pos, err := flags(fs, args)
	if err != nil {
		return err
	}
	if err := needArgs(pos, 1, "accept ID [--files a,b] [--hunk path#i ...] [--merge]"); err != nil {
		return err
	}
	p := &server.AcceptParams{ID: pos[0], Hunks: hunks, Mode: "squash"}
	if *files != "" {
		p.Files = strings.Split(*files, ",")
	}
	if *merge {
		p.Mode = "merge"
	}
	res, err := call(ctx, server.SessionAccept, *p)
	if err != nil {
		return err
	}
	fmt.Printf("committed %s on your branch: %s\n", abbrev(res.Commit, 12), strings.Join(res.Files, ", "))
	return nil
}

func cmdMerge(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("merge", flag.ContinueOnError)
	pos, err := flags(fs, args)
	if err != nil {
		return err
	}
	if err := needArgs(pos, 1, "merge ID"); err != nil {
		return err
	}
	res, err := call(ctx, server.SessionMerge, server.SessionRef{ID: pos[0]})
	if err != nil {
		return err
	}
	fmt.Printf("merged into the parent's branch as %s: %s\n", abbrev(res.Commit, 12), strings.Join(res.Files, ", "))
	return nil
}

func cmdDiscard(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("discard", flag.ContinueOnError)
	force := fs.Bool("force", false, "also delete unmerged and uncommitted work instead of archiving it")
	pos, err := flags(fs, args)
	if err != nil {
		return err
	}
	if err := needArgs(pos, 1, "discard ID [--force]"); err != nil {
		return err
	}
	res, err := call(ctx, server.SessionDiscard, server.DiscardParams{ID: pos[0], Force: *force})
	if err != nil {
		return err
	}
	switch {
	case res.Archived != "":
		fmt.Printf("discarded %s; its unmerged work is kept at %s\n(git branch %s %s brings it back)\n",
			abbrev(res.Session.ID, 8), res.Archived, res.Session.Branch, res.Archived)
	case res.BranchDeleted && *force:
		fmt.Printf("discarded %s; branch %s deleted\n", abbrev(res.Session.ID, 8), res.Session.Branch)
	default:
		fmt.Printf("discarded %s; branch %s deleted, its commits are on another branch\n", abbrev(res.Session.ID, 8), res.Session.Branch)
	}
	return nil
}

func abbrev(id string, n int) string { return id[:min(n, len(id))] }
