package gitstate

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// rawIndex is a git index (v2/v3) kept as the file's bytes plus entry offsets. A checkpoint of
// one file looks up and replaces one entry and copies the rest as bytes: decoding 20,000 entries
// into structs and encoding them again cost more than the whole `git add && git commit`.
// Optional extensions (cache tree, untracked cache, …) are dropped on rewrite, which git
// allows: they are caches it rebuilds.
type rawIndex struct {
	data    []byte
	version uint32
	offs    []int // start of each entry, in index order
	mtime   time.Time
}

const entryHeader = 62

// loadIndex reads an index file; a missing file is an empty index. Versions other than 2 and 3
// (v4's prefix-compressed names) are decoded with go-git and re-encoded as v2.
func loadIndex(path string) (*rawIndex, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return encodeIndex(nil), nil
	}
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	x, err := parseIndex(data)
	if errors.Is(err, errIndexVersion) {
		var idx index.Index
		if err := index.NewDecoder(bytes.NewReader(data)).Decode(&idx); err != nil {
			return nil, fmt.Errorf("decode index %s: %w", path, err)
		}
		x, err = encodeIndex(idx.Entries), nil
	}
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", path, err)
	}
	x.mtime = fi.ModTime()
	return x, nil
}

var errIndexVersion = errors.New("index version not handled natively")

func parseIndex(data []byte) (*rawIndex, error) {
	if len(data) < 12+20 || string(data[:4]) != "DIRC" {
		return nil, errors.New("not an index file (bad signature)")
	}
	x := &rawIndex{data: data, version: binary.BigEndian.Uint32(data[4:])}
	if x.version != 2 && x.version != 3 {
		return nil, errIndexVersion
	}
	n := int(binary.BigEndian.Uint32(data[8:]))
	if n > (len(data)-32)/entryHeader {
		return nil, fmt.Errorf("index claims %d entries but holds at most %d", n, (len(data)-32)/entryHeader)
	}
	x.offs = make([]int, 0, n)
	off := 12
	for range n {
		if off+entryHeader > len(data)-20 {
			return nil, errors.New("truncated entry")
		}
		x.offs = append(x.offs, off)
		nameOff := off + entryHeader
		if x.flags(off)&0x4000 != 0 {
			nameOff += 2
		}
		if nameOff > len(data)-20 {
			return nil, errors.New("truncated entry")
		}
		nl := int(x.flags(off) & 0xfff)
		if nl == 0xfff {
			nl = bytes.IndexByte(data[nameOff:len(data)-20], 0)
			if nl < 0 {
				return nil, errors.New("unterminated entry name")
			}
		}
		next := off + (nameOff-off+nl+8)&^7
		if next > len(data)-20 {
			return nil, errors.New("entry runs past the end of the index")
		}
		off = next
	}
	// Mandatory (lower-case) extensions change what the entries mean: refuse rather than drop.
	for e := off; e+8 <= len(data)-20; {
		sig := data[e : e+4]
		if sig[0] >= 'a' && sig[0] <= 'z' {
			return nil, fmt.Errorf("index uses extension %q (split or sparse index), which Arbor does not support in session worktrees", sig)
		}
		e += 8 + int(binary.BigEndian.Uint32(data[e+4:]))
	}
	return x, nil
}

func (x *rawIndex) flags(off int) uint16 { return binary.BigEndian.Uint16(x.data[off+60:]) }

func (x *rawIndex) len() int { return len(x.offs) }

func (x *rawIndex) nameBytes(i int) []byte {
	off := x.offs[i]
	nameOff := off + entryHeader
	if x.flags(off)&0x4000 != 0 {
		nameOff += 2
	}
	nl := int(x.flags(off) & 0xfff)
	if nl == 0xfff {
		nl = bytes.IndexByte(x.data[nameOff:], 0)
	}
	return x.data[nameOff : nameOff+nl]
}

func (x *rawIndex) name(i int) string { return string(x.nameBytes(i)) }

func (x *rawIndex) stage(i int) index.Stage { return index.Stage(x.flags(x.offs[i]) >> 12 & 3) }

// skipWorktree reports the sparse-checkout bit: the file is absent from disk on purpose.
func (x *rawIndex) skipWorktree(i int) bool {
	off := x.offs[i]
	return x.flags(off)&0x4000 != 0 && binary.BigEndian.Uint16(x.data[off+entryHeader:])&0x4000 != 0
}

// search returns the first entry whose name is >= name.
func (x *rawIndex) search(name string) int {
	return sort.Search(len(x.offs), func(i int) bool { return string(x.nameBytes(i)) >= name })
}

// get returns the stage-0 entry for name, or nil.
func (x *rawIndex) get(name string) *index.Entry {
	i := x.search(name)
	if i < len(x.offs) && string(x.nameBytes(i)) == name && x.stage(i) == 0 {
		return x.entry(i)
	}
	return nil
}

// namesUnder lists the stage-0 names at or below scope ("" is everything) that should be on
// disk (sparse-checkout entries are not). Names such as
// "scope.txt" sort between "scope" and "scope/", so the directory range is searched on its own.
func (x *rawIndex) namesUnder(scope string) []string {
	var out []string
	add := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if x.stage(i) == 0 && !x.skipWorktree(i) {
				out = append(out, x.name(i))
			}
		}
	}
	if scope == "" {
		add(0, len(x.offs))
		return out
	}
	if i := x.search(scope); i < len(x.offs) && string(x.nameBytes(i)) == scope {
		add(i, i+1)
	}
	add(x.search(scope+"/"), x.search(scope+"0")) // '0' is the byte after '/'
	return out
}

