package gitstate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// WorktreeSpec describes a new session branch and its linked worktree.
type WorktreeSpec struct {
	Name   string // admin name under <common>/worktrees/<Name> (the session id)
	Branch string // short branch name, e.g. "arbor/rename-foo-1a2b3c4d"; created at Base, error if it exists
	Base   string // commit hash (or any revision) the branch starts at
	Dir    string // absolute path of the new linked worktree, e.g. <common>/arbor/worktrees/<id>
	// Hold, when set, delays StartWorktree's write of the files until it is opened: the
	// branch and record exist at once, the directory only then (a session waiting for a run
	// slot takes no disk). Closing the Repo first leaves the worktree as a killed process
	// would, for the next start's Reconcile to write.
	Hold *Hold
}

// Hold keeps a worktree's files from being written (WorktreeSpec.Hold) until it is opened; it
// may be shut again while the write still waits for its turn (maxFills), and the write then
// waits for the next Open. Once the write has begun, it runs to its end.
type Hold struct {
	mu      sync.Mutex
	open    bool
	kept    bool // opened for good (Keep): Shut does nothing
	started bool
	dropped bool          // given up (Drop): the files are never written
	changed chan struct{} // closed and replaced on every change
}

// NewHold returns a shut hold.
func NewHold() *Hold { return &Hold{changed: make(chan struct{})} }

// Open lets the write begin (when its turn comes); it reports whether the hold was shut.
func (h *Hold) Open() bool { return h.set(true) }

// Keep opens the hold for good: something needs the files, so no Shut holds them back again.
// It reports whether the hold was shut.
func (h *Hold) Keep() bool {
	h.mu.Lock()
	h.kept = true
	h.mu.Unlock()
	return h.set(true)
}

// Shut holds the write again unless it has begun or was kept open; it reports whether it was
// open and not begun.
func (h *Hold) Shut() bool { return h.set(false) }

// Drop gives the write up for good unless it has begun: the files are never written, and the
// worktree's branch and record stay as a held one's do (for [Repo.Discard], or Reconcile). It
// reports whether the write was given up.
func (h *Hold) Drop() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.started || h.dropped {
		return false
	}
	h.dropped, h.open = true, false
	close(h.changed)
	h.changed = make(chan struct{})
	return true
}

func (h *Hold) set(open bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.started || h.dropped || h.open == open || (!open && h.kept) {
		return false
	}
	h.open = open
	close(h.changed)
	h.changed = make(chan struct{})
	return true
}

// Held reports whether the write neither began nor may begin.
func (h *Hold) Held() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.open && !h.started
}

// Dropped reports whether the write was given up (Drop).
func (h *Hold) Dropped() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dropped
}

// Started reports whether the write has begun.
func (h *Hold) Started() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.started
}

// acquire waits until the hold is open and a write slot is free, takes the slot and marks the
// write begun; false when closing ends first or the write was dropped (ErrDropped).
func (h *Hold) acquire(slots chan struct{}, closing <-chan struct{}) (ok bool, dropped bool) {
	for {
		h.mu.Lock()
		open, ch, dropped := h.open, h.changed, h.dropped
		h.mu.Unlock()
		if dropped {
			return false, true
		}
		if !open {
			select {
			case <-ch:
				continue
			case <-closing:
				return false, false
			}
		}
		select {
		case slots <- struct{}{}:
		case <-ch: // shut meanwhile
			continue
		case <-closing:
			return false, false
		}
		h.mu.Lock()
		if h.open {
			h.started = true
			h.mu.Unlock()
			return true, false
		}
		h.mu.Unlock()
		<-slots
	}
}

