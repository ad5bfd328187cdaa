package gitstate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// ErrNotRepo reports a directory that is not inside a git repository's worktree.
var ErrNotRepo = errors.New("not a git repository")

// ErrNoCommits reports a repository whose HEAD names a branch with no commits yet.
var ErrNoCommits = errors.New("repository has no commits yet")

// ErrClosed reports work the Repo gave up because it was closed.
var ErrClosed = errors.New("the repository was closed")

// ErrDropped reports a held worktree whose write was given up ([Hold.Drop]) before it began.
var ErrDropped = errors.New("its files were dropped before they were written")

// Repo is one repository, owned by one lock: every method acquires it, so a Repo may be shared
// by many goroutines while go-git only ever sees one at a time.
type Repo struct {
	sem    chan struct{} // capacity 1: the lock, selectable against ctx
	root   string
	common string
	git    *gogit.Repository // guarded by sem
	store  *filesystem.Storage
	// packStamp is the pack directory's mtime when go-git last indexed it.
	packStamp time.Time
	// pending maps the names of worktrees whose files are being written without the lock to
	// their dirs.
	pending map[string]string
	fills   sync.WaitGroup // the writes StartWorktree runs
	// fillSlots bounds the background writes running at once (maxFills): 30 children
	// spawned in a row, each writing 20,000 files, would otherwise share the disk and the
	// cores 30 ways, and the next spawn, the turns and the first cells all wait behind them.
	fillSlots chan struct{}
	closing   chan struct{} // closed as Close begins: held writes give up (WorktreeSpec.Hold)
	closeOnce sync.Once
	// beforeFill, when set (tests), runs as a background write begins.
	beforeFill func(name string)
	// beforeScanOpen, when set (tests), runs before a checkpoint's scan opens the worktree
	// path p: the moment the code in a worktree could swap what is there.
	beforeScanOpen func(p string)
	onStep         func(name, step string) // see OnStep
	freeze         FreezeFunc              // see FreezeWith
	sizeMu         sync.Mutex
	sizes          map[string]int64 // TreeSize by commit
	pol            policy           // guarded by sem
	logger         *slog.Logger
}

// Open finds the repository containing dir (inside its main worktree, a linked worktree, or its
// git dir) and opens it. A nil logger discards logs.
func Open(dir string, logger *slog.Logger) (*Repo, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open repository %s: %w", dir, err)
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: %s (no such directory)", ErrNotRepo, dir)
	}
	common, err := findCommonDir(abs)
	if err != nil {
		return nil, err
	}
	if filepath.Base(common) != ".git" {
		return nil, fmt.Errorf("%w: %s (bare repositories are not supported: %s)", ErrNotRepo, dir, common)
	}
	if cfg, err := os.ReadFile(filepath.Join(common, "config")); err == nil &&
		strings.Contains(strings.ReplaceAll(strings.ToLower(string(cfg)), " ", ""), "objectformat=sha256") {
		return nil, fmt.Errorf("open repository %s: SHA-256 repositories are not supported yet", common)
	}
	root := filepath.Dir(common)
	// Pack file descriptors stay open between reads (a checkout reads thousands of objects;
	// reopening the pack for each was most of a fork's time), and BoundOS skips the per-call
	// symlink walk of billy's default chroot.
	st := filesystem.NewStorageWithOptions(osfs.New(common, osfs.WithBoundOS()),
		cache.NewObjectLRUDefault(), filesystem.Options{MaxOpenDescriptors: 16})
	g, err := gogit.Open(st, osfs.New(root, osfs.WithBoundOS()))
	if err != nil {
		return nil, fmt.Errorf("open repository %s: %w", root, err)
	}
	r := &Repo{sem: make(chan struct{}, 1), root: root, common: common, git: g, store: st, logger: logger, pending: map[string]string{},
		fillSlots: make(chan struct{}, maxFills), closing: make(chan struct{})}
	if err := r.refreshPolicy(context.Background()); err != nil {
		st.Close()
		return nil, fmt.Errorf("open repository %s: %w", root, err)
	}
	if why := or(r.pol.config, r.pol.attrs); why != "" {
		logger.Info("repository content goes through the git CLI", "root", root, "because", why)
	}
	return r, nil
}

// findCommonDir walks up from dir to the first .git entry and returns the absolute common git
// dir: the .git directory itself, or, for a linked worktree's .git file, the commondir its
// admin directory names.
func findCommonDir(dir string) (string, error) {
	for p := dir; ; {
		dotgit := filepath.Join(p, ".git")
		fi, err := os.Lstat(dotgit)
		if err == nil && fi.IsDir() {
			return resolveSymlinks(dotgit), nil
		}
		if common, ok := arborCommonDir(p); ok {
			// One of Arbor's worktrees, whose .git file the code running in it can rewrite:
			// its repository is where the worktree lives, not where that file says.
			return resolveSymlinks(common), nil
		}
		if err == nil && fi.Mode().IsRegular() {
			admin, err := readGitFile(dotgit)
			if err != nil {
				return "", fmt.Errorf("%w: %s (%v)", ErrNotRepo, dir, err)
			}
			common, err := readCommonDir(admin)
			if err != nil {
				return "", fmt.Errorf("%w: %s (%v)", ErrNotRepo, dir, err)
			}
			return resolveSymlinks(common), nil
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", fmt.Errorf("%w: %s", ErrNotRepo, dir)
		}
		p = parent
	}
}

