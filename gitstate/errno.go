package gitstate

import (
	"errors"
	"syscall"
)

// syscallENOTDIR is what lstat reports when a path's parent has become a file.
var syscallENOTDIR error = syscall.ENOTDIR

// errNotRegular is a file the scan found regular that is something else by the time it is
// read (the code in the worktree swapped it).
var errNotRegular = errors.New("not a regular file (it changed while it was read)")

// syscallELOOP is what an open that must not follow a symlink reports on one.
var syscallELOOP error = syscall.ELOOP
