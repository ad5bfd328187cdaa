package gitstate

import "syscall"

// syscallENOTDIR is what lstat reports when a path's parent has become a file.
var syscallENOTDIR error = syscall.ENOTDIR
