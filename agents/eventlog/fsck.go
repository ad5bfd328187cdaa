package eventlog

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// CorruptError describes a quarantined log. It matches ErrQuarantined with errors.Is.
type CorruptError struct {
	Path   string
	Line   int   // 1-based line of the first bad record
	Offset int64 // byte offset of the first bad record
	Detail string
}

// Error leaves the path out: callers wrap it with the operation and the path.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("corrupt record at line %d (byte %d): %s; quarantined: `arbor fsck --repair` keeps the valid prefix",
		e.Line, e.Offset, e.Detail)
}

func (e *CorruptError) Unwrap() error { return ErrQuarantined }

func corruptError(path string, res scanResult) *CorruptError {
	return &CorruptError{Path: path, Line: res.BadLine, Offset: res.ValidEnd, Detail: res.Reason}
}

// ReadFile returns the records of the log at path, validated as Open does, without modifying the
// file: a torn tail is left out, a damaged middle is an error matching ErrQuarantined. It may be
// used on a log another process has open; it then sees the records written so far.
func ReadFile(path string) ([]Record, error) {
	var out []Record
	err := ScanFile(path, func(r Record) error {
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ScanFile is ReadFile without holding the records: it calls fn for each record in order, and
// an error from fn stops it and is returned. If the log turns out to be damaged in the middle,
// fn has seen the records before the damage and ScanFile returns an error matching
// ErrQuarantined.
func ScanFile(path string, fn func(Record) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read event log %s: %w", path, err)
	}
	defer f.Close()
	res, err := scan(f, fn)
	if err != nil {
		return fmt.Errorf("read event log %s: %w", path, err)
	}
	if res.Corrupt {
		return fmt.Errorf("read event log %s: %w", path, corruptError(path, res))
	}
	return nil
}

// Report is what `arbor fsck` prints for one log.
type Report struct {
	Path     string `json:"path"`
	Records  int    `json:"records"`  // records in the valid prefix
	LastSeq  uint64 `json:"lastSeq"`  // seq of the last valid record
	TornTail bool   `json:"tornTail"` // a torn tail follows the valid prefix (Open would cut it)
	Corrupt  bool   `json:"corrupt"`  // a damaged record is followed by valid ones (Open refuses the log)
	// CorruptAt is the byte offset where the valid prefix ends when TornTail or Corrupt.
	CorruptAt int64  `json:"corruptAt,omitempty"`
	Detail    string `json:"detail,omitempty"` // what is wrong, empty for a clean log

	Size       int64  `json:"size"`               // file size in bytes
	ValidBytes int64  `json:"validBytes"`         // length of the valid prefix
	Dropped    int    `json:"dropped,omitempty"`  // Repair: lines with a valid checksum cut off with the tail
	Backup     string `json:"backup,omitempty"`   // Repair: where the whole original was copied first
	Repaired   bool   `json:"repaired,omitempty"` // Repair: the file was truncated to its valid prefix
}

// OK reports whether the log needs no repair.
func (r *Report) OK() bool { return !r.TornTail && !r.Corrupt }

func newReport(path string, res scanResult) *Report {
	r := &Report{
		Path: path, Records: res.Records, LastSeq: res.LastSeq,
		TornTail: res.Torn, Corrupt: res.Corrupt, Detail: res.Detail,
		Size: res.Size, ValidBytes: res.ValidEnd,
	}
	if !r.OK() {
		r.CorruptAt = res.ValidEnd
	}
	return r
}

// Check validates the log at path without modifying it. Damage is described in the Report; the
// error is for failures to read. On a log that a daemon has open, a batch being written at that
// moment shows as a torn tail; Repair refuses such a log with ErrLocked.
func Check(path string) (*Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("check event log %s: %w", path, err)
	}
	defer f.Close()
	res, err := scan(f, nil)
	if err != nil {
		return nil, fmt.Errorf("check event log %s: %w", path, err)
	}
	return newReport(path, res), nil
}

// Repair cuts the log at path back to its longest valid prefix. It first copies the whole
// original to path.orig-<time> (named in Report.Backup) and says in Report.Detail what it
// dropped. A clean log is left alone. Repair fails with ErrLocked while the log is open.
func Repair(path string) (*Report, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("repair event log %s: %w", path, err)
	}
	defer f.Close()
	unlock, err := lockFile(f)
	if err != nil {
		return nil, fmt.Errorf("repair event log %s: %w", path, err)
	}
	defer unlock()
	res, err := scan(io.NewSectionReader(f, 0, 1<<62), nil)
	if err != nil {
		return nil, fmt.Errorf("repair event log %s: %w", path, err)
	}
	rep := newReport(path, res)
	if rep.OK() {
		return rep, nil
	}
	rep.Backup, err = copyAside(f, path, "orig", 0, res.Size)
	if err != nil {
		return rep, fmt.Errorf("repair event log %s: %w", path, err)
	}
	if err := f.Truncate(res.ValidEnd); err != nil {
		return rep, fmt.Errorf("repair event log %s: truncate: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return rep, fmt.Errorf("repair event log %s: sync: %w", path, err)
	}
	rep.Repaired = true
	rep.Dropped = res.ValidAfter
	rep.Detail = fmt.Sprintf("%s; kept %d records (%d bytes), dropped %d bytes holding %d lines with valid checksums; original saved as %s",
		res.Detail, res.Records, res.ValidEnd, res.Size-res.ValidEnd, res.ValidAfter, rep.Backup)
	return rep, nil
}

// LogName is the file name of a session's event log; CheckTree looks for it.
const LogName = "events.jsonl"

// CheckTree runs Check on every file named LogName under root, in lexical order: `arbor fsck`
// over a workspace's sessions directory.
func CheckTree(root string) ([]*Report, error) {
	var reps []*Report
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || d.Name() != LogName {
			return nil
		}
		rep, err := Check(path)
		if err != nil {
			return err
		}
		reps = append(reps, rep)
		return nil
	})
	if err != nil {
		return reps, fmt.Errorf("check event logs under %s: %w", root, err)
	}
	return reps, nil
}
