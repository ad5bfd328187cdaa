//go:build !linux

package eventlog

import "os"

func syncData(f *os.File) error { return f.Sync() }
