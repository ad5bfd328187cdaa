package gitstate

import (
	"fmt"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// buildTree returns the tree that is base with changes applied (path → new content, nil to
// delete). Only the trees on the paths of changes are read and rewritten, so the cost follows
// the size of the change, not of the repository. Empty directories disappear, as in git.
// Callers hold the lock.
func (r *Repo) buildTree(base plumbing.Hash, changes map[string]*treeFile) (plumbing.Hash, error) {
	var entries []object.TreeEntry
	if !base.IsZero() {
		t, err := object.GetTree(r.git.Storer, base)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("read tree %s: %w", base, err)
		}
		entries = append(entries, t.Entries...)
	}
	byName := make(map[string]int, len(entries))
	for i, e := range entries {
		byName[e.Name] = i
	}
	direct := map[string]*treeFile{}
	sub := map[string]map[string]*treeFile{}
	for p, tf := range changes {
		first, rest, nested := strings.Cut(p, "/")
		if !nested {
			direct[first] = tf
			continue
		}
		if sub[first] == nil {
			sub[first] = map[string]*treeFile{}
		}
		sub[first][rest] = tf
	}
	removed := map[string]bool{}
	for name, tf := range direct {
		i, ok := byName[name]
		switch {
		case tf == nil && ok && entries[i].Mode != filemode.Dir:
			removed[name] = true
		case tf == nil:
		case ok:
			entries[i] = object.TreeEntry{Name: name, Mode: tf.mode, Hash: tf.hash}
		default:
			byName[name] = len(entries)
			entries = append(entries, object.TreeEntry{Name: name, Mode: tf.mode, Hash: tf.hash})
		}
	}
	for name, ch := range sub {
		var subBase plumbing.Hash
		i, ok := byName[name]
		if direct[name] != nil {
			// A file replaced the directory: only deletions may remain below it.
			for p, tf := range ch {
				if tf != nil {
					return plumbing.ZeroHash, fmt.Errorf("path %s is both a file and a directory (%s/%s)", name, name, p)
				}
			}
			continue
		}
		if ok && entries[i].Mode == filemode.Dir {
			subBase = entries[i].Hash
		}
		h, err := r.buildTree(subBase, ch)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		switch {
		case h.IsZero():
			if ok && entries[i].Mode == filemode.Dir {
				removed[name] = true
			}
		case ok:
			entries[i] = object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h}
			delete(removed, name) // a file became this directory
		default:
			byName[name] = len(entries)
			entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
		}
	}
	kept := entries[:0]
	for _, e := range entries {
		if !removed[e.Name] {
			kept = append(kept, e)
		}
	}
	if len(kept) == 0 {
		return plumbing.ZeroHash, nil
	}
	return r.writeTree(kept)
}

// writeTree stores a tree object, sorted in git's order (a directory sorts as if named "dir/").
func (r *Repo) writeTree(entries []object.TreeEntry) (plumbing.Hash, error) {
	sortKey := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	sort.Slice(entries, func(i, j int) bool { return sortKey(entries[i]) < sortKey(entries[j]) })
	obj := r.git.Storer.NewEncodedObject()
	if err := (&object.Tree{Entries: entries}).Encode(obj); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("encode tree: %w", err)
	}
	if r.git.Storer.HasEncodedObject(obj.Hash()) == nil {
		return obj.Hash(), nil
	}
	h, err := r.git.Storer.SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("store tree: %w", err)
	}
	return h, nil
}