// Validate reports the first field that cannot work.
func (s WorktreeSpec) Validate() error {
	if s.Name == "" || s.Name == "." || s.Name == ".." || strings.ContainsAny(s.Name, "/\\ \t\n") {
		return fmt.Errorf("worktree name %q: want a non-empty name without slashes or spaces", s.Name)
	}
	if err := plumbing.NewBranchReferenceName(s.Branch).Validate(); err != nil || s.Branch == "" {
		return fmt.Errorf("branch name %q is not a valid git branch name", s.Branch)
	}
	if s.Base == "" {
		return errors.New("base commit is empty: want the commit the branch starts at")
	}
	if !filepath.IsAbs(s.Dir) {
		return fmt.Errorf("worktree dir %q: want an absolute path", s.Dir)
	}
	return nil
}

// AddWorktree creates branch spec.Branch at spec.Base and checks it out in a new linked worktree
// at spec.Dir, registered as <common>/worktrees/<spec.Name> exactly as `git worktree add` would.
// The user's main worktree and index are not touched. On failure nothing is left behind.
func (r *Repo) AddWorktree(ctx context.Context, spec WorktreeSpec) error {
	p, err := r.StartWorktree(ctx, spec)
	if err != nil {
		return err
	}
	return p.Wait(ctx)
}

// Pending is a worktree StartWorktree is writing in the background.
type Pending struct {
	done chan struct{}
	err  error
	took time.Duration
}

// Wait returns when the worktree is complete (nil) or rolled back (its error), or when ctx
// ends first (the worktree goes on being made).
func (p *Pending) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Done is closed when the worktree is complete or rolled back.
func (p *Pending) Done() <-chan struct{} { return p.done }

// Took is how long the files took to write, once Done.
func (p *Pending) Took() time.Duration { <-p.done; return p.took }

// maxFills is how many of StartWorktree's background writes run at once in a repository;
// the rest wait their turn, first come first served.
const maxFills = 2

// StartWorktree is AddWorktree returning once the branch and the record exist: the tree is
// listed and its files written in the background, without the lock, and the returned
// Pending says when they are. Meanwhile the branch can be read, diffed and forked;
// Checkpoint, RemoveWorktree and Reconcile refuse or skip the worktree. Registration is all
// that holds the lock, so forks started at once do not queue behind each other's trees. If
// the process dies before the files are written, Reconcile finds the record and either
// finishes the worktree (a known session) or cleans it up. The write runs to its end even
// when ctx ends; on failure the branch and record are rolled back as in AddWorktree.
func (r *Repo) StartWorktree(ctx context.Context, spec WorktreeSpec) (*Pending, error) {
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("add worktree: %w", err)
	}
	unlock, err := r.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("add worktree %s: %w", spec.Name, err)
	}
	base, err := r.beginBranch(spec)
	why := ""
	if err == nil {
		if why, err = r.repoReason(ctx); err != nil {
			r.rollbackBranch(spec, base)
		}
	}
	if err == nil {
		r.pending[spec.Name] = filepath.Clean(spec.Dir)
		r.fills.Add(1)
	}
	unlock()
	if err != nil {
		return nil, fmt.Errorf("add worktree %s: %w", spec.Name, err)
	}
	p := &Pending{done: make(chan struct{})}
	go func() {
		defer r.fills.Done()
		start := time.Now() // the wait for a slot is part of the write's time (not a hold's)
		if spec.Hold != nil {
			ok, dropped := spec.Hold.acquire(r.fillSlots, r.closing)
			start = time.Now()
			if !ok {
				unlock, _ := r.lock(context.WithoutCancel(ctx))
				delete(r.pending, spec.Name)
				unlock()
				p.err = fmt.Errorf("add worktree %s: %w before its files were written (the next start writes them)", spec.Name, ErrClosed)
				if dropped {
					p.err = fmt.Errorf("add worktree %s: %w", spec.Name, ErrDropped)
				}
				close(p.done)
				return
			}
		} else {
			r.fillSlots <- struct{}{}
		}
		defer func() { <-r.fillSlots }()
		if r.beforeFill != nil {
			r.beforeFill(spec.Name)
		}
		err := r.fillBranchWorktree(context.WithoutCancel(ctx), spec, base, why)
		p.took = time.Since(start)
		if err != nil {
			p.err = fmt.Errorf("add worktree %s: %w", spec.Name, err)
		} else {
			r.logger.Info("worktree added", "name", spec.Name, "branch", spec.Branch, "base", spec.Base, "dir", spec.Dir, "took", p.took)
		}
		close(p.done)
	}()
	return p, nil
}

