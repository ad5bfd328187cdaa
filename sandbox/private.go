package sandbox

import (
	"os"
	"path/filepath"
	"slices"
)

// privateRoots are the system dirs that are not bound whole: /etc is where a host keeps what
// only root may read (shadow passwords, TLS and SSH host keys, database auth files). The
// toolchain dirs (/usr, /opt) are world-readable by convention and too large to walk at every
// start.
var privateRoots = []string{"/etc"}

// systemView returns bwrap's arguments that show the host's system dir d read-only. A private
// root is walked at every call (about 2.5 ms for a Debian /etc of 1,250 entries), so a kernel
// sees /etc as it is when it starts: a directory with nothing private beneath it is bound
// whole; one with something private is rebuilt in the sandbox's root, entry by entry, with
// each private entry (a directory lacking r or x for others, or a file lacking r for others)
// left out. A sandbox as root has no capabilities but still owns what root owns, so a bound
// /etc would show it /etc/shadow; as a plain user these are unreadable anyway.
//
// Left out, not masked: a mask over a host file is detached in the sandbox when the host
// renames a new file over it (as useradd and passwd do with /etc/shadow), which would show the
// new file to a kernel already running. A file bound on its own instead stays the one it was
// at the start, and a private name has nothing under it to show. What the host adds to a bound
// directory later is visible, and is checked again at the next start.
func systemView(d string) []string {
	if !slices.Contains(privateRoots, d) {
		return []string{"--ro-bind", d, d}
	}
	args, _ := viewDir(d)
	return args
}

// viewDir returns the arguments that show dir, and whether anything beneath it is private.
func viewDir(dir string) ([]string, bool) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, true // unreadable to the daemon: as private as it gets
	}
	var args []string
	private := false
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		fi, err := e.Info()
		if err != nil {
			continue // gone since the listing
		}
		perm := fi.Mode().Perm()
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			// Kept as a link: it resolves in the sandbox's view, where a private target is absent.
			if t, err := os.Readlink(p); err == nil {
				args = append(args, "--symlink", t, p)
			}
		case fi.IsDir() && perm&0o005 != 0o005:
			private = true
		case fi.IsDir():
			sub, priv := viewDir(p)
			if priv {
				private = true
				args = append(args, sub...) // "--dir p" and its entries
			} else {
				args = append(args, "--ro-bind-try", p, p)
			}
		case fi.Mode().IsRegular() && perm&0o004 == 0:
			private = true
		default:
			// -try: a file renamed away since the walk (useradd's /etc/passwd+) is skipped, not
			// an error that stops the kernel from starting.
			args = append(args, "--ro-bind-try", p, p)
		}
	}
	if !private {
		return []string{"--ro-bind", dir, dir}, false
	}
	return append([]string{"--dir", dir}, args...), true
}
