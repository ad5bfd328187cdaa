package gitstate

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// treeFile is one non-directory entry of a tree, with its slash-separated path.
type treeFile struct {
	path string
	mode filemode.FileMode
	hash plumbing.Hash
}

// listTree returns every file, symlink and gitlink under the tree, depth first in tree order.
// Callers hold the lock.
func (r *Repo) listTree(tree plumbing.Hash, prefix string, out []treeFile) ([]treeFile, error) {
	t, err := object.GetTree(r.git.Storer, tree)
	if err != nil {
		return out, fmt.Errorf("read tree %s (%q): %w", tree, prefix, err)
	}
	for _, e := range t.Entries {
		p := e.Name
		if prefix != "" {
			p = prefix + "/" + e.Name
		}
		if e.Mode == filemode.Dir {
			if out, err = r.listTree(e.Hash, p, out); err != nil {
				return out, err
			}
			continue
		}
		out = append(out, treeFile{path: p, mode: e.Mode, hash: e.Hash})
	}
	return out, nil
}

// checkout writes files into dir (which must be empty) and returns their index entries, stat
// data included. One goroutine reads blobs with read (it alone touches that object store);
// several write files, since creating thousands of small files is syscall-bound and the writers
// overlap that latency.
func checkout(ctx context.Context, read blobReader, dir string, files []treeFile) ([]*index.Entry, error) {
	entries := make([]*index.Entry, len(files))
	made := map[string]bool{"": true, ".": true}
	for i, f := range files {
		entries[i] = &index.Entry{Name: f.path, Hash: f.hash, Mode: f.mode}
		d := path.Dir(f.path)
		if f.mode == filemode.Submodule {
			d = f.path
		}
		if !made[d] {
			if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(d)), 0o777); err != nil {
				return nil, fmt.Errorf("checkout: %w", err)
			}
			for x := d; !made[x]; x = path.Dir(x) {
				made[x] = true
			}
		}
	}

	type job struct {
		i    int
		data []byte
	}
	// Each directory belongs to one writer: creating a file takes its directory's lock, so
	// writers sharing a directory would queue on it. The reader visits directories round-robin
	// so every writer has work.
	nw := max(4, 2*runtime.GOMAXPROCS(0))
	order, owner := interleaveByDir(files)
	queues := make([]chan job, nw)
	errs := make(chan error, 1)
	fail := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	stop := make(chan struct{})
	var once sync.Once
	halt := func() { once.Do(func() { close(stop) }) }
	var wg sync.WaitGroup
	for w := range nw {
		queues[w] = make(chan job, 32)
		wg.Go(func() {
			for j := range queues[w] {
				if err := writeFile(dir, entries[j.i], j.data); err != nil {
					fail(err)
					halt()
				}
			}
		})
	}
	readErr := func() error {
		defer func() {
			for _, q := range queues {
				close(q)
			}
		}()
		for n, i := range order {
			f := files[i]
			if f.mode == filemode.Submodule {
				continue // an empty directory, as git leaves an uninitialised submodule
			}
			if n%256 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			data, err := read(f.hash)
			if err != nil {
				return fmt.Errorf("read %s: %w", f.path, err)
			}
			select {
			case queues[owner[i]%nw] <- job{i, data}:
			case <-stop:
				return nil
			}
		}
		return nil
	}()
	wg.Wait()
	if readErr != nil {
		return nil, fmt.Errorf("checkout: %w", readErr)
	}
	select {
	case err := <-errs:
		return nil, fmt.Errorf("checkout: %w", err)
	default:
	}
	return entries, nil
}

// blobReader returns a blob's content.
type blobReader func(plumbing.Hash) ([]byte, error)

// readBlob returns a blob's content. Callers hold the lock.
func (r *Repo) readBlob(h plumbing.Hash) ([]byte, error) { return readBlobFrom(r.git.Storer, h) }

func readBlobFrom(st storer.EncodedObjectStorer, h plumbing.Hash) ([]byte, error) {
	obj, err := st.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return nil, err
	}
	rd, err := obj.Reader()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	buf := make([]byte, 0, obj.Size())
	w := bytesWriter{&buf}
	if _, err := io.Copy(w, rd); err != nil {
		return nil, err
	}
	return buf, nil
}

// privateReader opens a read-only object store of its own on the repository, for a checkout
// that runs without the Repo's lock. Objects are immutable, and this store is used by one
// goroutine only, so it needs no lock; the shared go-git instance is not touched. close
// releases its pack files.
func (r *Repo) privateReader() (read blobReader, close func()) {
	st := filesystem.NewStorageWithOptions(osfs.New(r.common, osfs.WithBoundOS()),
		cache.NewObjectLRU(32*cache.MiByte), filesystem.Options{MaxOpenDescriptors: 8})
	return func(h plumbing.Hash) ([]byte, error) { return readBlobFrom(st, h) }, func() { st.Close() }
}

type bytesWriter struct{ b *[]byte }

func (w bytesWriter) Write(p []byte) (int, error) { *w.b = append(*w.b, p...); return len(p), nil }

// writeFile creates one checked-out file (or symlink) and records its stat data in e.
func writeFile(dir string, e *index.Entry, data []byte) error {
	p := filepath.Join(dir, filepath.FromSlash(e.Name))
	if e.Mode == filemode.Symlink {
		if err := os.Symlink(string(data), p); err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		fillStat(e, fi)
		return nil
	}
	perm := uint32(0o666)
	if e.Mode == filemode.Executable {
		perm = 0o777
	}
	return createFile(p, data, perm, e)
}

// interleaveByDir orders file indexes round-robin over their directories (first file of each
// directory, then the second, …) and numbers each file's directory.
func interleaveByDir(files []treeFile) (order, dirOf []int) {
	dirOf = make([]int, len(files))
	var groups [][]int
	index := map[string]int{}
	for i, f := range files {
		d := path.Dir(f.path)
		g, ok := index[d]
		if !ok {
			g = len(groups)
			index[d] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
		dirOf[i] = g
	}
	order = make([]int, 0, len(files))
	for round := 0; len(groups) > 0; round++ {
		live := groups[:0]
		for _, g := range groups {
			order = append(order, g[round])
			if round+1 < len(g) {
				live = append(live, g)
			}
		}
		groups = live
	}
	return order, dirOf
}
