package eventlog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"sort"
	"sync"
	"syscall"
	"time"
)

var (
	// ErrQuarantined marks a log with a damaged record followed by valid ones. Open refuses such a
	// log and changes nothing; `arbor fsck --repair` ([Repair]) is the way out.
	ErrQuarantined = errors.New("event log quarantined")
	// ErrClosed is returned by operations on a closed Log.
	ErrClosed = errors.New("event log closed")
	// ErrTooLarge is returned by Append for a record over Options.MaxRecordBytes.
	ErrTooLarge = errors.New("event record too large")
	// ErrLocked is returned by Open and Repair when another process holds the log open.
	ErrLocked = errors.New("event log locked")
)

// DefaultMaxRecordBytes is the default for Options.MaxRecordBytes.
const DefaultMaxRecordBytes = 4 << 20

// Options configure Open. The zero value is ready to use.
type Options struct {
	// Logger receives recovery notices (torn tails copied aside). Nil discards them.
	Logger *slog.Logger
	// MaxRecordBytes bounds one line on disk, checksum included. Append refuses larger records
	// with ErrTooLarge. Zero means DefaultMaxRecordBytes; at most 64 MiB, the longest line a
	// reader accepts whatever the options.
	MaxRecordBytes int
	// OnDurable, if set, is called with every batch of records once it is durable, in seq
	// order, before their appends return; one batch at a time. It must not block or append.
	// This is how an owner tells listeners of new records in the order the log gave them
	// seqs, without a lock of its own around Append.
	OnDurable func([]Record)
}

// Validate reports whether the options make sense.
func (o Options) Validate() error {
	if o.MaxRecordBytes < 0 || o.MaxRecordBytes > maxLineBytes {
		return fmt.Errorf("eventlog options: MaxRecordBytes %d is outside 0..%d", o.MaxRecordBytes, maxLineBytes)
	}
	return nil
}

// Log is an open event log. Its methods are safe for concurrent use.
type Log struct {
	path   string
	logger *slog.Logger
	max    int
	// onDurable is Options.OnDurable.
	onDurable func([]Record)
	f         *os.File
	unlock    func() error

	mu      sync.Mutex
	closed  bool
	nextSeq uint64     // seq of the next Append
	pending *batch     // records waiting for the next write+fsync
	durable uint64     // last seq known to be on disk
	end     int64      // file length covering exactly the durable records
	failed  error      // sticky: after a failed fsync (or a write not undone) nothing more is acknowledged
	index   []position // every indexStride-th durable record, so reads can start mid-file

	// writing is true while a goroutine writes batches; pending != nil implies writing. The
	// writer is the Append that found no writer, or a goroutine it hands over to.
	writing bool
	writers sync.WaitGroup // Close waits for the writer

	fileMu sync.RWMutex // readers hold it shared so Close does not close the file under them

	subs subscribers

	testHookFlush func(records int) // called by the writer before each write
	testHookSync  func()            // called by the writer between a write and its fsync
}

// indexStride is how many records lie between index entries: reads from a seq scan at most this
// many records before the first they return.
const indexStride = 512

// batch is a group of appends written with one write and made durable with one fsync.
type batch struct {
	buf  []byte
	recs []Record
	offs []int64 // offset of each record's line in buf
	// written closes once buf is in the file (a process crash no longer loses it), or the
	// write failed (werr); done once it is durable, or it failed (err).
	written, done chan struct{}
	werr, err     error
}

func newBatch() *batch { return &batch{written: make(chan struct{}), done: make(chan struct{})} }

// Open opens the log at path, creating it and its directory if missing. It recovers a torn tail
// (copied aside to path.torn-<time>, then truncated) and refuses a log whose middle is damaged with
// an error matching ErrQuarantined. One process at a time may hold a log open.
func Open(path string, opts Options) (*Log, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	l := &Log{
		path:      path,
		logger:    opts.Logger,
		max:       opts.MaxRecordBytes,
		onDurable: opts.OnDurable,
	}
	if l.logger == nil {
		l.logger = slog.New(slog.DiscardHandler)
	}
	if l.max == 0 {
		l.max = DefaultMaxRecordBytes
	}
	f, err := createFile(path)
	if err != nil {
		return nil, fmt.Errorf("open event log %s: %w", path, err)
	}
	unlock, err := lockFile(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open event log %s: %w", path, err)
	}
	l.f, l.unlock = f, unlock
	if err := l.recover(); err != nil {
		unlock()
		f.Close()
		return nil, err
	}
	l.nextSeq = l.durable + 1
	return l, nil
}

