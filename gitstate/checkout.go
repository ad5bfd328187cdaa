package gitstate

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"sync"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/index"
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
	return listTreeFrom(r.git.Storer, tree, prefix, out)
}

func listTreeFrom(st storer.EncodedObjectStorer, tree plumbing.Hash, prefix string, out []treeFile) ([]treeFile, error) {
	entries, err := readTreeFrom(st, tree)
	if err != nil {
		return out, fmt.Errorf("%q: %w", prefix, err)
	}
	for _, e := range entries {
		p := e.Name
		if prefix != "" {
			p = prefix + "/" + e.Name
		}
		if e.Mode == filemode.Dir {
			if out, err = listTreeFrom(st, e.Hash, p, out); err != nil {
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
func checkout(ctx context.Context, read blobReader, common, dir string, files []treeFile) ([]*index.Entry, error) {
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

	// The reader takes blobs in pack order, so each delta's base was usually just read and
	// is still in the delta-base cache (in path order the same chains were rebuilt again and
	// again), and hands them to the writers in batches: a channel handoff per file cost more
	// in futex wake-ups and spinning than the file writes themselves.
	type batch struct {
		idx  []int
		data [][]byte
	}
	nw := max(2, runtime.GOMAXPROCS(0))
	order := packOrder(common, files)
	queue := make(chan batch, 2*nw)
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
	for range nw {
		wg.Go(func() {
			for b := range queue {
				for k, i := range b.idx {
					if err := writeFile(dir, entries[i], b.data[k]); err != nil {
						fail(err)
						halt()
						break
					}
				}
			}
		})
	}
	readErr := func() error {
		defer close(queue)
		for len(order) > 0 {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			n := min(len(order), batchSize)
			b := batch{idx: order[:n], data: make([][]byte, n)}
			order = order[n:]
			for k, i := range b.idx {
				data, err := read(files[i].hash)
				if err != nil {
					return fmt.Errorf("read %s: %w", files[i].path, err)
				}
				b.data[k] = data
			}
			select {
			case queue <- b:
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
func (r *Repo) privateReader() (st *filesystem.Storage, close func()) {
	st = filesystem.NewStorageWithOptions(osfs.New(r.common, osfs.WithBoundOS()),
		cache.NewObjectLRU(32*cache.MiByte), filesystem.Options{MaxOpenDescriptors: 8})
	return st, func() { st.Close() }
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

// batchSize bounds the files handed to a writer at once.
const batchSize = 64

// packOrder returns the indexes of files (gitlinks left out) ordered by where their blobs lie
// in the repository's packs; loose objects come last, in path order.
func packOrder(common string, files []treeFile) []int {
	type key struct {
		pack int
		off  int64
	}
	keys := make([]key, len(files))
	for i := range keys {
		keys[i] = key{math.MaxInt, int64(i)}
	}
	idxs, _ := filepath.Glob(filepath.Join(common, "objects", "pack", "*.idx"))
	sort.Strings(idxs)
	for p, name := range idxs {
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		mi := idxfile.NewMemoryIndex()
		err = idxfile.NewDecoder(bufio.NewReader(f)).Decode(mi)
		f.Close()
		if err != nil {
			continue
		}
		for i, fl := range files {
			if keys[i].pack != math.MaxInt {
				continue
			}
			if off, err := mi.FindOffset(fl.hash); err == nil {
				keys[i] = key{p, off}
			}
		}
	}
	order := make([]int, 0, len(files))
	for i, f := range files {
		if f.mode != filemode.Submodule {
			order = append(order, i)
		}
	}
	sort.Slice(order, func(a, b int) bool {
		ka, kb := keys[order[a]], keys[order[b]]
		if ka.pack != kb.pack {
			return ka.pack < kb.pack
		}
		return ka.off < kb.off
	})
	return order
}