// Fork starts a new session branch at a checkpoint commit (spec.Base) with its own worktree.
// The parent's branch and worktree are untouched.
func (r *Repo) Fork(ctx context.Context, spec WorktreeSpec) error {
	return r.AddWorktree(ctx, spec)
}

// RestoreWorktree checks an existing branch out into a new linked worktree, e.g. to bring back
// a session whose worktree was removed to save space.
func (r *Repo) RestoreWorktree(ctx context.Context, name, branch, dir string) error {
	spec := WorktreeSpec{Name: name, Branch: branch, Base: "-", Dir: dir}
	if err := spec.Validate(); err != nil {
		return fmt.Errorf("restore worktree: %w", err)
	}
	unlock, err := r.lock(ctx)
	if err != nil {
		return fmt.Errorf("restore worktree %s: %w", name, err)
	}
	defer unlock()
	r.restoreReleased(name, dir)
	ref, err := r.git.Storer.Reference(plumbing.NewBranchReferenceName(branch))
	if err != nil {
		return fmt.Errorf("restore worktree %s: branch %s: %w", name, branch, err)
	}
	if wt := r.checkedOutIn(ref.Name()); wt != "" {
		return fmt.Errorf("restore worktree %s: branch %s is already checked out in %s", name, branch, wt)
	}
	rec := record{Name: name, Branch: branch, Dir: filepath.Clean(dir), Base: ref.Hash().String()}
	if err := r.writeRecord(rec); err != nil {
		return fmt.Errorf("restore worktree %s: %w", name, err)
	}
	if err := r.linkWorktree(ctx, name, ref.Name(), ref.Hash(), dir); err != nil {
		r.removeRecord(name)
		return fmt.Errorf("restore worktree %s: %w", name, err)
	}
	return nil
}

// fillBranchWorktree lists the tree and writes the files without the lock (from an object
// store of its own), then takes the lock to write the index and lift the "initializing"
// marker. Other sessions' checkpoints and diffs, and other forks, proceed meanwhile.
func (r *Repo) fillBranchWorktree(ctx context.Context, spec WorktreeSpec, base plumbing.Hash, why string) error {
	st, closeReader := r.privateReader()
	p, err := r.prepareUnlocked(spec, base, st, why)
	var entries []*index.Entry
	if err == nil {
		entries, err = p.fill(ctx, st, r.common)
		r.logger.Debug("worktree files written", "name", spec.Name, "files", len(p.files))
	}
	closeReader()
	var data []byte
	if err == nil && p.withGit == "" {
		data = encodeIndex(entries).data // the admin dir is this worktree's alone: no lock
		err = writeIndexBytes(filepath.Join(p.admin, "index"), data)
	}
	unlock, lerr := r.lock(context.WithoutCancel(ctx)) // finishing or rolling back must happen
	if lerr != nil {
		return lerr
	}
	defer unlock()
	delete(r.pending, spec.Name)
	if err == nil {
		err = os.Remove(filepath.Join(p.admin, "locked"))
	}
	if err != nil {
		if p != nil {
			p.abort()
		}
		r.rollbackBranch(spec, base)
		return err
	}
	return nil
}

// rollbackBranch removes the branch (when it is still at base) and the record of a worktree
// that could not be made. Callers hold the lock.
func (r *Repo) rollbackBranch(spec WorktreeSpec, base plumbing.Hash) {
	branch := plumbing.NewBranchReferenceName(spec.Branch)
	if ref, rerr := r.git.Storer.Reference(branch); rerr == nil && ref.Hash() == base {
		r.git.Storer.RemoveReference(branch)
	}
	r.removeRecord(spec.Name)
}