// recover validates the file, cuts a torn tail and positions the file at the end of the valid
// prefix.
func (l *Log) recover() error {
	res, err := scanAt(io.NewSectionReader(l.f, 0, 1<<62), position{Seq: 1}, false, func(r Record, off int64) error {
		l.indexRecord(r.Seq, off)
		return nil
	})
	if err != nil {
		return fmt.Errorf("open event log %s: read: %w", l.path, err)
	}
	if res.Corrupt {
		return fmt.Errorf("open event log %s: %w", l.path, corruptError(l.path, res))
	}
	removeStaleTemps(l.path)
	if res.Torn {
		aside, err := cutTail(l.f, l.path, res.ValidEnd, res.Size)
		if err != nil {
			return fmt.Errorf("open event log %s: recover torn tail: %w", l.path, err)
		}
		l.logger.Warn("event log had a torn tail; copied aside and truncated",
			"path", l.path, "offset", res.ValidEnd, "bytes", res.Size-res.ValidEnd,
			"records", res.Records, "copy", aside, "detail", res.Detail)
	}
	if _, err := l.f.Seek(res.ValidEnd, io.SeekStart); err != nil {
		return fmt.Errorf("open event log %s: %w", l.path, err)
	}
	l.durable, l.end = res.LastSeq, res.ValidEnd
	return nil
}

// Path returns the file the log was opened from.
func (l *Log) Path() string { return l.path }

// LastSeq returns the seq of the last durable record, 0 for an empty log.
func (l *Log) LastSeq() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.durable
}

// Append adds a record of type typ whose data is data encoded with encoding/json (a
// json.RawMessage passes through, validated and compacted: a record is one line) and returns it
// once it is on disk. Seqs are
// assigned in file order. If ctx ends while the record is being written, Append returns ctx's
// error and the record may or may not be in the log. A write that fails for want of room (a full
// disk, a quota) is cut off again and fails its appends; later appends are tried afresh. After
// any other failed write, or a failed fsync, the log acknowledges nothing more: reopen it to
// learn what reached the disk.
func (l *Log) Append(ctx context.Context, typ string, data any) (Record, error) {
	recs, err := l.AppendMany(ctx, Entry{Type: typ, Data: data})
	if err != nil {
		return Record{}, err
	}
	return recs[0], nil
}

// Entry is one record for [Log.AppendMany].
type Entry struct {
	Type string
	Data any
}

// AppendMany is Append of several records at once: they take consecutive seqs and are
// written with one write and made durable with one fsync. Either all are acknowledged or the
// error says none was (a record too large queues none of them).
func (l *Log) AppendMany(ctx context.Context, entries ...Entry) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("append %s to %s: %w", typeOf(entries), l.path, err)
	}
	b, recs, err := l.queue(entries, true)
	if err != nil {
		return nil, err
	}
	p := &Pending{l: l, rec: recs[len(recs)-1], b: b}
	if _, err := p.Wait(ctx); err != nil {
		return nil, err
	}
	return recs, nil
}

func typeOf(entries []Entry) string {
	if len(entries) == 0 {
		return "nothing"
	}
	return entries[0].Type
}

// Pending is the last record of a [Log.Write], written but perhaps not yet durable; Wait
// learns whether it became durable.
type Pending struct {
	l   *Log
	rec Record
	b   *batch
}

// Record is the record as it is written (its seq, time, type and data).
func (p *Pending) Record() Record { return p.rec }

// Wait returns once the record is durable, or with the error that kept it from the disk
// (see [Log.Append]). If ctx ends first the record may or may not be in the log.
func (p *Pending) Wait(ctx context.Context) (Record, error) {
	if err := p.await(ctx, p.b.done, &p.b.err); err != nil {
		return Record{}, err
	}
	return p.rec, nil
}

// await waits for ch (the batch's written or done) and then reports *err, the batch's error
// for that step; if ctx ends first and ch is still open, the outcome is unknown.
func (p *Pending) await(ctx context.Context, ch <-chan struct{}, err *error) error {
	select {
	case <-ch:
	case <-ctx.Done():
		select {
		case <-ch: // written after all
		default:
			return fmt.Errorf("append %s to %s: outcome unknown: %w", p.rec.Type, p.l.path, ctx.Err())
		}
	}
	if *err != nil {
		return fmt.Errorf("append %s to %s: %w", p.rec.Type, p.l.path, *err)
	}
	return nil
}

// Write is AppendMany that returns once the records are written to the file, before the
// fsync that makes them durable, which goes on in the background: a crash of this process no
// longer loses them, a crash of the machine still may. It is for records that acknowledge
// nothing to anyone (a cell's start and result) on a path where an fsync's latency counts;
// listeners still hear of them only once they are durable. A failed write (a full disk) is
// Write's error, as it would be Append's; a failed fsync makes the log fail every later
// append (see Append), and Pending.Wait reports it.
func (l *Log) Write(ctx context.Context, entries ...Entry) (*Pending, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("append %s to %s: %w", typeOf(entries), l.path, err)
	}
	b, recs, err := l.queue(entries, false)
	if err != nil {
		return nil, err
	}
	p := &Pending{l: l, rec: recs[len(recs)-1], b: b}
	if err := p.await(ctx, b.written, &b.werr); err != nil {
		return nil, err
	}
	return p, nil
}

