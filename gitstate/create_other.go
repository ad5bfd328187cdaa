//go:build !linux

package gitstate

import (
	"fmt"
	"os"

	"github.com/go-git/go-git/v5/plumbing/format/index"
)

func createFile(p string, data []byte, perm uint32, e *index.Entry) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, os.FileMode(perm))
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	var fi os.FileInfo
	if err == nil {
		fi, err = f.Stat()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	fillStat(e, fi)
	return nil
}