// beginBranch writes the record and creates the branch. Callers hold the lock.
func (r *Repo) beginBranch(spec WorktreeSpec) (plumbing.Hash, error) {
	base, err := r.resolve(spec.Base)
	if err != nil {
		return base, err
	}
	branch := plumbing.NewBranchReferenceName(spec.Branch)
	if _, err := r.git.Storer.Reference(branch); err == nil {
		return base, fmt.Errorf("branch %s already exists", spec.Branch)
	}
	if _, err := os.Stat(r.recordPath(spec.Name)); err == nil {
		return base, fmt.Errorf("worktree name %q is taken (record %s exists)", spec.Name, r.recordPath(spec.Name))
	}
	if _, err := os.Lstat(r.adminDir(spec.Name)); err == nil {
		return base, fmt.Errorf("worktree name %q is taken (%s exists)", spec.Name, r.adminDir(spec.Name))
	}
	if err := checkEmptyDir(spec.Dir); err != nil {
		return base, err
	}
	if r.pendingAt(spec.Dir) {
		return base, fmt.Errorf("worktree dir %s is being made for another worktree", spec.Dir)
	}
	// The record goes first: if the process dies anywhere below, Reconcile finds it and
	// either finishes the worktree or cleans it up.
	rec := record{Name: spec.Name, Branch: spec.Branch, Dir: filepath.Clean(spec.Dir), Base: base.String()}
	if err := r.writeRecord(rec); err != nil {
		return base, err
	}
	if err := r.setRef(branch, base, &plumbing.ZeroHash); err != nil {
		r.removeRecord(spec.Name)
		return base, fmt.Errorf("create branch %s: %w", spec.Branch, err)
	}
	return base, nil
}

// pendingAt reports whether a worktree is being written at dir. Callers hold the lock.
func (r *Repo) pendingAt(dir string) bool {
	dir = filepath.Clean(dir)
	for _, d := range r.pending {
		if d == dir {
			return true
		}
	}
	return false
}

func checkEmptyDir(dir string) error {
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return fmt.Errorf("worktree dir %s exists and is not empty", dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("worktree dir %s: %w", dir, err)
	}
	return nil
}

// adminDir is where git keeps a linked worktree's HEAD, index and back-pointer.
func (r *Repo) adminDir(name string) string { return filepath.Join(r.common, "worktrees", name) }

// pendingWorktree is a linked worktree being made: registered and marked "initializing", its
// files not yet all written.
type pendingWorktree struct {
	admin, dir string
	files      []treeFile
	withGit    string // why git itself checks the files out (see doc.go), or ""
}

// fill writes the worktree's files, without the lock: from an object store of its own, or by
// git. It returns the index entries to write, or nil when git wrote the index.
func (p *pendingWorktree) fill(ctx context.Context, st storer.EncodedObjectStorer, common string) ([]*index.Entry, error) {
	if p.withGit != "" {
		return nil, checkoutWithGit(ctx, gitAt{work: p.dir, gitDir: p.admin, common: common})
	}
	return checkout(ctx, func(h plumbing.Hash) ([]byte, error) { return readBlobFrom(st, h) }, common, p.dir, p.files)
}

// abort removes what was made.
func (p *pendingWorktree) abort() {
	os.RemoveAll(p.dir)
	os.RemoveAll(p.admin)
}

// linkWorktree checks out an existing branch (at commit) into a new linked worktree, all under
// the lock. Callers hold the lock.
func (r *Repo) linkWorktree(ctx context.Context, name string, branch plumbing.ReferenceName, commit plumbing.Hash, dir string) error {
	p, err := r.prepareWorktree(ctx, name, branch, commit, dir)
	if err != nil {
		return err
	}
	var entries []*index.Entry
	if p.withGit != "" {
		err = checkoutWithGit(ctx, r.linkedAt(p.dir, p.admin))
	} else {
		entries, err = checkout(ctx, r.readBlob, r.common, p.dir, p.files)
	}
	if err == nil {
		err = r.finishWorktree(p, entries)
	}
	if err != nil {
		p.abort()
	}
	return err
}

