// Package eventlog is a session's append-only event log: one JSONL file in which every line is a
// JSON record, a TAB and the CRC-32C of the JSON as 8 lowercase hex digits, so the file stays
// greppable while every line can be checked on its own:
//
//	{"seq":1,"ts":"2026-11-29T17:00:00.123Z","type":"user_message","data":{"text":"hi"}}	b0ddac96
//
// Call [Open] to create or recover a log, then [Log.Append] from any goroutine; Append returns only
// after the record is on disk (fdatasync), and concurrent appends share one write and one sync
// (group commit). [Log.Records], [Log.Scan] and [Log.Subscribe] read the durable records back;
// [ReadFile] reads a log, even one another process has open, without modifying it. Seqs start at
// 1 and rise by 1 in file order.
//
// Recovery follows etcd's WAL. A crash can only damage the end of the file, so on open a torn tail
// (a final line without a newline, or bad lines with nothing valid after them) is copied aside to
// <path>.torn-<time> and truncated; no record in it was acknowledged. A bad line followed by a
// line with a valid checksum, or a valid line that is not the next seq, cannot be explained by a
// crash: Open refuses the log with a [*CorruptError] matching [ErrQuarantined] that names the
// file, line and byte offset, and changes nothing. [Check] and [CheckTree] are `arbor fsck`;
// [Repair] is `arbor fsck --repair`: it copies the whole original aside, then keeps the longest
// valid prefix, and says what it dropped.
//
// A write that fails for want of room (ENOSPC, EDQUOT, EFBIG) is cut back to the acknowledged
// records and fails its appends, naming the file and the cause; the next Append tries afresh, so
// freeing space is all a full disk needs. Any other failed write, and any failed fsync, is
// sticky: the log acknowledges nothing more until it is reopened, because what reached the disk
// is then unknown.
//
// [Bench] is `arbor bench` for this package and [Soak] the kill -9 soak (`arbor soak eventlog`).
// Soak re-executes the running binary as a writer, so a binary that offers it must call
// [CrashChild] first thing in main; tests do so in TestMain.
package eventlog
