package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestWriteFileUnwritableDir(t *testing.T) {
	dir := unwritableDir(t)
	path := filepath.Join(dir, "f")
	err := WriteFile(path, []byte("x"), 0o600)
	if !errors.Is(err, os.ErrPermission) && !errors.Is(err, syscall.EROFS) {
		t.Fatalf("err = %v, want permission denied or a read-only file system", err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists after a failed write: %v", path, err)
	}
}

// unwritableDir returns a directory the test cannot create files in: mode 0500, or for root
// (whom modes do not stop) a read-only tmpfs.
func unwritableDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o700) })
		return dir
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_RDONLY, "size=64k"); err != nil {
		t.Skipf("running as root without the right to mount a read-only tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}
