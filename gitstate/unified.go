package gitstate

import (
	"fmt"
	"strconv"
	"strings"
)

const zeroID = "0000000000000000000000000000000000000000"

// Unified renders the diff as a git-style unified diff with a/ and b/ prefixes that
// `git apply` accepts. Binary files carry full blob ids instead of data, which `git apply`
// resolves in any repository holding those objects (the session's own repository does).
func (d *Diff) Unified() string {
	var b strings.Builder
	for _, f := range d.Files {
		f.writeUnified(&b)
	}
	return b.String()
}

func (f *FileDiff) writeUnified(b *strings.Builder) {
	oldPath, newPath := f.Path, f.Path
	if f.OldPath != "" {
		oldPath = f.OldPath
	}
	fmt.Fprintf(b, "diff --git %s %s\n", quotePath("a/"+oldPath), quotePath("b/"+newPath))
	switch {
	case f.Status == Added:
		fmt.Fprintf(b, "new file mode %s\n", f.NewMode)
	case f.Status == Deleted:
		fmt.Fprintf(b, "deleted file mode %s\n", f.OldMode)
	case f.OldMode != f.NewMode:
		fmt.Fprintf(b, "old mode %s\nnew mode %s\n", f.OldMode, f.NewMode)
	}
	if f.Status == Renamed {
		sim := 100
		if f.OldHash != f.NewHash {
			sim = 90 // informative only; git apply does not check it
		}
		fmt.Fprintf(b, "similarity index %d%%\nrename from %s\nrename to %s\n", sim, quoteBare(oldPath), quoteBare(newPath))
	}
	if f.OldHash == f.NewHash {
		return // a pure rename or mode change
	}
	oldID, newID := or(f.OldHash, zeroID), or(f.NewHash, zeroID)
	if f.OldMode == f.NewMode {
		fmt.Fprintf(b, "index %s..%s %s\n", oldID, newID, f.NewMode)
	} else {
		fmt.Fprintf(b, "index %s..%s\n", oldID, newID)
	}
	oldName, newName := quotePath("a/"+oldPath), quotePath("b/"+newPath)
	if f.Status == Added {
		oldName = "/dev/null"
	}
	if f.Status == Deleted {
		newName = "/dev/null"
	}
	if f.Binary {
		fmt.Fprintf(b, "Binary files %s and %s differ\n", oldName, newName)
		return
	}
	if len(f.Hunks) == 0 {
		return // an empty file added or deleted
	}
	fmt.Fprintf(b, "--- %s\n+++ %s\n", oldName, newName)
	for _, h := range f.Hunks {
		b.WriteString(h.Header)
		b.WriteByte('\n')
		for _, l := range h.Lines {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// quotePath quotes a path the way git does when it holds a quote, backslash, control or
// non-ASCII byte (core.quotePath); other paths are written as they are.
func quotePath(p string) string {
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return cQuote(p)
		}
	}
	return p
}

func quoteBare(p string) string { return quotePath(p) }

func cQuote(p string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 || c >= 0x7f {
				b.WriteString(`\` + strconv.FormatInt(int64(c)+0o1000, 8)[1:])
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
