package gitstate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// contentAttrs are the gitattributes that change a file's bytes between the worktree and the
// object store (eol conversion, clean/smudge filters, ident, re-encoding) or how a diff treats
// it (binary, diff drivers). Any other attribute (linguist-*, export-ignore, merge, …) leaves
// gitstate's own code equal to git's.
var contentAttrs = map[string]bool{
	"text": true, "crlf": true, "eol": true, "filter": true, "ident": true,
	"working-tree-encoding": true, "diff": true, "binary": true,
}

// attrsChangeContent reports whether gitattributes text sets, unsets or defines a macro over
// any of contentAttrs. It errs on the side of yes: a pattern it cannot parse still has its
// attributes looked at.
func attrsChangeContent(data []byte) bool {
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		for _, a := range f[1:] {
			name, _, _ := strings.Cut(strings.TrimLeft(a, "-!"), "=")
			if contentAttrs[name] {
				return true
			}
		}
	}
	return false
}

func isAttrFile(p string) bool {
	return p == ".gitattributes" || strings.HasSuffix(p, "/.gitattributes")
}

// policy caches what the repository's configuration says about the fast path, keyed by the
// stat data of the files it was read from, so a changed config is noticed at the next
// operation without running git each time.
type policy struct {
	stamp    string
	config   string // the setting that sends all content through git, or ""
	attrs    string // an info/ or global attributes file that does, or ""
	attrFile string // core.attributesFile, as configured
	blobs    map[plumbing.Hash]bool
	// The main worktree's index, for diffs: its stat data and the .gitattributes it tracks.
	mainStamp string
	mainAttrs []treeFile
}

// configFiles lists the files git reads configuration and repository-wide attributes from:
// the config files, then attrFiles.
func (r *Repo) configFiles() []string {
	home, xdg := userDirs()
	files := []string{filepath.Join(r.common, "config")}
	if g, ok := os.LookupEnv("GIT_CONFIG_GLOBAL"); ok {
		files = append(files, g)
	} else {
		files = append(files, filepath.Join(home, ".gitconfig"), filepath.Join(xdg, "git", "config"))
	}
	if os.Getenv("GIT_CONFIG_NOSYSTEM") == "" {
		files = append(files, or(os.Getenv("GIT_CONFIG_SYSTEM"), "/etc/gitconfig"))
	}
	return append(files, r.attrFiles()...)
}

// attrFiles lists the attributes files that apply to every worktree: info/attributes, the
// default global one and core.attributesFile.
func (r *Repo) attrFiles() []string {
	home, xdg := userDirs()
	return []string{filepath.Join(r.common, "info", "attributes"), filepath.Join(xdg, "git", "attributes"),
		expandHome(r.pol.attrFile, home)}
}

func userDirs() (home, xdg string) {
	home, _ = os.UserHomeDir()
	xdg = os.Getenv("XDG_CONFIG_HOME")
	if xdg == "" && home != "" {
		xdg = filepath.Join(home, ".config")
	}
	return home, xdg
}

func expandHome(p, home string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		return filepath.Join(home, rest)
	}
	return p
}

func (r *Repo) configStamp() string {
	var b strings.Builder
	for _, f := range r.configFiles() {
		fi, err := os.Stat(f)
		if err != nil {
			fmt.Fprintf(&b, "%s:-;", f)
			continue
		}
		fmt.Fprintf(&b, "%s:%d:%d;", f, fi.Size(), fi.ModTime().UnixNano())
	}
	for _, k := range []string{"GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT"} {
		b.WriteString(os.Getenv(k) + ";")
	}
	return b.String()
}

// refreshPolicy rereads the configuration when one of its files changed. Callers hold the lock.
func (r *Repo) refreshPolicy(ctx context.Context) error {
	stamp := r.configStamp()
	if stamp == r.pol.stamp {
		return nil
	}
	out, err := runGit(ctx, r.mainAt(), nil, "config", "-z", "--get-regexp", `^core\.(autocrlf|filemode|symlinks|ignorecase|attributesfile)$`)
	if err != nil && exitCode(err) != 1 { // 1: none of them is set
		return fmt.Errorf("read git config: %w", err)
	}
	p := policy{blobs: r.pol.blobs, mainStamp: r.pol.mainStamp, mainAttrs: r.pol.mainAttrs}
	if p.blobs == nil {
		p.blobs = map[plumbing.Hash]bool{}
	}
	settings := map[string]string{}
	for rec := range strings.SplitSeq(out, "\x00") {
		if k, v, ok := strings.Cut(rec, "\n"); ok {
			settings[k] = strings.ToLower(strings.TrimSpace(v))
		}
	}
	p.config = configReason(settings)
	p.attrFile = settings["core.attributesfile"]
	r.pol = p
	for _, f := range r.attrFiles() {
		if f == "" {
			continue
		}
		if b, err := os.ReadFile(f); err == nil && attrsChangeContent(b) {
			r.pol.attrs = f
			break
		}
	}
	r.pol.stamp = r.configStamp() // after attrFile is known, so it is stamped too
	return nil
}

