package eval

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestBuiltinNames(t *testing.T) {
	if got := BuiltinNames(); !slices.Equal(got, []string{"example"}) {
		t.Errorf("BuiltinNames() = %v, want [example]", got)
	}
	for _, bad := range []string{"", ".", "..", "nope", "example/tasks", "../examples", "example/suite.json"} {
		if _, ok := Builtin(bad); ok {
			t.Errorf("Builtin(%q) found a suite", bad)
		}
	}
	fsys, ok := Builtin("example")
	if !ok {
		t.Fatal("no built-in suite example")
	}
	if _, err := fs.Stat(fsys, "suite.json"); err != nil {
		t.Errorf("the example suite is not rooted at its suite.json: %v", err)
	}
}

// TestExtractLoads extracts the example suite and loads it: twelve tasks, six in each split,
// each with its hidden check and the script beside them.
func TestExtractLoads(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "made", "here")
	if err := Extract("example", dir); err != nil {
		t.Fatal(err)
	}
	s, err := Load(dir)
	if err != nil {
		t.Fatalf("the extracted suite does not load: %v", err)
	}
	if s.Name != "example" || s.Seed != 4 || s.Script != "script.json" {
		t.Errorf("suite %q seed %d script %q, want example, 4, script.json", s.Name, s.Seed, s.Script)
	}
	if len(s.Tasks) != 12 || len(s.Splits[Feedback]) != 6 || len(s.Splits[HeldOut]) != 6 {
		t.Errorf("%d tasks, splits %v: want 12, six in each split", len(s.Tasks), s.Splits)
	}
	for id, task := range s.Tasks {
		if len(task.CheckFiles) == 0 || task.Bundle || len(task.Tags) == 0 {
			t.Errorf("task %s: check files %v, bundle %v, tags %v: want hidden check files, a repo/ fixture and tags", id, task.CheckFiles, task.Bundle, task.Tags)
		}
		if _, err := os.Stat(filepath.Join(task.Dir, "repo", ".gitignore")); err != nil {
			t.Errorf("task %s: the fixture's dot files were not extracted: %v", id, err)
		}
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o644)
		if d.IsDir() {
			want = 0o755
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), want)
		}
		if d.Name() == "__pycache__" {
			t.Errorf("%s: bytecode in the built-in suite", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Extracting again over the same directory rewrites the files.
	os.WriteFile(filepath.Join(dir, "suite.json"), []byte("{"), 0o600)
	if err := Extract("example", dir); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err != nil {
		t.Errorf("after a second extraction: %v", err)
	}
	if err := Extract("nope", t.TempDir()); err == nil {
		t.Error("extracting a suite that does not exist did not fail")
	}
}
