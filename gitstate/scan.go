package gitstate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// stageMerged is an index entry's stage outside a conflict. (go-git's index.Merged is 1, which
// is the merge base's stage, not this.)
const stageMerged index.Stage = 0

// scan compares part of a worktree on disk with its HEAD tree and its index, the way
// `git add -A <scopes>` would see it. Files whose stat data matches their index entry are
// trusted without reading; others are hashed and, when new, written as blobs.
type scan struct {
	r    *Repo
	dir  string
	tree *object.Tree // HEAD tree
	x    *rawIndex
	ign  *ignorer

	// For a full scan every entry is visited, so maps beat binary searches.
	idx     map[string]*index.Entry
	tracked map[string]bool // every directory holding an index entry

	// Results.
	changes map[string]*treeFile    // path → content on disk; nil means deleted (vs HEAD)
	entries map[string]*index.Entry // index entries to replace (nil value: remove)
	nested  []string                // directories holding a repository of their own (not committed)
	// attrFiles are the .gitattributes files met on disk, which may send the worktree
	// through the git CLI (see [Repo.newAttrsReason]).
	attrFiles []string
}

func (r *Repo) newScan(dir string, exclude []string, tree *object.Tree, x *rawIndex, full bool) *scan {
	s := &scan{r: r, dir: dir, tree: tree, x: x, ign: r.newIgnorer(dir),
		changes: map[string]*treeFile{}, entries: map[string]*index.Entry{}}
	if len(exclude) > 0 {
		s.ign.extra = map[string]bool{}
		for _, p := range exclude {
			s.ign.extra[p] = true
		}
	}
	if full {
		s.idx = make(map[string]*index.Entry, x.len())
		s.tracked = map[string]bool{}
		for i := range x.len() {
			if x.stage(i) != stageMerged {
				continue
			}
			e := x.entry(i)
			s.idx[e.Name] = e
			for d := path.Dir(e.Name); d != "." && !s.tracked[d]; d = path.Dir(d) {
				s.tracked[d] = true
			}
		}
	}
	return s
}

func (s *scan) lookup(p string) *index.Entry {
	if s.idx != nil {
		return s.idx[p]
	}
	return s.x.get(p)
}

func (s *scan) isTracked(dir string) bool {
	if s.tracked != nil {
		return s.tracked[dir]
	}
	return s.x.hasUnder(dir)
}

// dirty reports whether the index needs rewriting.
func (s *scan) dirty() bool { return len(s.entries) > 0 }

// run scans each scope ("" is the whole worktree; scopes must not nest).
func (s *scan) run(ctx context.Context, scopes []string) error {
	for _, sc := range scopes {
		head := map[string]treeFile{}
		if err := s.headUnder(sc, head); err != nil {
			return err
		}
		seen := map[string]bool{}
		if err := s.walk(ctx, sc, seen); err != nil {
			return err
		}
		skipped := map[string]bool{} // in the index, not on disk, not deleted
		for _, p := range s.x.namesSkipped(sc) {
			skipped[p] = true
		}
		for p := range head {
			if !seen[p] && !skipped[p] {
				s.changes[p] = nil
			}
		}
		for _, p := range s.x.namesUnder(sc) {
			if !seen[p] {
				s.entries[p] = nil
			}
		}
		for p, tf := range s.changes {
			if tf == nil || !under(p, sc) {
				continue
			}
			if h, ok := head[p]; ok && h.hash == tf.hash && h.mode == tf.mode {
				delete(s.changes, p)
			}
		}
	}
	return nil
}

// headUnder collects the HEAD tree's files at or below scope.
func (s *scan) headUnder(scope string, out map[string]treeFile) error {
	if scope == "" {
		files, err := s.r.listTree(s.tree.Hash, "", nil)
		for _, f := range files {
			out[f.path] = f
		}
		return err
	}
	e, err := s.tree.FindEntry(scope)
	if errors.Is(err, object.ErrEntryNotFound) || errors.Is(err, object.ErrDirectoryNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up %s in HEAD: %w", scope, err)
	}
	if e.Mode != filemode.Dir {
		out[scope] = treeFile{path: scope, mode: e.Mode, hash: e.Hash}
		return nil
	}
	files, err := s.r.listTree(e.Hash, scope, nil)
	for _, f := range files {
		out[f.path] = f
	}
	return err
}

// walk visits the disk at or below p. Below the worktree's own directory every name is
// opened through its parent's descriptor without following symlinks (openDirBeneath,
// dirStater): the code running in the worktree can swap a file or directory for a link to a
// file of the host's while the scan runs, and what the scan reads is committed, where that
// code can read it back.
func (s *scan) walk(ctx context.Context, p string, seen map[string]bool) error {
	abs := filepath.Join(s.dir, filepath.FromSlash(p))
	if p == "" {
		fi, err := os.Lstat(abs)
		if err != nil {
			return fmt.Errorf("scan %s: %w", abs, err)
		}
		return s.visit(ctx, nil, p, abs, fi, seen)
	}
	dir, name := path.Split(p)
	parent, err := openDirBeneath(s.dir, path.Clean("/" + dir)[1:])
	if gone(err) {
		return nil // not there, or below a symlink: the scope of the symlink's own path holds it
	}
	if err != nil {
		return fmt.Errorf("scan %s: %w", abs, err)
	}
	defer parent.close()
	fi, err := parent.lstat(name)
	if gone(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("scan %s: %w", abs, err)
	}
	return s.visit(ctx, parent, p, abs, fi, seen)
}