// namesSkipped lists the sparse-checkout (skip-worktree) names at or below scope.
func (x *rawIndex) namesSkipped(scope string) []string {
	var out []string
	lo, hi := 0, len(x.offs)
	if scope != "" {
		lo, hi = x.search(scope), x.search(scope+"0")
	}
	for i := lo; i < hi; i++ {
		if x.skipWorktree(i) && under(x.name(i), scope) {
			out = append(out, x.name(i))
		}
	}
	return out
}

// hasUnder reports whether any entry lies below directory dir.
func (x *rawIndex) hasUnder(dir string) bool {
	return x.search(dir+"/") < x.search(dir+"0")
}

// hash is entry i's object id.
func (x *rawIndex) hash(i int) plumbing.Hash {
	var h plumbing.Hash
	copy(h[:], x.data[x.offs[i]+40:])
	return h
}

func (x *rawIndex) entry(i int) *index.Entry {
	d := x.data[x.offs[i]:]
	u := func(o int) uint32 { return binary.BigEndian.Uint32(d[o:]) }
	e := &index.Entry{
		CreatedAt:  time.Unix(int64(u(0)), int64(u(4))),
		ModifiedAt: time.Unix(int64(u(8)), int64(u(12))),
		Dev:        u(16), Inode: u(20), Mode: filemode.FileMode(u(24)),
		UID: u(28), GID: u(32), Size: u(36),
		Name:  x.name(i),
		Stage: x.stage(i),
	}
	copy(e.Hash[:], d[40:60])
	return e
}

// appendEntry encodes e as a v2 entry.
func appendEntry(b []byte, e *index.Entry) []byte {
	var h [entryHeader]byte
	p := func(o int, v uint32) { binary.BigEndian.PutUint32(h[o:], v) }
	p(0, uint32(e.CreatedAt.Unix()))
	p(4, uint32(e.CreatedAt.Nanosecond()))
	p(8, uint32(e.ModifiedAt.Unix()))
	p(12, uint32(e.ModifiedAt.Nanosecond()))
	p(16, e.Dev)
	p(20, e.Inode)
	p(24, uint32(e.Mode))
	p(28, e.UID)
	p(32, e.GID)
	p(36, e.Size)
	copy(h[40:60], e.Hash[:])
	binary.BigEndian.PutUint16(h[60:], uint16(min(len(e.Name), 0xfff))|uint16(e.Stage&3)<<12)
	b = append(b, h[:]...)
	b = append(b, e.Name...)
	pad := (entryHeader+len(e.Name)+8)&^7 - entryHeader - len(e.Name)
	return append(b, make([]byte, pad)...)
}

// encodeIndex builds a v2 index of entries (sorted here).
func encodeIndex(entries []*index.Entry) *rawIndex {
	sort.Slice(entries, func(i, j int) bool {
		if entries[i].Name != entries[j].Name {
			return entries[i].Name < entries[j].Name
		}
		return entries[i].Stage < entries[j].Stage
	})
	b := make([]byte, 12, 12+len(entries)*100+20)
	copy(b, "DIRC")
	binary.BigEndian.PutUint32(b[4:], 2)
	binary.BigEndian.PutUint32(b[8:], uint32(len(entries)))
	for _, e := range entries {
		b = appendEntry(b, e)
	}
	sum := sha1.Sum(b)
	x, err := parseIndex(append(b, sum[:]...))
	if err != nil {
		panic("gitstate: encodeIndex produced an unreadable index: " + err.Error())
	}
	return x
}

// with returns the index with repl applied: each named path's entries (all stages) replaced by
// the given stage-0 entry, or removed when it is nil. Untouched entries are copied as bytes.
func (x *rawIndex) with(repl map[string]*index.Entry) []byte {
	names := make([]string, 0, len(repl))
	for n := range repl {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]byte, 12, len(x.data)+len(repl)*100)
	copy(out, "DIRC")
	count := 0
	version := x.version
	i := 0
	copyUpTo := func(stop int) { // copy entries [i, stop) verbatim
		if i < stop {
			var end int
			if stop < len(x.offs) {
				end = x.offs[stop]
			} else {
				end = x.entriesEnd()
			}
			out = append(out, x.data[x.offs[i]:end]...)
			count += stop - i
			i = stop
		}
	}
	for _, n := range names {
		copyUpTo(max(i, x.search(n)))
		for i < len(x.offs) && string(x.nameBytes(i)) == n {
			i++ // drop every stage of n
		}
		if e := repl[n]; e != nil {
			out = appendEntry(out, e)
			count++
		}
	}
	copyUpTo(len(x.offs))
	binary.BigEndian.PutUint32(out[4:], version)
	binary.BigEndian.PutUint32(out[8:], uint32(count))
	sum := sha1.Sum(out)
	return append(out, sum[:]...)
}

// entriesEnd is the offset just past the last entry.
func (x *rawIndex) entriesEnd() int {
	if len(x.offs) == 0 {
		return 12
	}
	last := len(x.offs) - 1
	off := x.offs[last]
	nameOff := entryHeader
	if x.flags(off)&0x4000 != 0 {
		nameOff += 2
	}
	return off + (nameOff+len(x.nameBytes(last))+8)&^7
}

// writeIndexBytes writes an index the way git does: into <path>.lock, created exclusively so
// a concurrent git command fails instead of racing, then renamed over path.
func writeIndexBytes(path string, data []byte) error {
	lock := path + ".lock"
	f, err := os.OpenFile(lock, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("index is locked by another git process (%s exists; remove it if no git command is running)", lock)
	}
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<16)
	_, err = w.Write(data)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(lock, path)
	}
	if err != nil {
		os.Remove(lock)
		return fmt.Errorf("write index %s: %w", path, err)
	}
	return nil
}
