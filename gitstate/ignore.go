package gitstate

import (
	"bufio"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// ignorer answers "would `git add -A` skip this untracked path?" for one worktree, reading each
// directory's .gitignore at most once. Tracked paths are never asked: git keeps them regardless.
type ignorer struct {
	root  string
	base  []gitignore.Pattern            // global excludes and info/exclude, lowest priority
	perDi map[string][]gitignore.Pattern // slash dir ("" = root) → its .gitignore patterns
	extra map[string]bool                // paths excluded for this worktree only (Setup's copies)
}

func (r *Repo) newIgnorer(root string) *ignorer {
	var base []gitignore.Pattern
	if ps, err := gitignore.LoadGlobalPatterns(osfs.New("/")); err == nil {
		base = append(base, ps...)
	}
	if cfg := os.Getenv("XDG_CONFIG_HOME"); cfg != "" {
		base = append(base, readPatterns(filepath.Join(cfg, "git", "ignore"), nil)...)
	} else if home, err := os.UserHomeDir(); err == nil {
		base = append(base, readPatterns(filepath.Join(home, ".config", "git", "ignore"), nil)...)
	}
	base = append(base, readPatterns(filepath.Join(r.common, "info", "exclude"), nil)...)
	return &ignorer{root: root, base: base, perDi: map[string][]gitignore.Pattern{}}
}

func readPatterns(file string, domain []string) []gitignore.Pattern {
	f, err := os.Open(file)
	if err != nil {
		return nil
	}
	defer f.Close()
	var ps []gitignore.Pattern
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		s := sc.Text()
		if strings.HasPrefix(s, "#") || strings.TrimSpace(s) == "" {
			continue
		}
		ps = append(ps, gitignore.ParsePattern(s, domain))
	}
	return ps
}

func (ig *ignorer) dirPatterns(dir string) []gitignore.Pattern {
	if ps, ok := ig.perDi[dir]; ok {
		return ps
	}
	var domain []string
	if dir != "" {
		domain = strings.Split(dir, "/")
	}
	ps := readPatterns(filepath.Join(ig.root, filepath.FromSlash(dir), ".gitignore"), domain)
	ig.perDi[dir] = ps
	return ps
}

// match applies the patterns in effect for p (from the global ones down to p's own directory),
// the last matching pattern winning as in git.
func (ig *ignorer) match(p string, isDir bool) bool {
	parts := strings.Split(p, "/")
	pats := append([]gitignore.Pattern(nil), ig.base...)
	for i := range len(parts) {
		pats = append(pats, ig.dirPatterns(strings.Join(parts[:i], "/"))...)
	}
	return gitignore.NewMatcher(pats).Match(parts, isDir)
}

// ignored reports whether p or any directory above it is ignored.
func (ig *ignorer) ignored(p string, isDir bool) bool {
	if ig.extra[p] {
		return true
	}
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if ig.extra[d] || ig.match(d, true) {
			return true
		}
	}
	return ig.match(p, isDir)
}