// swapped explains an open the scan's lstat said would work that found a symlink or another
// kind of file: something in the worktree replaced it meanwhile.
func swapped(err error) error {
	if errors.Is(err, syscallELOOP) || errors.Is(err, syscallENOTDIR) || errors.Is(err, errNotRegular) {
		return fmt.Errorf("it was replaced while the checkpoint read it, and is not read through a link; "+
			"the next checkpoint takes what is there then: %w", err)
	}
	return err
}

// gone reports an error meaning nothing is at a path: it does not exist, a component above it
// is not a directory, or one is a symlink.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscallENOTDIR) || errors.Is(err, syscallELOOP)
}

// visit visits p, which parent (nil for the worktree's own directory) holds.
func (s *scan) visit(ctx context.Context, parent *dirStater, p, abs string, fi os.FileInfo, seen map[string]bool) error {
	if !fi.IsDir() {
		if !fi.Mode().IsRegular() && fi.Mode()&fs.ModeSymlink == 0 {
			return nil // sockets, fifos and devices are not content
		}
		if s.lookup(p) == nil && s.ign.ignored(p, false) {
			return nil
		}
		seen[p] = true
		if isAttrFile(p) {
			s.attrFiles = append(s.attrFiles, p)
		}
		return s.file(parent, p, abs, fi)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if p != "" {
		if e := s.lookup(p); e != nil && e.Mode == filemode.Submodule {
			seen[p] = true // a gitlink: its commit changes only through git itself
			s.changes[p] = &treeFile{path: p, mode: e.Mode, hash: e.Hash}
			return nil
		}
		if !s.isTracked(p) && s.ign.ignored(p, true) {
			return nil
		}
	}
	var ds *dirStater
	var err error
	if s.r.beforeScanOpen != nil {
		s.r.beforeScanOpen(p)
	}
	if parent == nil {
		ds, err = openDirStater(abs)
	} else {
		ds, err = parent.openDir(path.Base(p))
	}
	if err != nil {
		return fmt.Errorf("scan %s: %w", abs, swapped(err))
	}
	defer ds.close()
	if p != "" {
		if _, err := ds.lstat(".git"); err == nil {
			s.nested = append(s.nested, p)
			return nil // a nested repository, which `git add -A` would not take in either
		}
	}
	s.ign.loadFrom(p, ds)
	ents, err := ds.readDir()
	if err != nil {
		return fmt.Errorf("scan %s: %w", abs, err)
	}
	infos, errs := statAll(ds, ents)
	for i, de := range ents {
		name := de.Name()
		if p == "" && name == ".git" {
			continue
		}
		child := name
		if p != "" {
			child = p + "/" + name
		}
		cfi, err := infos[i], errs[i]
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted while we looked
		}
		if err != nil {
			return fmt.Errorf("scan %s: %w", abs, err)
		}
		if err := s.visit(ctx, ds, child, abs+string(filepath.Separator)+name, cfi, seen); err != nil {
			return err
		}
	}
	return nil
}

// file records the state of one regular file or symlink.
func (s *scan) file(parent *dirStater, p, abs string, fi os.FileInfo) error {
	mode := filemode.Regular
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		mode = filemode.Symlink
	case fi.Mode()&0o111 != 0:
		mode = filemode.Executable
	}
	e := s.lookup(p)
	if e != nil && e.Mode == mode && statMatches(e, fi) && e.ModifiedAt.Before(s.x.mtime) {
		s.changes[p] = &treeFile{path: p, mode: mode, hash: e.Hash}
		return nil
	}
	var data []byte
	var err error
	if s.r.beforeScanOpen != nil {
		s.r.beforeScanOpen(p)
	}
	if mode == filemode.Symlink {
		var target string
		target, err = parent.readlink(path.Base(p))
		data = []byte(target)
	} else {
		data, err = parent.readFile(path.Base(p))
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", abs, swapped(err))
	}
	h, err := s.r.writeBlob(data)
	if err != nil {
		return fmt.Errorf("store %s: %w", p, err)
	}
	ne := &index.Entry{Name: p, Hash: h, Mode: mode}
	fillStat(ne, fi)
	s.entries[p] = ne
	s.changes[p] = &treeFile{path: p, mode: mode, hash: h}
	return nil
}

// writeBlob stores data as a blob unless the repository has it already. Callers hold the lock.
func (r *Repo) writeBlob(data []byte) (plumbing.Hash, error) {
	h := plumbing.ComputeHash(plumbing.BlobObject, data)
	if r.git.Storer.HasEncodedObject(h) == nil {
		return h, nil
	}
	obj := r.git.Storer.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	obj.SetSize(int64(len(data)))
	w, err := obj.Writer()
	if err != nil {
		return h, err
	}
	if _, err := w.Write(data); err != nil {
		return h, err
	}
	if err := w.Close(); err != nil {
		return h, err
	}
	return r.git.Storer.SetEncodedObject(obj)
}

// statAll lstats a directory's entries, in parallel when there are many: stat calls are most
// of a full scan and independent of each other.
func statAll(ds *dirStater, ents []fs.DirEntry) ([]os.FileInfo, []error) {
	infos, errs := make([]os.FileInfo, len(ents)), make([]error, len(ents))
	workers := min(runtime.GOMAXPROCS(0), len(ents)/16)
	if workers < 2 {
		for i, de := range ents {
			infos[i], errs[i] = ds.lstat(de.Name())
		}
		return infos, errs
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(ents); i += workers {
				infos[i], errs[i] = ds.lstat(ents[i].Name())
			}
		})
	}
	wg.Wait()
	return infos, errs
}
