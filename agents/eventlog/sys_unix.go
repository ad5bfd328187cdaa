//go:build unix

package eventlog

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockFile takes an exclusive advisory lock so that two processes never append to one log. The
// kernel drops the lock when the process dies, so a crash never leaves a log locked.
func lockFile(f *os.File) (unlock func() error, err error) {
	fd := int(f.Fd())
	for {
		err = syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, fmt.Errorf("%w: held open by another process", ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	return func() error { return syscall.Flock(fd, syscall.LOCK_UN) }, nil
}
