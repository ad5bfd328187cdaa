package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.lsp.dev/jsonrpc2"

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
	wt := s.Worktree
	if s.WorktreeWriting {
		wt += " (its files are being written; arbor ls shows when they are in)"
	}
	fmt.Printf("session %s on branch %s\nworktree %s\nit is idle: arbor send %s \"…\" starts it\n", s.ID, s.Branch, wt, abbrev(s.ID, 8))
	return nil
}

func cmdAccept(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("accept", flag.ContinueOnError)
	files := fs.String("files", "", "comma-separated paths to take (default: all)")
	var hunks listFlag
	fs.Var(&hunks, "hunk", "path#i: take hunk i (from 0, as in `arbor diff ID --json`) of path; repeatable")
	merge := fs.Bool("merge", false, "record a merge commit instead of one squashed commit")
	head := fs.String("head", "", "the head the reviewed diff showed (`arbor diff ID --json`): refused if the session moved on since")
	pos, err := flags(fs, args)
	if err != nil {
		return err
	}
	if err := needArgs(pos, 1, "accept ID [--files a,b] [--hunk path#i ...] [--merge] [--head H]"); err != nil {
		return err
	}
	p := &server.AcceptParams{ID: pos[0], Hunks: hunks, Mode: "squash", Head: *head}
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

func cmdReject(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("reject", flag.ContinueOnError)
	files := fs.String("files", "", "comma-separated paths to take back (default: all of the remaining change)")
	var hunks listFlag
	fs.Var(&hunks, "hunk", "path#i: take back hunk i (from 0, as in `arbor diff ID --json`) of path; repeatable")
	head := fs.String("head", "", "the head the reviewed diff showed (`arbor diff ID --json`): refused if the session moved on since")
	pos, err := flags(fs, args)
	if err != nil {
		return err
	}
	if err := needArgs(pos, 1, "reject ID [--files a,b] [--hunk path#i ...] [--head H]"); err != nil {
		return err
	}
	p := server.RejectParams{ID: pos[0], Hunks: hunks, Head: *head}
	if *files != "" {
		p.Files = strings.Split(*files, ",")
	}
	res, err := call(ctx, server.SessionReject, p)
	if err != nil {
		return err
	}
	fmt.Printf("reverted on the session's branch as %s: %s\n(the session is told at its next turn; your branch is unchanged)\n", abbrev(res.Commit, 12), strings.Join(res.Files, ", "))
	return nil
}

func cmdMerge(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("merge", flag.ContinueOnError)
	resolved := fs.String("resolved", "", "the directory a conflicted merge wrote, holding the resolved version of each conflicted file at its path")
	var take listFlag
	fs.Var(&take, "take", "path=ours|theirs: settle path's conflict with the parent's (ours) or the child's (theirs) version whole; repeatable")
	pos, err := flags(fs, args)
	if err != nil {
		return err
	}
	if err := needArgs(pos, 1, "merge ID [--resolved DIR] [--take path=ours|theirs ...]"); err != nil {
		return err
	}
	c, err := connect(ctx, true, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	p := server.MergeParams{ID: pos[0]}
	for _, t := range take {
		path, side, ok := strings.Cut(t, "=")
		if !ok || side != "ours" && side != "theirs" {
			return fmt.Errorf("--take %q: want path=ours or path=theirs", t)
		}
		if p.Take == nil {
			p.Take = map[string]string{}
		}
		p.Take[path] = side
	}
	if *resolved != "" {
		if err := readResolutions(*resolved, &p); err != nil {
			return err
		}
	}
	res, err := server.SessionMerge.Call(ctx, c, p)
	var rpcErr *jsonrpc2.Error
	if errors.As(err, &rpcErr) && rpcErr.Code == server.CodeConflict && *resolved == "" && len(take) == 0 {
		var cd server.ConflictData
		if rpcErr.Data == nil || json.Unmarshal(*rpcErr.Data, &cd) != nil || cd.Kind != "conflict" {
			return err // dirty files: the message names them
		}
		dir, werr := writeConflicts(ctx, c, pos[0])
		if werr != nil {
			return fmt.Errorf("%w (and writing the conflicted files failed: %v)", err, werr)
		}
		return fmt.Errorf("%w\ngit's merge of each text file, with conflict markers, is in %s: edit them (binary files: --take PATH=ours|theirs), then run\n  arbor merge %s --resolved %s", err, dir, pos[0], dir)
	}
	if err != nil {
		return err
	}
	fmt.Printf("merged into the parent's branch as %s: %s\n", abbrev(res.Commit, 12), strings.Join(res.Files, ", "))
	return nil
}

// mergeState is what a conflicted merge leaves in its directory besides the files: the
// heads its conflicts are between, sent back with the resolutions (a branch that moved since
// refuses them), and the text files to read back.
type mergeState struct {
	Child      string   `json:"child"`
	ParentHead string   `json:"parentHead"`
	ChildHead  string   `json:"childHead"`
	Files      []string `json:"files"`
}

const mergeStateFile = ".arbor-merge.json"

// writeConflicts writes git's merge (with conflict markers) of each conflicted text file of a
// child's merge into a new directory, at its path, for the user to resolve.
func writeConflicts(ctx context.Context, c *server.Client, id string) (string, error) {
	cs, err := server.SessionConflicts.Call(ctx, c, server.SessionRef{ID: id})
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "arbor-merge-"+abbrev(cs.Child, 8)+"-")
	if err != nil {
		return "", err
	}
	st := mergeState{Child: cs.Child, ParentHead: cs.ParentHead, ChildHead: cs.ChildHead}
	for _, f := range cs.Files {
		if err := checkRelative(f.Path); err != nil {
			return "", err
		}
		if f.Binary {
			continue // nothing to edit: --take says which side
		}
		to := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(to, []byte(f.Merged), 0o644); err != nil {
			return "", err
		}
		st.Files = append(st.Files, f.Path)
	}
	b, _ := json.MarshalIndent(st, "", "  ")
	return dir, os.WriteFile(filepath.Join(dir, mergeStateFile), b, 0o644)
}

// readResolutions reads back what writeConflicts wrote, as the user resolved it.
func readResolutions(dir string, p *server.MergeParams) error {
	b, err := os.ReadFile(filepath.Join(dir, mergeStateFile))
	if err != nil {
		return fmt.Errorf("--resolved %s: not a directory a conflicted arbor merge wrote (%v)", dir, err)
	}
	var st mergeState
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("--resolved %s: %s: %w", dir, mergeStateFile, err)
	}
	p.ParentHead, p.ChildHead = st.ParentHead, st.ChildHead
	p.Resolutions = map[string]string{}
	for _, f := range st.Files {
		if err := checkRelative(f); err != nil {
			return err
		}
		if _, taken := p.Take[f]; taken {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			return fmt.Errorf("--resolved: the resolution of %s: %w (to take a side whole: --take %s=ours|theirs)", f, err, f)
		}
		p.Resolutions[f] = string(b)
	}
	return nil
}

// checkRelative refuses a path from the daemon that would land outside the directory.
func checkRelative(p string) error {
	if !filepath.IsLocal(filepath.FromSlash(p)) {
		return fmt.Errorf("conflicted path %q is not a relative path", p)
	}
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
