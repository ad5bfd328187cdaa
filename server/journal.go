package server

// The request journal: a request that changes state is written down, durably, before it is
// dispatched, and crossed out once its handler returned; a daemon that died in between finds
// the entry at its next start and replays it, once, in the order the requests were received.
//
// What is journalled, and how each method replays, is one table, [journalRules]; a test checks
// that every route of the method table has a rule, so a new method cannot be forgotten. A
// replay must neither lose the request nor apply it twice, so each journalled method is one of:
//
//   - keyed: the request's journal key travels with it into the state it makes (on the
//     message_queued of a send, on the session_created of a create or fork) and the replay
//     first asks agents.Service.RequestApplied whether a record with that key exists. A daemon
//     that died after the send was recorded but before it answered does not queue it again.
//   - replayed as is: applying it twice is applying it once (stop, discard, trust, harness
//     writes, which carry the version they read and are refused as stale the second time).
//   - reported: replaying it unseen could surprise (accept and merge write into the user's
//     branch or a parent's worktree, which may have moved since; refine.run spends model
//     calls and proposes again). The entry is logged and shown in `arbor daemon status`
//     (interrupted) and not applied; the user decides.
//
// The journal is one append-only file, <journal>/requests.jsonl, of checksummed JSON lines: a
// "begin" line, written and fdatasynced before the handler starts, and a "done" line, written
// (not synced) when it returned. Whatever has a begin and no done at the next start is
// replayed, in the order of seq, the receive time in Unix nanoseconds made strictly increasing.
// A done line lost in a crash makes the entry come back, which the rules above make harmless
// (a reported one is reported once more). When no request is in flight and the file has
// grown past compactAt, it is truncated. The entries share a file because an entry then costs
// one fdatasync of an append, where a file per entry written with atomicfile costs two fsyncs
// and a directory update (several times slower here); BenchmarkSendJournal measures a send
// with and without the journal.
//
// An entry that cannot be written (a full disk) refuses the request with an error naming the
// disk problem: nothing unjournalled is dispatched. A partial line is cut off again, so the
// next entry starts on a line of its own. A failed fdatasync is sticky, as in the event log:
// the kernel may have dropped the pages, so no later entry is trusted to be durable and every
// journalled request is refused until the daemon restarts. A corrupt line (unparseable, or its
// checksum does not match) is logged and reported and never crashes the daemon; a copy of the
// file is kept beside it as requests.jsonl.corrupt-<time> for inspection. A torn last line is
// what a crash during a write leaves: that request was never dispatched, because dispatch
// waits for its line to be durable.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arborhq/arbor/jsonlimit"
	"golang.org/x/sys/unix"
)

// journalVersion is the line format; a line of another version is reported, not replayed.
const journalVersion = 1

// compactAt is the size past which the file is truncated once no request is in flight.
const compactAt = 1 << 20

// journalEntry is one line of the journal: a journalled request (Op "begin"), the mark that a
// start is replaying it (Op "replaying"), or the mark that it finished (Op "done"); the marks
// carry only its key.
type journalEntry struct {
	V      int             `json:"v"`
	Op     string          `json:"op"`
	Seq    int64           `json:"seq,omitempty"` // receive time in Unix nanoseconds, strictly increasing
	Key    string          `json:"key"`           // random: the idempotency key of its replay
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	// RootDir is the client's root folder, which handlers use when params name no directory.
	RootDir string `json:"rootDir,omitempty"`
	CRC     uint32 `json:"crc"` // CRC-32C of the line marshalled with CRC 0

	attempted bool // read at open: an earlier start began replaying it and never finished
}

// Received is when the daemon read the request.
func (e *journalEntry) Received() time.Time { return time.Unix(0, e.Seq).UTC() }

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func (e *journalEntry) checksum() (uint32, error) {
	c := *e
	c.CRC = 0
	data, err := json.Marshal(&c)
	return crc32.Checksum(data, crcTable), err
}

// line marshals e with its checksum, newline-terminated (JSON escapes every newline inside).
func (e *journalEntry) line() ([]byte, error) {
	sum, err := e.checksum()
	if err != nil {
		return nil, err
	}
	e.CRC = sum
	data, err := json.Marshal(e)
	return append(data, '\n'), err
}

// corruptEntry is a line of the journal that could not be read as an entry.
type corruptEntry struct {
	line int
	err  error
}

