package gitstate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5/plumbing"
)

// setRef points a ref at h using git's own protocol: <ref>.lock is created exclusively (so a
// concurrent git command fails instead of racing), the current value is checked against
// expect when given (ZeroHash: the ref must not exist), and the lock is renamed over the ref.
// go-git truncates and rewrites ref files in place, which a kill at the wrong moment leaves
// empty; a rename leaves either the old value or the new one. Callers hold the lock.
func (r *Repo) setRef(name plumbing.ReferenceName, h plumbing.Hash, expect *plumbing.Hash) (err error) {
	p := filepath.Join(r.common, filepath.FromSlash(name.String()))
	if err := os.MkdirAll(filepath.Dir(p), 0o777); err != nil {
		return fmt.Errorf("update %s: %w", name, err)
	}
	lock := p + ".lock"
	f, err := os.OpenFile(lock, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("update %s: it is locked by another git process (%s exists; remove it if no git command is running)", name, lock)
	}
	if err != nil {
		return fmt.Errorf("update %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(lock)
		}
	}()
	if expect != nil {
		cur := plumbing.ZeroHash
		ref, err := r.git.Storer.Reference(name)
		switch {
		case err == nil && ref.Type() == plumbing.HashReference:
			cur = ref.Hash()
		case err == nil:
			return fmt.Errorf("update %s: it is a symbolic ref", name)
		case !errors.Is(err, plumbing.ErrReferenceNotFound):
			return fmt.Errorf("update %s: %w", name, err)
		}
		if cur != *expect {
			if expect.IsZero() {
				return fmt.Errorf("%s already exists", name.Short())
			}
			return fmt.Errorf("%s moved to %s meanwhile (expected %s)", name.Short(), cur, expect)
		}
	}
	if _, err = f.WriteString(h.String() + "\n"); err != nil {
		return fmt.Errorf("update %s: %w", name, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("update %s: %w", name, err)
	}
	if err = os.Rename(lock, p); err != nil {
		return fmt.Errorf("update %s: %w", name, err)
	}
	return nil
}
