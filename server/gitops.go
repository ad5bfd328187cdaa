package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/arborhq/arbor/agents"
	"github.com/arborhq/arbor/gitstate"
)

// The git operations on sessions: fork, accept, child merge, discard.

func (c *conn) sessionFork(ctx context.Context, p ForkParams) (*Session, error) {
	sess, err := c.srv.agents.ForkKeyed(ctx, p.ID, p.AtSeq, p.Name, requestKey(ctx))
	if err != nil {
		return nil, err
	}
	return sessionResult(c.srv.agents.Info(sess)), nil
}

func (c *conn) sessionAccept(ctx context.Context, p AcceptParams) (*AcceptResult, error) {
	merge := false
	switch p.Mode {
	case "", "squash":
	case "merge":
		merge = true
	default:
		return nil, errInvalidParams{fmt.Sprintf(`accept: mode must be "squash" or "merge", got %q`, p.Mode)}
	}
	hunks, err := parseHunks(p.Hunks)
	if err != nil {
		return nil, err
	}
	res, err := c.srv.agents.AcceptAt(ctx, p.ID, agents.Review{Head: p.Head, Accepted: p.Accepted}, p.Files, hunks, merge)
	if err != nil {
		return nil, err
	}
	return &AcceptResult{Commit: res.Commit, Files: res.Files}, nil
}

// parseHunks reads "path#index" selections into path → indexes.
func parseHunks(sel []string) (map[string][]int, error) {
	if len(sel) == 0 {
		return nil, nil
	}
	out := map[string][]int{}
	for _, h := range sel {
		i := strings.LastIndexByte(h, '#')
		n, err := strconv.Atoi(h[i+1:])
		if i <= 0 || err != nil || n < 0 {
			return nil, errInvalidParams{fmt.Sprintf("accept: hunk %q: want path#index, the index counting from 0 in the file's diff hunks", h)}
		}
		out[h[:i]] = append(out[h[:i]], n)
	}
	return out, nil
}

func (c *conn) sessionMerge(ctx context.Context, p MergeParams) (*AcceptResult, error) {
	res := gitstate.Resolutions{Take: p.Take, ParentHead: p.ParentHead, ChildHead: p.ChildHead}
	for path := range p.Take {
		if err := checkRelPath(path); err != nil {
			return nil, err
		}
	}
	for path, text := range p.Resolutions {
		if err := checkRelPath(path); err != nil {
			return nil, err
		}
		if res.Content == nil {
			res.Content = map[string][]byte{}
		}
		res.Content[path] = []byte(text)
	}
	out, err := c.srv.agents.MergeResolved(ctx, p.ID, res)
	if err != nil {
		return nil, err
	}
	return &AcceptResult{Commit: out.Commit, Files: out.Files}, nil
}

func (c *conn) sessionReject(ctx context.Context, p RejectParams) (*RejectResult, error) {
	hunks, err := parseHunks(p.Hunks)
	if err != nil {
		return nil, err
	}
	for _, f := range p.Files {
		if err := checkRelPath(f); err != nil {
			return nil, err
		}
	}
	commit, files, err := c.srv.agents.Reject(ctx, p.ID, agents.Review{Head: p.Head, Accepted: p.Accepted}, p.Files, hunks)
	if err != nil {
		return nil, err
	}
	return &RejectResult{Commit: commit, Files: files}, nil
}

func (c *conn) sessionConflicts(ctx context.Context, p SessionRef) (*ConflictsResult, error) {
	con, err := c.srv.agents.Conflicts(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	sess, err := c.srv.agents.Get(p.ID)
	if err != nil {
		return nil, err
	}
	out := &ConflictsResult{Child: sess.ID(), Parent: con.Parent, ParentHead: con.ParentHead, ChildHead: con.ChildHead, Files: []ConflictFile{}}
	for _, f := range con.Files {
		cf := ConflictFile{Path: f.Path, BaseMissing: f.Base == nil, OursMissing: f.Ours == nil,
			TheirsMissing: f.Theirs == nil, Binary: f.Binary}
		if !f.Binary {
			cf.Base, cf.Ours, cf.Theirs, cf.Merged = string(f.Base), string(f.Ours), string(f.Theirs), string(f.Merged)
		}
		out.Files = append(out.Files, cf)
	}
	return out, nil
}

func (c *conn) sessionDiscard(ctx context.Context, p DiscardParams) (*DiscardResult, error) {
	res, err := c.srv.agents.Discard(ctx, p.ID, p.Force)
	if err != nil {
		return nil, err
	}
	sess, err := c.srv.agents.Get(p.ID)
	if err != nil {
		return nil, err
	}
	return &DiscardResult{Session: toSession(c.srv.agents.Info(sess)), WorktreeRemoved: res.Removed,
		BranchDeleted: res.Deleted, Archived: res.Archived}, nil
}
