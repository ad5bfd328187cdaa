package eventlog

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

// scanResult describes a log file: how long its valid prefix is and what follows it.
type scanResult struct {
	Records  int    // records in the valid prefix
	LastSeq  uint64 // seq of the last record in the valid prefix
	ValidEnd int64  // byte length of the valid prefix
	Size     int64  // bytes read in total

	// Torn: bytes after ValidEnd that a crash can explain (no valid record follows them).
	Torn bool
	// Corrupt: the first bad line at ValidEnd is followed by a valid record, or a line whose
	// checksum matches is not the record that belongs there.
	Corrupt bool
	BadLine int    // 1-based line number of the first bad line, if Torn or Corrupt
	Reason  string // what is wrong with the first bad line, and what follows it
	Detail  string // Reason prefixed with the line and byte offset
	// ValidAfter counts lines after the first bad one whose checksum matches.
	ValidAfter int
}

// scan reads a log from r and validates every line. It calls fn, if not nil, for each record of the
// valid prefix in order; an error from fn stops the scan and is returned. scan returns an error only
// for I/O failures and fn's errors: damage is described in the result.
func scan(r io.Reader, fn func(Record) error) (scanResult, error) {
	var visit func(Record, int64) error
	if fn != nil {
		visit = func(r Record, _ int64) error { return fn(r) }
	}
	return scanAt(r, position{Seq: 1}, true, visit)
}

// position is where a scan starts: the seq expected at byte offset Off, after Line lines.
// Log.Scan starts at an index entry instead of the beginning of the file.
type position struct {
	Seq  uint64
	Off  int64
	Line int
}

// scanAt is scan for input that starts at position at of a log. fn also gets each record's
// byte offset. Unless retain is set, a record's Data is only valid during the call to fn: Open
// reads every record but keeps none, and copying the payloads was nearly all it allocated.
func scanAt(r io.Reader, at position, retain bool, fn func(Record, int64) error) (scanResult, error) {
	lr := newLineReader(r)
	defer lr.release()
	var (
		res          = scanResult{LastSeq: at.Seq - 1}
		off          = at.Off
		line         = at.Line
		badOff int64 = -1
		types        = typeNames{}
	)
	for {
		b, n, complete, err := lr.next()
		if err != nil {
			return res, err
		}
		if n == 0 {
			break
		}
		line++
		if complete && b != nil {
			b = b[:len(b)-1]
		}
		if b == nil { // longer than lineLimit: no record is that long
			if badOff < 0 {
				badOff, res.BadLine = off, line
				res.Reason = fmt.Sprintf("%d bytes long, over the %d-byte limit", n, lineLimit)
			}
			off += n
			continue
		}
		if badOff >= 0 {
			// Past the first bad line, only look for evidence that it is not a torn tail.
			if _, err := checkCRC(b); err == nil {
				if res.ValidAfter == 0 {
					res.Reason += fmt.Sprintf("; line %d (byte %d) after it has a valid checksum", line, off)
				}
				res.ValidAfter++
			}
			off += n
			continue
		}
		rec, perr := parseLine(b, types)
		switch {
		case perr == nil && !complete:
			perr = torn("last line has no newline")
		case perr == nil && rec.Seq != res.LastSeq+1:
			perr = invalid("seq %d where %d belongs", rec.Seq, res.LastSeq+1)
		}
		if perr != nil {
			badOff, res.BadLine = off, line
			res.Reason = perr.Error()
			if errors.Is(perr, errInvalid) {
				res.Corrupt = true
			}
			off += n
			continue
		}
		if fn != nil {
			if retain {
				rec.Data = bytes.Clone(rec.Data)
			}
			if err := fn(rec, off); err != nil {
				return res, err
			}
		}
		res.Records++
		res.LastSeq = rec.Seq
		off += n
	}
	res.Size = off
	res.ValidEnd = off
	if badOff >= 0 {
		res.ValidEnd = badOff
		if res.ValidAfter > 0 {
			res.Corrupt = true
		}
		res.Torn = !res.Corrupt
		res.Detail = fmt.Sprintf("line %d (byte %d): %s", res.BadLine, res.ValidEnd, res.Reason)
	}
	return res, nil
}

// maxLineBytes bounds the lines scan holds in memory. A longer "line" is not a record (Append
// refuses records over Options.MaxRecordBytes, which cannot exceed this) but typically a run of
// zeros left by a crash or a disk fault; scan skips it without buffering it.
const maxLineBytes = 64 << 20

// lineLimit is the limit readers apply: maxLineBytes, lowered only by the package's tests under
// the race detector (race_test.go), where a line of 64 MiB takes seconds to skip.
var lineLimit = maxLineBytes

// lineReader yields lines of any length, each with its LF when it has one.
type lineReader struct {
	br  *bufio.Reader
	buf []byte
}

var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

func newLineReader(r io.Reader) *lineReader {
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	return &lineReader{br: br}
}

func (lr *lineReader) release() {
	lr.br.Reset(nil)
	readers.Put(lr.br)
	lr.br = nil
}

// next returns the next line with its LF if complete, and its length n in bytes; n is 0 at the
// end of the input. A line over lineLimit comes back as nil with its length. The slice is valid
// until the following call.
func (lr *lineReader) next() (line []byte, n int64, complete bool, err error) {
	b, err := lr.br.ReadSlice('\n')
	if err == nil {
		return b, int64(len(b)), true, nil
	}
	if errors.Is(err, bufio.ErrBufferFull) {
		lr.buf = append(lr.buf[:0], b...)
		n = int64(len(b))
		for errors.Is(err, bufio.ErrBufferFull) {
			b, err = lr.br.ReadSlice('\n')
			n += int64(len(b))
			if lr.buf != nil && len(lr.buf)+len(b) > lineLimit {
				lr.buf = nil // too long: keep counting, stop keeping
			}
			if lr.buf != nil {
				lr.buf = append(lr.buf, b...)
			}
		}
		b = lr.buf
		if err == nil {
			return b, n, true, nil
		}
	} else {
		n = int64(len(b))
	}
	if err == io.EOF {
		if n == 0 {
			return nil, 0, false, nil
		}
		return b, n, false, nil
	}
	return nil, 0, false, err
}
