package eval

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Load refuses a suite it cannot run faithfully, naming the file and what is wrong.
func TestLoadRefuses(t *testing.T) {
	good := map[string]string{
		"suite.json":             `{"name": "s", "seed": 1, "splits": {"feedback": ["a"]}}`,
		"tasks/a/task.json":      `{"prompt": "do it", "check": "true"}`,
		"tasks/a/repo/main.py":   "print(1)\n",
		"tasks/a/check/check.py": "pass\n",
	}
	for _, c := range []struct {
		name string
		edit map[string]string // path → content ("" removes)
		want string
	}{
		{"no check", map[string]string{"tasks/a/task.json": `{"prompt": "do it"}`}, `task a: ` + "" + `.../task.json has no "check"`},
		{"no fixture", map[string]string{"tasks/a/repo/main.py": ""}, "no fixture"},
		{"repo a file", map[string]string{"tasks/a/repo/main.py": "", "tasks/a/repo": "x"}, "is not a directory"},
		{"negative suite limits", map[string]string{"suite.json": `{"name": "s", "splits": {"feedback": ["a"]}, "limits": {"turns": -1}}`}, "limits must be positive"},
		{"unknown split", map[string]string{"suite.json": `{"name": "s", "splits": {"train": ["a"]}}`}, `unknown split "train"`},
		{"missing task", map[string]string{"suite.json": `{"name": "s", "splits": {"feedback": ["a", "b"]}}`}, "task b:"},
		{"twice", map[string]string{"suite.json": `{"name": "s", "splits": {"feedback": ["a"], "heldout": ["a"]}}`}, "in feedback and in heldout"},
		{"script outside", map[string]string{"suite.json": `{"name": "s", "splits": {"feedback": ["a"]}, "script": "../x.json"}`}, "outside the suite directory"},
		{"script a directory", map[string]string{"suite.json": `{"name": "s", "splits": {"feedback": ["a"]}, "script": "tasks"}`}, "is not a file"},
		{"unknown field", map[string]string{"tasks/a/task.json": `{"prompt": "do it", "check": "true", "chek": 1}`}, `unknown field "chek"`},
		{"bad id", map[string]string{"suite.json": `{"name": "s", "splits": {"feedback": ["../a"]}}`}, `task id "../a"`},
	} {
		dir := t.TempDir()
		files := map[string]string{}
		for k, v := range good {
			files[k] = v
		}
		for k, v := range c.edit {
			files[k] = v
		}
		for p, body := range files {
			if body == "" {
				continue
			}
			os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
			os.WriteFile(filepath.Join(dir, p), []byte(body), 0o644)
		}
		_, err := Load(dir)
		want := strings.ReplaceAll(c.want, ".../", "")
		if err == nil || !strings.Contains(strings.ReplaceAll(err.Error(), dir+"/tasks/a/", ""), want) {
			t.Errorf("%s: %v, want %q", c.name, err, want)
		}
	}
	dir := t.TempDir()
	for p, body := range good {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), []byte(body), 0o644)
	}
	os.Symlink("/etc/passwd", filepath.Join(dir, "tasks/a/check/passwd"))
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.Tasks["a"].CheckFiles, ","); got != "check.py" {
		t.Errorf("check files %q: a link is not one", got)
	}
}