// queue gives the entries their seqs in the pending batch and makes sure a writer runs. When no
// write is in progress this goroutine writes the batch, which saves two context switches on an
// uncontended log: and makes it durable too if the caller waits for that (wait), while for a
// Write a new goroutine does.
func (l *Log) queue(entries []Entry, wait bool) (*batch, []Record, error) {
	if len(entries) == 0 {
		return nil, nil, fmt.Errorf("append to %s: no records", l.path)
	}
	raws := make([][]byte, len(entries))
	for i, e := range entries {
		if e.Type == "" {
			return nil, nil, fmt.Errorf("append to %s: empty event type", l.path)
		}
		raw, err := marshalData(e.Data)
		if err != nil {
			return nil, nil, fmt.Errorf("append %s to %s: encode data: %w", e.Type, l.path, err)
		}
		raws[i] = raw
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, nil, fmt.Errorf("append %s to %s: %w", entries[0].Type, l.path, ErrClosed)
	}
	if l.failed != nil {
		l.mu.Unlock()
		return nil, nil, fmt.Errorf("append %s to %s: log failed earlier: %w", entries[0].Type, l.path, l.failed)
	}
	b := l.pending
	if b == nil {
		b = newBatch()
	}
	start, nrecs := len(b.buf), len(b.recs)
	now := time.Now().UTC()
	recs := make([]Record, len(entries))
	for i, e := range entries {
		rec := Record{Seq: l.nextSeq + uint64(i), TS: now, Type: e.Type, Data: raws[i]}
		n := len(b.buf)
		b.buf = appendLine(b.buf, rec)
		if size := len(b.buf) - n; size > l.max {
			b.buf, b.recs, b.offs = b.buf[:start], b.recs[:nrecs], b.offs[:nrecs]
			l.mu.Unlock()
			return nil, nil, fmt.Errorf("append %s to %s: %d bytes, limit %d: %w", e.Type, l.path, size, l.max, ErrTooLarge)
		}
		b.recs = append(b.recs, rec)
		b.offs = append(b.offs, int64(n))
		recs[i] = rec
	}
	l.pending = b
	l.nextSeq += uint64(len(entries))
	lead := !l.writing
	if lead {
		l.writing = true
		l.writers.Add(1)
	}
	l.mu.Unlock()
	if lead {
		if wait {
			l.write()
		} else {
			l.writeHere()
		}
	}
	return b, recs, nil
}

// write writes the pending batch with one write and one fsync, acknowledges it and, if more
// appends queued meanwhile, hands over to a new goroutine for the next batch, so that no Append
// waits for other appends' batches. While one batch syncs the next gathers: that is the group
// commit. The caller has set l.writing and added to l.writers.
func (l *Log) write() {
	defer l.writers.Done()
	l.sync(l.writeBatch())
	l.writeMore()
}

// writeHere is write for a Write that leads: this goroutine writes the batch, so Write returns
// without waiting for another to be scheduled, and a new one makes it durable.
func (l *Log) writeHere() {
	w := l.writeBatch()
	go func() {
		defer l.writers.Done()
		l.sync(w)
		l.writeMore()
	}()
}

// writeMore ends a writer's batch: if more appends queued meanwhile it hands over to a new
// goroutine for the next batch, so that no Append waits for other appends' batches.
func (l *Log) writeMore() {
	l.mu.Lock()
	more := l.pending != nil
	l.writing = more
	if more {
		l.writers.Add(1)
	}
	l.mu.Unlock()
	if more {
		go l.write()
	}
}

// written is a batch on its way to the disk, between its write and its fsync.
type written struct {
	b       *batch
	err     error
	wrote   bool   // the write succeeded (b.written is closed)
	rolled  bool   // the write failed for want of room and was cut off again
	dropped *batch // appends failed with b after a write that was rolled back
}

// writeBatch takes the pending batch and writes it to the file. The caller is the writer.
func (l *Log) writeBatch() written {
	l.mu.Lock()
	b, failed := l.pending, l.failed
	l.pending = nil
	l.mu.Unlock()
	w := written{b: b, err: failed}
	if b == nil {
		return w
	}
	if l.testHookFlush != nil {
		l.testHookFlush(len(b.recs))
	}
	if w.err == nil {
		_, w.err = l.f.Write(b.buf)
		if w.err == nil {
			w.wrote = true
			close(b.written)
		} else if w.rolled = l.rollBack(w.err); w.rolled {
			// The disk was full: what reached it of this batch is cut off again, so the log
			// holds exactly the acknowledged records and the next Append may succeed. The
			// batch queued behind this one took seqs that follow the lost ones: it fails too.
			l.mu.Lock()
			w.dropped, l.pending = l.pending, nil
			l.nextSeq = l.durable + 1
			l.mu.Unlock()
		}
	}
	return w
}

