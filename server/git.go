package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/arborhq/arbor/gitstate"
)

func (c *conn) sessionDiff(ctx context.Context, p DiffParams) (*DiffResult, error) {
	var d *gitstate.Diff
	var err error
	switch {
	case p.Turn != 0:
		d, err = c.srv.agents.DiffTurn(ctx, p.ID, p.Turn)
	case p.All:
		d, err = c.srv.agents.DiffAll(ctx, p.ID)
	default:
		d, err = c.srv.agents.Diff(ctx, p.ID)
	}
	if err != nil {
		return nil, err
	}
	res := toDiffResult(d)
	if p.Turn == 0 && !p.All {
		if res.Accepted, err = c.srv.agents.ReviewBase(ctx, p.ID); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func toDiffResult(d *gitstate.Diff) *DiffResult {
	res := &DiffResult{Base: d.Base, Head: d.Head, Patch: d.Unified(), Files: make([]FileDiff, 0, len(d.Files))}
	for _, f := range d.Files {
		fd := FileDiff{Path: f.Path, OldPath: f.OldPath, Status: f.Status, Additions: f.Additions, Deletions: f.Deletions, Binary: f.Binary}
		for _, h := range f.Hunks {
			fd.Hunks = append(fd.Hunks, Hunk{OldStart: h.OldStart, OldLines: h.OldLines, NewStart: h.NewStart, NewLines: h.NewLines, Header: h.Header, Lines: h.Lines})
		}
		res.Files = append(res.Files, fd)
	}
	return res
}

func (c *conn) sessionFileAt(ctx context.Context, p FileAtParams) (*FileAtResult, error) {
	if p.Side != "base" && p.Side != "head" {
		return nil, errInvalidParams{`fileAt: side must be "base" or "head", got "` + p.Side + `"`}
	}
	if err := checkRelPath(p.Path); err != nil {
		return nil, err
	}
	data, err := c.srv.agents.FileAt(ctx, p.ID, p.Path, p.Side)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, gitstate.ErrNotFound) {
		return &FileAtResult{Missing: true}, nil
	}
	if err != nil {
		return nil, err
	}
	if p.MaxBytes > 0 && len(data) > p.MaxBytes {
		return &FileAtResult{TooLarge: true, Size: len(data)}, nil
	}
	return &FileAtResult{Content: string(data)}, nil
}

// checkRelPath refuses a file path that is not relative to the repository root (absolute,
// empty, or climbing out with ..) as bad input, before it reaches git.
func checkRelPath(file string) error {
	p := path.Clean(filepath.ToSlash(file))
	if file == "" || p == "." || path.IsAbs(p) || p == ".." || strings.HasPrefix(p, "../") {
		return errInvalidParams{fmt.Sprintf("path %q: want a file path relative to the repository root", clip(file, maxEcho))}
	}
	return nil
}
