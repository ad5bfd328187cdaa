// Package eventlog is a session's append-only event log: one JSONL file in which every line is a
// JSON record, a TAB and the CRC-32C of the JSON as 8 lowercase hex digits, so the file stays
// greppable while every line can be checked on its own.
//
// Call [Open] to create or recover a log, then [Log.Append] from any goroutine; Append returns only
// after the record is on disk (fsync), and concurrent appends share one fsync (group commit).
// [Log.Records] and [Log.Subscribe] read the durable records back, [ReadFile] reads a log without
// modifying it, and [Check] and [Repair] are `arbor fsck` and `arbor fsck --repair`.
//
// Recovery follows etcd's WAL. A crash can only damage the end of the file, so on open a torn tail
// (a final line without a newline, or bad lines with nothing valid after them) is copied aside to
// <path>.torn-<time> and truncated. A bad line followed by valid ones cannot be explained by a crash:
// Open refuses the log with an error matching [ErrQuarantined] that names the file, line and byte
// offset, and changes nothing. Only [Repair] cuts such a log back to its longest valid prefix, after
// copying the whole original aside.
package eventlog