// sync makes a written batch durable and acknowledges it (or fails it).
func (l *Log) sync(w written) {
	b, err := w.b, w.err
	if b == nil {
		return
	}
	if w.wrote {
		if l.testHookSync != nil {
			l.testHookSync()
		}
		err = syncData(l.f)
	}
	l.mu.Lock()
	if err != nil {
		if l.failed == nil && !w.rolled {
			l.failed = err
		}
	} else {
		for i, r := range b.recs {
			l.indexRecord(r.Seq, l.end+b.offs[i])
		}
		l.durable = b.recs[len(b.recs)-1].Seq
		l.end += int64(len(b.buf))
	}
	l.mu.Unlock()
	if d := w.dropped; d != nil {
		d.err, d.werr = err, err
		close(d.written)
		close(d.done)
	}
	if err == nil && l.onDurable != nil {
		l.callOnDurable(b.recs)
	}
	b.err = err
	if !w.wrote {
		b.werr = err
		close(b.written)
	}
	close(b.done)
	if err == nil {
		l.subs.publish(b.recs)
	}
}

// spaceError reports a write that failed for want of room (a full disk, a quota, a file size
// limit): the device is fine and the write can be undone and tried again later.
func spaceError(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EFBIG)
}

// rollBack undoes a write that failed for want of room by cutting the file back to the durable
// records. It reports whether the log is exactly as before the write; if not, the failure is
// sticky.
func (l *Log) rollBack(err error) bool {
	if !spaceError(err) {
		return false
	}
	if terr := l.f.Truncate(l.end); terr != nil {
		return false
	}
	_, serr := l.f.Seek(l.end, io.SeekStart)
	return serr == nil
}

// indexRecord notes where the record seq begins if it is an index point. Callers hold l.mu or own
// l exclusively.
func (l *Log) indexRecord(seq uint64, off int64) {
	if (seq-1)%indexStride == 0 {
		l.index = append(l.index, position{Seq: seq, Off: off, Line: int(seq - 1)})
	}
}

// Records returns the durable records with Seq >= from, read from the file. It is safe to call
// while other goroutines append.
func (l *Log) Records(from uint64) ([]Record, error) {
	var out []Record
	err := l.Scan(from, func(r Record) error {
		out = append(out, r)
		return nil
	})
	return out, err
}

// Scan calls fn for each durable record with Seq >= from, in order, reading the file without
// holding it in memory; an error from fn stops the scan and is returned. Records appended while
// Scan runs are not included. fn must not call Close.
func (l *Log) Scan(from uint64, fn func(Record) error) error {
	l.fileMu.RLock()
	defer l.fileMu.RUnlock()
	l.mu.Lock()
	closed, end := l.closed, l.end
	at := position{Seq: 1}
	if i := sort.Search(len(l.index), func(i int) bool { return l.index[i].Seq > from }); i > 0 {
		at = l.index[i-1]
	}
	l.mu.Unlock()
	if closed {
		return fmt.Errorf("read event log %s: %w", l.path, ErrClosed)
	}
	res, err := scanAt(io.NewSectionReader(l.f, at.Off, end-at.Off), at, true, func(r Record, _ int64) error {
		if r.Seq >= from {
			return fn(r)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read event log %s: %w", l.path, err)
	}
	if res.Torn || res.Corrupt {
		// The durable prefix was validated on open and written by us since: the file was
		// changed under us.
		return fmt.Errorf("read event log %s: %w", l.path, corruptError(l.path, res))
	}
	return nil
}

// Close writes and syncs pending appends, stops the log and releases the file. Appends that race
// with Close either complete or fail with ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.closed = true
	l.mu.Unlock()
	l.writers.Wait() // pending batches always have a writer; wait for the last
	l.subs.closeAll()
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	errUnlock := l.unlock()
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("close event log %s: %w", l.path, err)
	}
	if errUnlock != nil {
		return fmt.Errorf("close event log %s: unlock: %w", l.path, errUnlock)
	}
	return nil
}

// callOnDurable is an isolation boundary: a panicking OnDurable is logged, and the batch is
// still acknowledged, so one broken listener cannot leave every append of the log waiting.
func (l *Log) callOnDurable(recs []Record) {
	defer func() {
		if p := recover(); p != nil {
			l.logger.Error("eventlog: OnDurable panicked", "log", l.path, "panic", p, "stack", string(debug.Stack()))
		}
	}()
	l.onDurable(recs)
}
