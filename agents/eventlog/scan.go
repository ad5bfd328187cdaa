package eventlog

import (
	"bufio"
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
	Detail  string // what is wrong with the first bad line, and what follows it
	// ValidAfter counts lines after the first bad one whose checksum matches.
	ValidAfter int
}

// scan reads a log from r and validates every line. It calls fn, if not nil, for each record of the
// valid prefix in order; an error from fn stops the scan and is returned. scan returns an error only
// for I/O failures and fn's errors: damage is described in the result.
func scan(r io.Reader, fn func(Record) error) (scanResult, error) {
	lr := newLineReader(r)
	defer lr.release()
	var (
		res    scanResult
		off    int64
		line   int
		badOff int64 = -1
	)
	for {
		b, complete, err := lr.next()
		if err != nil {
			return res, err
		}
		if b == nil {
			break
		}
		line++
		n := int64(len(b))
		if complete {
			b = b[:len(b)-1]
		}
		if badOff >= 0 {
			// Past the first bad line, only look for evidence that it is not a torn tail.
			if _, err := checkCRC(b); err == nil {
				if res.ValidAfter == 0 {
					res.Detail += fmt.Sprintf("; line %d at byte %d after it has a valid checksum", line, off)
				}
				res.ValidAfter++
			}
			off += n
			continue
		}
		rec, perr := parseLine(b)
		switch {
		case perr == nil && !complete:
			perr = torn("last line has no newline")
		case perr == nil && rec.Seq != res.LastSeq+1:
			perr = invalid("seq %d where %d belongs", rec.Seq, res.LastSeq+1)
		}
		if perr != nil {
			badOff, res.BadLine = off, line
			res.Detail = fmt.Sprintf("line %d at byte %d: %v", line, off, perr)
			if errors.Is(perr, errInvalid) {
				res.Corrupt = true
			}
			off += n
			continue
		}
		if fn != nil {
			if err := fn(rec); err != nil {
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
	}
	return res, nil
}

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

// next returns the next line and whether it ends in LF, or nil at the end of the input. The slice
// is valid until the following call.
func (lr *lineReader) next() (line []byte, complete bool, err error) {
	b, err := lr.br.ReadSlice('\n')
	if err == nil {
		return b, true, nil
	}
	if errors.Is(err, bufio.ErrBufferFull) {
		lr.buf = append(lr.buf[:0], b...)
		for errors.Is(err, bufio.ErrBufferFull) {
			b, err = lr.br.ReadSlice('\n')
			lr.buf = append(lr.buf, b...)
		}
		b = lr.buf
		if err == nil {
			return b, true, nil
		}
	}
	if err == io.EOF {
		if len(b) == 0 {
			return nil, false, nil
		}
		return b, false, nil
	}
	return nil, false, err
}