func (c corruptEntry) String() string { return fmt.Sprintf("line %d: %v", c.line, c.err) }

// journal is the open journal file.
type journal struct {
	dir, path string
	last      atomic.Int64 // the last seq handed out

	mu     sync.Mutex
	f      *os.File
	size   int64
	open   map[string]bool // keys begun and not done
	failed error           // sticky: a failed fdatasync

	// What the last daemon left, read at open.
	leftover []*journalEntry
	bad      []corruptEntry
	kept     string // the copy of a file with corrupt lines, "" if none
}

// openJournal opens (creating, 0700) dir's journal and reads what an earlier daemon left.
func openJournal(dir string) (*journal, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open request journal: %w", err)
	}
	j := &journal{dir: dir, path: filepath.Join(dir, "requests.jsonl"), open: map[string]bool{}}
	f, err := os.OpenFile(j.path, os.O_RDWR|os.O_CREATE|os.O_APPEND|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open request journal: %w", err)
	}
	if err := syncDir(dir); err != nil { // the file itself must survive a crash
		f.Close()
		return nil, fmt.Errorf("open request journal: %w", err)
	}
	j.f = f
	if err := j.read(); err != nil {
		f.Close()
		return nil, err
	}
	return j, nil
}

// read collects the begun and not done entries, in receive order, and the corrupt lines.
func (j *journal) read() error {
	if _, err := j.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("read request journal: %w", err)
	}
	data, err := io.ReadAll(j.f)
	if err != nil {
		return fmt.Errorf("read request journal %s: %w", j.path, err)
	}
	j.size = int64(len(data))
	begun := map[string]*journalEntry{}
	// Only whole lines are entries: a last line without its newline is a write the crash cut
	// short — never acknowledged, so not a corruption to report — and is cut off below.
	whole := data[:bytes.LastIndexByte(data, '\n')+1]
	sc := bufio.NewScanner(bytes.NewReader(whole))
	sc.Buffer(nil, len(whole)+1)
	for n := 1; sc.Scan(); n++ {
		e, err := parseEntry(sc.Bytes())
		switch {
		case err != nil:
			j.bad = append(j.bad, corruptEntry{line: n, err: err})
		case e.Op == "begin":
			begun[e.Key] = e
		case e.Op == "replaying":
			if b := begun[e.Key]; b != nil {
				b.attempted = true
			}
		default:
			delete(begun, e.Key)
		}
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		// A torn last line: cut it, so the next entry starts on a line of its own.
		cut := int64(bytes.LastIndexByte(data, '\n') + 1)
		if err := j.f.Truncate(cut); err != nil {
			return fmt.Errorf("request journal %s: cut a torn last line: %w", j.path, err)
		}
		j.size = cut
	}
	for _, e := range begun {
		j.leftover = append(j.leftover, e)
		j.open[e.Key] = true // in flight until replayed: compaction must keep its line
	}
	slices.SortFunc(j.leftover, func(a, b *journalEntry) int {
		if c := cmpInt(a.Seq, b.Seq); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	if len(j.bad) > 0 {
		j.kept = fmt.Sprintf("%s.corrupt-%d", j.path, time.Now().UnixNano())
		if err := os.WriteFile(j.kept, data, 0o600); err != nil {
			j.kept = ""
		}
	}
	return nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func parseEntry(line []byte) (*journalEntry, error) {
	var e journalEntry
	// The framing let no request deeper than this in, and an entry adds one level to its
	// params: a deeper line was not written by a daemon.
	if err := jsonlimit.Check(line, jsonlimit.MaxDepth); err != nil {
		return nil, fmt.Errorf("not a journal entry: %w", err)
	}
	if err := json.Unmarshal(line, &e); err != nil {
		return nil, fmt.Errorf("not a journal entry: %w", err)
	}
	if sum, err := e.checksum(); err != nil || sum != e.CRC {
		return nil, fmt.Errorf("checksum mismatch (stored %08x, computed %08x): the line was damaged", e.CRC, sum)
	}
	if e.V != journalVersion {
		return nil, fmt.Errorf("journal format %d, this daemon reads %d", e.V, journalVersion)
	}
	switch {
	case e.Key == "":
		return nil, errors.New("journal entry without a key")
	case e.Op == "begin" && e.Method == "":
		return nil, errors.New("journal entry without a method")
	case e.Op != "begin" && e.Op != "replaying" && e.Op != "done":
		return nil, fmt.Errorf("journal entry op %q", clip(e.Op, maxEcho))
	}
	return &e, nil
}

// stamp hands out the next seq: now, or one past the last when the clock has not moved on.
func (j *journal) stamp() int64 {
	for {
		last := j.last.Load()
		now := max(time.Now().UnixNano(), last+1)
		if j.last.CompareAndSwap(last, now) {
			return now
		}
	}
}

// begin journals a request received at seq (0: now) and returns its entry once it is durable.
func (j *journal) begin(seq int64, method string, params json.RawMessage, rootDir string) (*journalEntry, error) {
	if seq == 0 {
		seq = j.stamp()
	}
	var k [16]byte
	rand.Read(k[:])
	if len(params) == 0 {
		params = json.RawMessage("null")
	}
	e := &journalEntry{V: journalVersion, Op: "begin", Seq: seq, Key: hex.EncodeToString(k[:]), Method: method, Params: params, RootDir: rootDir}
	// In flight from before its line is written: a concurrent done must not compact the file
	// between the write and the registration, taking the line with it.
	j.mu.Lock()
	j.open[e.Key] = true
	j.mu.Unlock()
	line, err := e.line()
	if err == nil {
		err = j.append(line, true)
	}
	if err != nil {
		j.mu.Lock()
		delete(j.open, e.Key)
		j.mu.Unlock()
		return nil, fmt.Errorf("%s: refused, not run: the daemon must journal a request that changes state before it runs it, "+
			"and could not (%w); free disk space under %s and send it again", method, err, j.dir)
	}
	return e, nil
}

// append writes one line, synced when sync, and cuts it off again if it was not written whole.
func (j *journal) append(line []byte, sync bool) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.failed != nil {
		return fmt.Errorf("the journal's disk failed earlier (%w); restart the daemon", j.failed)
	}
	n, err := j.f.Write(line)
	if err != nil {
		if n > 0 {
			if terr := j.f.Truncate(j.size); terr != nil {
				j.failed = fmt.Errorf("write %s: %w, and cutting the partial line failed: %w", j.path, err, terr)
			}
		}
		return fmt.Errorf("write %s: %w", j.path, err)
	}
	j.size += int64(n)
	if sync {
		if err := unix.Fdatasync(int(j.f.Fd())); err != nil {
			j.failed = fmt.Errorf("fdatasync %s: %w", j.path, err)
			return j.failed
		}
	}
	return nil
}

// replaying marks, durably, that this start is replaying e: should the daemon die in it, the
// next start reports e instead of replaying it again (a replay that kills the daemon must not
// kill every start after it).
func (j *journal) replaying(e *journalEntry) error {
	m := &journalEntry{V: journalVersion, Op: "replaying", Key: e.Key}
	line, err := m.line()
	if err == nil {
		err = j.append(line, true)
	}
	return err
}

// done marks an entry finished, and compacts the file when nothing is in flight.
func (j *journal) done(e *journalEntry) error {
	d := &journalEntry{V: journalVersion, Op: "done", Key: e.Key}
	line, err := d.line()
	if err == nil {
		err = j.append(line, false)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.open, e.Key)
	if err != nil {
		return fmt.Errorf("journal: mark %s done: %w", e.Method, err)
	}
	if len(j.open) == 0 && j.size > compactAt {
		j.truncateLocked()
	}
	return nil
}

// reset empties the file after the replay at start, unless a request is in flight.
func (j *journal) reset() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.open) == 0 && j.size > 0 {
		j.truncateLocked()
	}
}

// truncateLocked empties the file. It need not be durable: the lines it drops all have their
// done line, so the old content, come back after a crash, holds nothing to replay.
func (j *journal) truncateLocked() {
	if err := j.f.Truncate(0); err == nil {
		j.size = 0
	}
}

func (j *journal) close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
}

// requestKeyCtx carries a journalled request's key to its handler.
type requestKeyCtx struct{}

// requestKey is the journal key of the request being served ("" when not journalled): the
// keyed handlers record it in what they make, so that a replay can find it.
func requestKey(ctx context.Context) string {
	k, _ := ctx.Value(requestKeyCtx{}).(string)
	return k
}

func withRequestKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, requestKeyCtx{}, key)
}
