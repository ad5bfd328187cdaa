package main

// With XDG_RUNTIME_DIR unset the socket lives in /tmp/arbor-<uid>, where another local user
// can get there first. The CLI, `arbor lsp` and the daemon all refuse a squatted directory,
// naming it, and change nothing through it.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSquattedFallbackSocketDir(t *testing.T) {
	t.Parallel()
	attacker := throwawayUser(t)
	for _, how := range []string{"owned by another user", "symlink to the user's directory"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			// A shared temporary directory like /tmp: everyone may create entries.
			tmp := filepath.Join(e.root, "tmp")
			os.Mkdir(tmp, 0o777)
			os.Chmod(tmp, 0o1777)
			os.Chmod(e.root, 0o755)
			e.vars["TMPDIR"] = tmp
			e.vars["XDG_RUNTIME_DIR"] = ""
			e.vars["ARBOR_SOCKET"] = ""
			dir := filepath.Join(tmp, fmt.Sprintf("arbor-%d", os.Getuid()))
			victim := filepath.Join(e.root, "victim")
			switch how {
			case "owned by another user":
				os.Mkdir(dir, 0o777)
				os.Chmod(dir, 0o777)
				os.Chown(dir, attacker.uid, attacker.gid)
			default:
				os.Mkdir(victim, 0o755)
				os.Chmod(victim, 0o755)
				if err := os.Symlink(victim, dir); err != nil {
					t.Fatal(err)
				}
				os.Lchown(dir, attacker.uid, attacker.gid)
			}
			want := "refusing the arbor socket directory " + dir
			for _, args := range [][]string{{"ls"}, {"daemon"}, {"lsp"}} {
				r := e.arbor(args...)
				if r.code == 0 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, fmt.Sprintf("owner uid %d", attacker.uid)) {
					t.Errorf("want a refusal naming %s and owner uid %d:\n%s", dir, attacker.uid, r)
				}
			}
			if how != "owned by another user" {
				if fi, err := os.Stat(victim); err != nil || fi.Mode().Perm() != 0o755 {
					t.Errorf("the symlink's target changed: %v %v", fi.Mode(), err)
				}
				if ents, _ := os.ReadDir(victim); len(ents) != 0 {
					t.Errorf("files were created through the symlink: %v", ents)
				}
			} else if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("files were created in the squatted directory: %v", ents)
			}
		})
	}
}