// arborCommonDir recognises a worktree gitstate made, at <common>/arbor/worktrees/<name> and
// registered in <common>/worktrees/<name>, and returns its common dir.
func arborCommonDir(dir string) (string, bool) {
	name := filepath.Base(dir)
	parent := filepath.Dir(dir)
	common := filepath.Dir(filepath.Dir(parent))
	if filepath.Base(parent) != "worktrees" || filepath.Base(filepath.Dir(parent)) != "arbor" || filepath.Base(common) != ".git" {
		return "", false
	}
	b, err := os.ReadFile(filepath.Join(common, "worktrees", name, "gitdir"))
	if err != nil || filepath.Clean(strings.TrimSpace(string(b))) != filepath.Join(dir, ".git") {
		return "", false
	}
	return common, true
}

func resolveSymlinks(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// readGitFile reads a ".git" file ("gitdir: <path>") and returns the absolute admin dir.
func readGitFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	line := strings.TrimSpace(string(b))
	rest, ok := strings.CutPrefix(line, "gitdir:")
	if !ok {
		return "", fmt.Errorf("%s: expected \"gitdir: <path>\", found %q", path, line)
	}
	admin := strings.TrimSpace(rest)
	if !filepath.IsAbs(admin) {
		admin = filepath.Join(filepath.Dir(path), admin)
	}
	return filepath.Clean(admin), nil
}

// readCommonDir returns the common dir a linked worktree's admin dir points to.
func readCommonDir(admin string) (string, error) {
	b, err := os.ReadFile(filepath.Join(admin, "commondir"))
	if err != nil {
		return "", err
	}
	c := strings.TrimSpace(string(b))
	if !filepath.IsAbs(c) {
		c = filepath.Join(admin, c)
	}
	return filepath.Clean(c), nil
}

// Close releases the pack files the Repo keeps open. It waits for a running operation and
// for the worktrees StartWorktree is writing; those still held (WorktreeSpec.Hold) are left
// unwritten.
func (r *Repo) Close() error {
	r.closeOnce.Do(func() { close(r.closing) })
	r.fills.Wait()
	r.sem <- struct{}{}
	defer func() { <-r.sem }()
	return r.store.Close()
}

// Root is the top level of the main worktree.
func (r *Repo) Root() string { return r.root }

// CommonDir is the absolute git common dir (the main worktree's .git).
func (r *Repo) CommonDir() string { return r.common }

// lock takes the repository lock, or fails when ctx ends first.
func (r *Repo) lock(ctx context.Context) (func(), error) {
	select {
	case r.sem <- struct{}{}:
		r.refreshPacks()
		return func() { <-r.sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// refreshPacks makes go-git see pack files that appeared or vanished since the last call (a
// `git gc` or `git repack` by the user): go-git loads the pack indexes once and would
// otherwise miss every object that moved into a new pack. Callers hold the lock.
func (r *Repo) refreshPacks() {
	fi, err := os.Stat(filepath.Join(r.common, "objects", "pack"))
	if err != nil || fi.ModTime().Equal(r.packStamp) {
		return
	}
	if !r.packStamp.IsZero() {
		r.store.ObjectStorage.Reindex()
		if err := r.store.ObjectStorage.Close(); err != nil {
			r.logger.Warn("closing stale pack files", "err", err)
		}
	}
	r.packStamp = fi.ModTime()
}

// Head returns the main worktree's current branch (short name, "" when detached) and commit.
func (r *Repo) Head(ctx context.Context) (branch, commit string, err error) {
	unlock, err := r.lock(ctx)
	if err != nil {
		return "", "", fmt.Errorf("head of %s: %w", r.root, err)
	}
	defer unlock()
	name, hash, err := r.headAt(filepath.Join(r.common, "HEAD"))
	if err != nil {
		return "", "", fmt.Errorf("head of %s: %w", r.root, err)
	}
	return name.Short(), hash.String(), nil
}

// headAt reads a HEAD file (the main one or a linked worktree's) and resolves it. The branch
// name is empty when HEAD is detached; an unborn branch yields ErrNoCommits.
func (r *Repo) headAt(path string) (plumbing.ReferenceName, plumbing.Hash, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", plumbing.ZeroHash, err
	}
	s := strings.TrimSpace(string(b))
	if target, ok := strings.CutPrefix(s, "ref:"); ok {
		name := plumbing.ReferenceName(strings.TrimSpace(target))
		ref, err := r.git.Reference(name, true)
		if errors.Is(err, plumbing.ErrReferenceNotFound) {
			return name, plumbing.ZeroHash, fmt.Errorf("%w: branch %s is unborn; make a first commit", ErrNoCommits, name.Short())
		}
		if err != nil {
			return name, plumbing.ZeroHash, fmt.Errorf("resolve %s: %w", name, err)
		}
		return name, ref.Hash(), nil
	}
	if !plumbing.IsHash(s) {
		return "", plumbing.ZeroHash, fmt.Errorf("%s: unexpected content %q", path, s)
	}
	return "", plumbing.NewHash(s), nil
}

// resolve turns a commit hash, branch name, or other revision into a commit hash.
func (r *Repo) resolve(rev string) (plumbing.Hash, error) {
	if plumbing.IsHash(rev) {
		h := plumbing.NewHash(rev)
		if _, err := r.git.CommitObject(h); err != nil {
			return plumbing.ZeroHash, fmt.Errorf("commit %s: %w", rev, err)
		}
		return h, nil
	}
	for _, name := range []plumbing.ReferenceName{plumbing.ReferenceName(rev), plumbing.NewBranchReferenceName(rev), plumbing.NewTagReferenceName(rev)} {
		if ref, err := r.git.Reference(name, true); err == nil {
			c, err := r.git.CommitObject(ref.Hash())
			if err != nil {
				return plumbing.ZeroHash, fmt.Errorf("%s is not a commit: %w", rev, err)
			}
			return c.Hash, nil
		}
	}
	h, err := r.git.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("unknown revision %q: %w", rev, err)
	}
	return *h, nil
}
