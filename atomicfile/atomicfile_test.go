package atomicfile

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestWriteFile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		existing []byte // nil: no file before
		data     []byte
		perm     os.FileMode
	}{
		{"new file", nil, []byte("hello\n"), 0o600},
		{"replaces", []byte("old content that is longer"), []byte("new"), 0o644},
		{"empty", []byte("x"), []byte{}, 0o640},
		{"mode not masked by umask", nil, []byte("x"), 0o666},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "f.json")
			if tc.existing != nil {
				if err := os.WriteFile(path, tc.existing, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := WriteFile(path, tc.data, tc.perm); err != nil {
				t.Fatalf("WriteFile: %v", err)
			}
			got, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(got, tc.data) {
				t.Errorf("content %q, %v; want %q", got, err, tc.data)
			}
			fi, err := os.Stat(path)
			if err != nil || fi.Mode() != tc.perm {
				t.Errorf("mode %v, %v; want %v", fi.Mode(), err, tc.perm)
			}
			assertOnly(t, dir, "f.json")
		})
	}
}

func TestWriteStreams(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "log")
	err := Write(path, 0o600, func(w io.Writer) error {
		for _, s := range []string{"a", "b", "c"} {
			if _, err := io.WriteString(w, s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "abc" {
		t.Errorf("content %q", got)
	}
	if err := WriteFileNoSync(path, []byte("d"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "d" {
		t.Errorf("content after WriteFileNoSync %q", got)
	}
	assertOnly(t, dir, "log")
}

// A failing writer, a panicking one, and a path that is a directory leave the old file as it
// was and no temporary file behind.
func TestWriteFailureLeavesNothing(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	tests := []struct {
		name  string
		path  string // relative to the test's dir
		fill  func(io.Writer) error
		want  string
		panic bool
	}{
		{"writer fails", "f", func(w io.Writer) error { io.WriteString(w, "partial"); return boom }, "boom", false},
		{"writer panics", "f", func(w io.Writer) error { io.WriteString(w, "partial"); panic("boom") }, "", true},
		{"path is a directory", "sub", func(w io.Writer) error { return nil }, "not a regular file", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "f"), []byte("old"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
				t.Fatal(err)
			}
			func() {
				defer func() {
					if r := recover(); (r != nil) != tc.panic {
						t.Errorf("recovered %v, want a panic: %v", r, tc.panic)
					}
				}()
				err := Write(filepath.Join(dir, tc.path), 0o600, tc.fill)
				if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
					t.Errorf("err = %v, want one naming %s and containing %q", err, tc.path, tc.want)
				}
				if tc.want == "boom" && !errors.Is(err, boom) {
					t.Errorf("err = %v does not wrap the writer's error", err)
				}
			}()
			if got, _ := os.ReadFile(filepath.Join(dir, "f")); string(got) != "old" {
				t.Errorf("old file now %q", got)
			}
			assertOnly(t, dir, "f", "sub")
		})
	}
}

func TestWriteFileMissingDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dir, "none", "f"), filepath.Join(dir, "file", "f")} {
		if err := WriteFile(p, []byte("x"), 0o600); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("WriteFile(%s) err = %v, want one naming the path", p, err)
		}
	}
}

// assertOnly fails unless dir holds exactly names.
func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	slices.Sort(names)
	if !slices.Equal(got, names) {
		t.Errorf("%s holds %v, want %v", dir, got, names)
	}
}