// prepareWorktree registers a linked worktree the way `git worktree add` does, holding a
// "locked: initializing" marker until finishWorktree, so neither `git worktree prune` nor
// Reconcile mistakes a half-made worktree for a dead one; it lists the files to check out.
// Callers hold the lock.
func (r *Repo) prepareWorktree(ctx context.Context, name string, branch plumbing.ReferenceName, commit plumbing.Hash, dir string) (*pendingWorktree, error) {
	dir = filepath.Clean(dir)
	if _, err := os.Lstat(r.adminDir(name)); err == nil {
		return nil, fmt.Errorf("worktree name %q is taken (%s exists)", name, r.adminDir(name))
	}
	if err := checkEmptyDir(dir); err != nil {
		return nil, err
	}
	return r.registerWorktree(name, branch, commit, dir, r.git.Storer, func(files []treeFile) (string, error) {
		return r.treeReason(ctx, files)
	})
}

// prepareUnlocked is prepareWorktree for a worktree StartWorktree reserved (its name and
// dir checked, marked pending, the repository's checkout policy why read): it runs without
// the lock, reading the tree and its .gitattributes from st, so forks made at once do not
// queue for the lock behind each other.
func (r *Repo) prepareUnlocked(spec WorktreeSpec, commit plumbing.Hash, st storer.EncodedObjectStorer, why string) (*pendingWorktree, error) {
	return r.registerWorktree(spec.Name, plumbing.NewBranchReferenceName(spec.Branch), commit, filepath.Clean(spec.Dir), st,
		func(files []treeFile) (string, error) {
			if why != "" {
				return why, nil
			}
			for _, f := range files {
				if !isAttrFile(f.path) {
					continue
				}
				if b, err := readBlobFrom(st, f.hash); err != nil || attrsChangeContent(b) {
					return f.path, nil // unreadable: assume the worst, as treeReason does
				}
			}
			return "", nil
		})
}

// registerWorktree writes the admin dir and the worktree's .git file, and lists the files to
// check out (from st) and the policy for them (from reason).
func (r *Repo) registerWorktree(name string, branch plumbing.ReferenceName, commit plumbing.Hash, dir string,
	st storer.EncodedObjectStorer, reason func([]treeFile) (string, error)) (_ *pendingWorktree, err error) {
	admin := r.adminDir(name)
	c, err := object.GetCommit(st, commit)
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", commit, err)
	}
	if err := os.MkdirAll(admin, 0o777); err != nil {
		return nil, err
	}
	p := &pendingWorktree{admin: admin, dir: dir}
	defer func() {
		if err != nil {
			p.abort()
		}
	}()
	files := map[string]string{
		"locked":    "initializing\n",
		"commondir": "../..\n",
		"gitdir":    filepath.Join(dir, ".git") + "\n",
		"HEAD":      "ref: " + branch.String() + "\n",
	}
	for _, f := range []string{"locked", "commondir", "gitdir", "HEAD"} {
		if err := os.WriteFile(filepath.Join(admin, f), []byte(files[f]), 0o666); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, ".git"), gitFileFor(admin), 0o666); err != nil {
		return nil, err
	}
	if p.files, err = listTreeFrom(st, c.TreeHash, "", nil); err != nil {
		return nil, err
	}
	if p.withGit, err = reason(p.files); err != nil {
		return nil, err
	}
	return p, nil
}

// finishWorktree writes the index (unless git did) and lifts the "initializing" marker.
// Callers hold the lock.
func (r *Repo) finishWorktree(p *pendingWorktree, entries []*index.Entry) error {
	if p.withGit == "" {
		if err := writeIndexBytes(filepath.Join(p.admin, "index"), encodeIndex(entries).data); err != nil {
			return err
		}
	}
	return os.Remove(filepath.Join(p.admin, "locked"))
}
