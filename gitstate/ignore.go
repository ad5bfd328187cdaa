package gitstate

import (
	"bufio"
	"bytes"
	"io"
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
	return parsePatterns(f, domain)
}

func parsePatterns(r io.Reader, domain []string) []gitignore.Pattern {
	var ps []gitignore.Pattern
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		s := sc.Text()
		if strings.HasPrefix(s, "#") || strings.TrimSpace(s) == "" {
			continue
		}
		ps = append(ps, gitignore.ParsePattern(s, domain))
	}
	return ps
}

// readPatternsBeneath reads the .gitignore of dir (relative to the worktree at root) the way
// git reads one in a worktree: never through a symlink (in the path or the file itself).
func readPatternsBeneath(root, dir string, domain []string) []gitignore.Pattern {
	d, err := openDirBeneath(root, dir)
	if err != nil {
		return nil
	}
	defer d.close()
	b, err := d.readFile(".gitignore")
	if err != nil {
		return nil
	}
	return parsePatterns(bytes.NewReader(b), domain)
}

// loadFrom reads dir's .gitignore through d, dir's open descriptor, unless it was read: a
// scan passing through dir has it open already.
func (ig *ignorer) loadFrom(dir string, d *dirStater) {
	if _, ok := ig.perDi[dir]; ok {
		return
	}
	var ps []gitignore.Pattern
	if b, err := d.readFile(".gitignore"); err == nil {
		ps = parsePatterns(bytes.NewReader(b), domainOf(dir))
	}
	ig.perDi[dir] = ps
}

func domainOf(dir string) []string {
	if dir == "" {
		return nil
	}
	return strings.Split(dir, "/")
}

func (ig *ignorer) dirPatterns(dir string) []gitignore.Pattern {
	if ps, ok := ig.perDi[dir]; ok {
		return ps
	}
	ps := readPatternsBeneath(ig.root, dir, domainOf(dir))
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