// configReason names the first setting under which git's content differs from the bytes on
// disk or in the object store, or "".
func configReason(s map[string]string) string {
	isTrue := func(v string) bool { return v == "true" || v == "yes" || v == "on" || v == "1" || v == "" }
	isFalse := func(v string) bool { return v == "false" || v == "no" || v == "off" || v == "0" }
	if v, ok := s["core.autocrlf"]; ok && (v == "input" || isTrue(v)) {
		return "core.autocrlf=" + v
	}
	for _, k := range []string{"core.filemode", "core.symlinks"} {
		if v, ok := s[k]; ok && isFalse(v) {
			return k + "=false"
		}
	}
	if v, ok := s["core.ignorecase"]; ok && isTrue(v) {
		return "core.ignorecase=true"
	}
	return ""
}

// blobChangesContent reports whether a .gitattributes blob sets content attributes. Callers
// hold the lock.
func (r *Repo) blobChangesContent(h plumbing.Hash) bool {
	if v, ok := r.pol.blobs[h]; ok {
		return v
	}
	b, err := r.readBlob(h)
	v := err != nil || attrsChangeContent(b) // unreadable: assume the worst
	r.pol.blobs[h] = v
	return v
}

// repoReason says why every worktree of the repository takes the CLI path, or "".
func (r *Repo) repoReason(ctx context.Context) (string, error) {
	if err := r.refreshPolicy(ctx); err != nil {
		return "", err
	}
	return or(r.pol.config, r.pol.attrs), nil
}

// treeReason is the policy for checking out files: the repository's, or a .gitattributes
// among them that changes content. Callers hold the lock.
func (r *Repo) treeReason(ctx context.Context, files []treeFile) (string, error) {
	if why, err := r.repoReason(ctx); why != "" || err != nil {
		return why, err
	}
	for _, f := range files {
		if isAttrFile(f.path) && r.blobChangesContent(f.hash) {
			return f.path, nil
		}
	}
	return "", nil
}

// indexReason is the policy for a worktree's checkpoint: the repository's, or a tracked
// .gitattributes that changes content. A new or edited one is caught by the scan
// ([scan.attrFiles]). Callers hold the lock.
func (r *Repo) indexReason(ctx context.Context, x *rawIndex) (string, error) {
	if why, err := r.repoReason(ctx); why != "" || err != nil {
		return why, err
	}
	for i := range x.len() {
		if n := x.nameBytes(i); bytes.HasSuffix(n, []byte(".gitattributes")) && isAttrFile(string(n)) &&
			x.stage(i) == stageMerged && r.blobChangesContent(x.hash(i)) {
			return string(n), nil
		}
	}
	return "", nil
}

// diffReason is the policy for diffs between commits. Those compare stored blobs, so eol and
// filter settings do not matter, but `binary`, `-diff` and diff drivers do; git takes them
// from the main worktree's attributes, which are read here the same way (the file on disk
// where there is one, else the index's). Callers hold the lock.
func (r *Repo) diffReason(ctx context.Context) (string, error) {
	if err := r.refreshPolicy(ctx); err != nil {
		return "", err
	}
	if r.pol.attrs != "" {
		return r.pol.attrs, nil
	}
	attrs, err := r.mainAttrFiles()
	if err != nil {
		return "", err
	}
	for _, f := range attrs {
		b, err := os.ReadFile(filepath.Join(r.root, filepath.FromSlash(f.path)))
		switch {
		case err == nil && attrsChangeContent(b):
			return f.path, nil
		case errors.Is(err, fs.ErrNotExist) && r.blobChangesContent(f.hash):
			return f.path, nil
		}
	}
	return "", nil
}

// mainAttrFiles lists the .gitattributes files in the main worktree's index, reading the index
// only when it changed. Callers hold the lock.
func (r *Repo) mainAttrFiles() ([]treeFile, error) {
	p := filepath.Join(r.common, "index")
	stamp := "-"
	if fi, err := os.Stat(p); err == nil {
		stamp = fmt.Sprintf("%d:%d", fi.Size(), fi.ModTime().UnixNano())
	}
	if stamp == r.pol.mainStamp {
		return r.pol.mainAttrs, nil
	}
	x, err := loadIndex(p)
	if err != nil {
		return nil, fmt.Errorf("read the main index: %w", err)
	}
	var files []treeFile
	for i := range x.len() {
		if n := x.nameBytes(i); bytes.HasSuffix(n, []byte(".gitattributes")) && isAttrFile(string(n)) && x.stage(i) == stageMerged {
			files = append(files, treeFile{path: string(n), hash: x.hash(i)})
		}
	}
	r.pol.mainStamp, r.pol.mainAttrs = stamp, files
	return files, nil
}

// newAttrsReason checks the .gitattributes files a scan met on disk. Callers hold the lock.
func (r *Repo) newAttrsReason(s *scan) string {
	for _, p := range s.attrFiles {
		if tf := s.changes[p]; tf != nil && r.blobChangesContent(tf.hash) {
			return p
		}
	}
	return ""
}

// under reports whether p is scope or below it ("" holds everything).
func under(p, scope string) bool {
	return scope == "" || p == scope || strings.HasPrefix(p, scope+"/")
}

// excludedBy reports whether p is one of paths or lies below one.
func excludedBy(p string, paths []string) bool {
	p = strings.TrimSuffix(p, "/")
	for _, e := range paths {
		if e = path.Clean(e); e != "." && under(p, e) {
			return true
		}
	}
	return false
}
