package eval

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// The built-in suites, one directory each under examples/, in the layout [Load] reads.
//
//go:embed all:examples
var builtin embed.FS

// Builtin is the built-in suite called name, as a file system rooted at its suite.json.
func Builtin(name string) (fs.FS, bool) {
	if name == "" || name == "." || strings.ContainsAny(name, `/\`) {
		return nil, false
	}
	if fi, err := fs.Stat(builtin, path.Join("examples", name, "suite.json")); err != nil || fi.IsDir() {
		return nil, false
	}
	sub, err := fs.Sub(builtin, path.Join("examples", name))
	if err != nil {
		return nil, false
	}
	return sub, true
}

// BuiltinNames lists the built-in suites, sorted.
func BuiltinNames() []string {
	entries, _ := builtin.ReadDir("examples")
	var names []string
	for _, e := range entries {
		if _, ok := Builtin(e.Name()); e.IsDir() && ok {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names
}

// Extract writes the built-in suite name's files into dir, creating it (and any directory
// within) with mode 0755 and the files with mode 0644; a file already there of the same name
// is overwritten. [Load] reads the result.
func Extract(name, dir string) error {
	suite, ok := Builtin(name)
	if !ok {
		return fmt.Errorf("no built-in suite %q; the built-in suites are %s", name, strings.Join(BuiltinNames(), ", "))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("extract suite %s: %w", name, err)
	}
	err := fs.WalkDir(suite, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if d.IsDir() {
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
			return os.Chmod(dst, 0o755) // whatever the umask
		}
		b, err := fs.ReadFile(suite, p)
		if err != nil {
			return err
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			return err
		}
		return os.Chmod(dst, 0o644)
	})
	if err != nil {
		return fmt.Errorf("extract suite %s into %s: %w", name, dir, err)
	}
	return nil
}

// ExtractAsTest extracts the built-in suite name into dir marked a test of Arbor ("test": true
// in its suite.json): its scripted model then plays the model under an eval gate too. Arbor's
// own tests and benchmarks of the gate use it.
func ExtractAsTest(name, dir string) error {
	if err := Extract(name, dir); err != nil {
		return err
	}
	p := filepath.Join(dir, "suite.json")
	data, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("suite %s: %s: %w", name, p, err)
	}
	m["test"] = true
	if data, err = json.MarshalIndent(m, "", "  "); err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o644)
}
