//go:build race

package eventlog

const raceEnabled = true

// The race detector makes skipping a 64 MiB line take seconds, so the tests that write a line
// over the limit (such as TestDamage's "huge zero run after") run against a lower one. It stays
// above DefaultMaxRecordBytes, so every record a log accepts by default is still read back.
func init() { lineLimit = 2 * DefaultMaxRecordBytes }
