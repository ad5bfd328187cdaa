package gitstate

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// pathChange is one path's change between two trees; a zero Mode marks the absent side.
type pathChange struct {
	fromPath, toPath string
	from, to         object.TreeEntry
}

// readTree parses a tree object's bytes directly: go-git's decoder, which reads entry by entry
// through a buffered reader, was most of the time of a review diff.
func (r *Repo) readTree(h plumbing.Hash) ([]object.TreeEntry, error) {
	return readTreeFrom(r.git.Storer, h)
}

func readTreeFrom(st storer.EncodedObjectStorer, h plumbing.Hash) ([]object.TreeEntry, error) {
	if h.IsZero() {
		return nil, nil
	}
	obj, err := st.EncodedObject(plumbing.TreeObject, h)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", h, err)
	}
	rd, err := obj.Reader()
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(rd)
	rd.Close()
	if err != nil {
		return nil, err
	}
	var out []object.TreeEntry
	for len(data) > 0 {
		sp := bytes.IndexByte(data, ' ')
		nul := bytes.IndexByte(data, 0)
		if sp < 0 || nul < sp || nul+21 > len(data) {
			return nil, fmt.Errorf("tree %s is malformed", h)
		}
		mode, err := strconv.ParseUint(string(data[:sp]), 8, 32)
		if err != nil {
			return nil, fmt.Errorf("tree %s: mode %q: %w", h, data[:sp], err)
		}
		e := object.TreeEntry{Name: string(data[sp+1 : nul]), Mode: filemode.FileMode(mode)}
		copy(e.Hash[:], data[nul+1:nul+21])
		out = append(out, e)
		data = data[nul+21:]
	}
	return out, nil
}

// diffTrees appends the changes from tree a to tree b (either may be zero: empty), descending
// only into subtrees whose hashes differ. Callers hold the lock.
func (r *Repo) diffTrees(ctx context.Context, a, b plumbing.Hash, prefix string, out *[]pathChange) error {
	if a == b {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	ea, err := r.readTree(a)
	if err != nil {
		return err
	}
	eb, err := r.readTree(b)
	if err != nil {
		return err
	}
	ma := make(map[string]object.TreeEntry, len(ea))
	names := make([]string, 0, len(ea)+len(eb))
	for _, e := range ea {
		ma[e.Name] = e
		names = append(names, e.Name)
	}
	mb := make(map[string]object.TreeEntry, len(eb))
	for _, e := range eb {
		mb[e.Name] = e
		if _, ok := ma[e.Name]; !ok {
			names = append(names, e.Name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		x, y := ma[name], mb[name]
		p := name
		if prefix != "" {
			p = prefix + "/" + name
		}
		if x.Hash == y.Hash && x.Mode == y.Mode {
			continue
		}
		xDir, yDir := x.Mode == filemode.Dir, y.Mode == filemode.Dir
		var subA, subB plumbing.Hash
		if xDir {
			subA = x.Hash
			x = object.TreeEntry{}
		}
		if yDir {
			subB = y.Hash
			y = object.TreeEntry{}
		}
		if x.Mode != 0 || y.Mode != 0 {
			*out = append(*out, pathChange{fromPath: p, toPath: p, from: x, to: y})
		}
		if xDir || yDir {
			if err := r.diffTrees(ctx, subA, subB, p, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// renameLimit bounds the deletion×addition pairs compared by content.
const renameLimit = 100 * 100

// detectRenames pairs deletions with additions, as `git diff -M` does: the same blob is a
// rename, and so is content at least half similar (by lines). Callers hold the lock.
func (r *Repo) detectRenames(changes []pathChange) []pathChange {
	var dels, adds []int
	for i, c := range changes {
		switch {
		case c.to.Mode == 0 && c.from.Mode != filemode.Submodule:
			dels = append(dels, i)
		case c.from.Mode == 0 && c.to.Mode != filemode.Submodule:
			adds = append(adds, i)
		}
	}
	if len(dels) == 0 || len(adds) == 0 {
		return changes
	}
	paired := map[int]bool{}
	pair := func(d, a int) {
		changes[a].fromPath, changes[a].from = changes[d].fromPath, changes[d].from
		paired[d] = true
	}
	byHash := map[plumbing.Hash][]int{}
	for _, d := range dels {
		byHash[changes[d].from.Hash] = append(byHash[changes[d].from.Hash], d)
	}
	var restAdds []int
	for _, a := range adds {
		cands := byHash[changes[a].to.Hash]
		best := -1
		for k, d := range cands {
			if !paired[d] && (best < 0 || path.Base(changes[d].fromPath) == path.Base(changes[a].toPath)) {
				best = k
			}
		}
		if best >= 0 {
			pair(cands[best], a)
			continue
		}
		restAdds = append(restAdds, a)
	}
	var restDels []int
	for _, d := range dels {
		if !paired[d] {
			restDels = append(restDels, d)
		}
	}
	if len(restDels) > 0 && len(restAdds) > 0 && len(restDels)*len(restAdds) <= renameLimit {
		type cand struct{ d, a, score int }
		var cands []cand
		content := map[plumbing.Hash][]byte{}
		get := func(h plumbing.Hash) []byte {
			if b, ok := content[h]; ok {
				return b
			}
			b, _ := r.readBlob(h)
			content[h] = b
			return b
		}
		for _, d := range restDels {
			for _, a := range restAdds {
				if s := similarity(get(changes[d].from.Hash), get(changes[a].to.Hash)); s >= 50 {
					cands = append(cands, cand{d, a, s})
				}
			}
		}
		sort.SliceStable(cands, func(i, j int) bool { return cands[i].score > cands[j].score })
		usedAdd := map[int]bool{}
		for _, c := range cands {
			if !paired[c.d] && !usedAdd[c.a] {
				pair(c.d, c.a)
				usedAdd[c.a] = true
			}
		}
	}
	out := changes[:0]
	for i, c := range changes {
		if !paired[i] {
			out = append(out, c)
		}
	}
	return out
}

// similarity scores two contents 0–100 by the bytes of lines they share, over the larger size.
func similarity(a, b []byte) int {
	if len(a) == 0 || len(b) == 0 || isBinary(a) || isBinary(b) {
		return 0
	}
	count := map[string]int{}
	for _, l := range bytes.SplitAfter(a, []byte("\n")) {
		count[string(l)]++
	}
	common := 0
	for _, l := range bytes.SplitAfter(b, []byte("\n")) {
		if count[string(l)] > 0 {
			count[string(l)]--
			common += len(l)
		}
	}
	return common * 100 / max(len(a), len(b))
}
