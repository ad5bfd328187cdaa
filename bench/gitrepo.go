package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// GitRepo makes dir a git repository with one commit of what it holds, plus a README.md when it
// has none and an arbor.json when arborJSON is not "": the repository a benchmark's sessions run
// in. The commit's identity is given on the command line, so no git configuration is needed.
func GitRepo(dir, arborJSON string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "README.md")); os.IsNotExist(err) {
		if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("bench\n"), 0o644); err != nil {
			return err
		}
	}
	if arborJSON != "" {
		if err := os.WriteFile(filepath.Join(dir, "arbor.json"), []byte(arborJSON), 0o644); err != nil {
			return err
		}
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "init"}} {
		c := exec.Command("git", args...)
		c.Dir = dir
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("git %v: %v %s", args, err, out)
		}
	}
	return nil
}
