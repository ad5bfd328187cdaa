package eventlog

import (
	"errors"
	"os"
	"syscall"
)

// syncData is fdatasync: appends change the file size, which fdatasync does flush, but it skips
// the mtime update that fsync would also write.
func syncData(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
