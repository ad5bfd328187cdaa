package agents

import (
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/arborhq/arbor/workspace"
)

// credentialName matches variable names that hold secrets by convention.
var credentialName = regexp.MustCompile(`(?i)(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|PRIVATE_KEY)`)

// minSecretLen keeps short values ("1", "true") from being redacted everywhere they appear.
const minSecretLen = 8

// newRedactor returns a function that replaces every known secret value in tool output with
// a marker naming its variable, before the output reaches the event log, an artifact or the
// model: the values of the variables any configured model names as its key, and of the
// daemon's variables whose names look like credentials. Kernels never get these variables,
// but a cell can still come across a value (a file, a subprocess, a mistake), and what it
// prints is kept forever.
func newRedactor(cfg workspace.Config) func(string) string {
	names := map[string]bool{}
	for _, n := range cfg.KeyEnvs() { // the models' keys and the kernel gateway's token
		names[n] = true
	}
	var pairs []string
	seen := map[string]bool{}
	env := os.Environ()
	sort.Strings(env) // deterministic markers when two variables share a value
	for _, kv := range env {
		name, val, _ := strings.Cut(kv, "=")
		if !names[name] && !credentialName.MatchString(name) {
			continue
		}
		if len(val) < minSecretLen || seen[val] {
			continue
		}
		seen[val] = true
		pairs = append(pairs, val, "[redacted $"+name+"]")
	}
	if len(pairs) == 0 {
		return func(s string) string { return s }
	}
	r := strings.NewReplacer(pairs...)
	return r.Replace
}
