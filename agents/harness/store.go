package harness

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/arborhq/arbor/gitstate"
)

// Change says who made a change and why; it becomes the commit's trailers.
type Change struct {
	Author   string   // "agent", "user" or "refine"
	Session  string   // the session it came from, if any
	Turn     int      // that session's turn, if any
	Trigger  []uint64 // the event seqs that prompted it
	Intended string   // the effect the author expects
	Observed string   // the effect measured, once it is
	Proposal string   // the proposal this change applies, if it applies one
}

// Validate checks the author.
func (c Change) Validate() error {
	switch c.Author {
	case "agent", "user", "refine":
		return nil
	}
	return fmt.Errorf("%w: change author %q: want agent, user or refine", ErrInvalid, c.Author)
}

// Version is one commit of an entry's (or a scope's) history.
type Version struct {
	Commit  string    `json:"commit"`
	Time    time.Time `json:"time"`
	Subject string    `json:"subject"`
	Change  Change    `json:"change"`
}

// ErrNotFound means no entry of that kind and id exists (at that version).
var ErrNotFound = errors.New("no such harness entry")

// StaleError refuses a write based on a version that is no longer the entry's current one.
type StaleError struct {
	Kind          Kind
	ID            string
	Read, Current string // "" = did not exist
}

func (e *StaleError) Error() string {
	switch {
	case e.Current == "":
		return fmt.Sprintf("%s %s was deleted after version %s; read it again", e.Kind, e.ID, short(e.Read))
	case e.Read == "":
		return fmt.Sprintf("%s %s already exists (version %s); update it with that version", e.Kind, e.ID, short(e.Current))
	}
	return fmt.Sprintf("%s %s changed since version %s: the current version is %s; read it again and reapply your edit", e.Kind, e.ID, short(e.Read), short(e.Current))
}

func short(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

// Store is one scope's harness: a history of commits on a ref of a git repository's object
// store, whose tree the git CLI reads like any other (`git log -p <ref>`, `git show
// <ref>:notes/x.md`). Every change is a commit with trailers; a rollback is a new commit. Writes
// name the version they read and are refused when it is stale; the ref moves by compare and
// swap, so two daemons (or a daemon and the CLI) cannot lose each other's changes.
type Store struct {
	gitDir string
	ref    string
	mu     sync.Mutex // one writer at a time in this process
}

// Open returns the store on ref of the repository whose git directory (a common dir, or a bare
// repository) is gitDir. Nothing is written until the first change.
func Open(gitDir, ref string) (*Store, error) {
	if !strings.HasPrefix(ref, "refs/arbor/harness/") {
		return nil, fmt.Errorf("harness ref %q: want refs/arbor/harness/…", ref)
	}
	if fi, err := os.Stat(gitDir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("harness store: git directory %s: not a directory", gitDir)
	}
	return &Store{gitDir: gitDir, ref: ref}, nil
}

// InitBare makes dir a bare repository (for the global scope) unless it is one already.
func InitBare(ctx context.Context, dir string) error {
	if _, err := os.Stat(path.Join(dir, "HEAD")); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("global harness %s: %w", dir, err)
	}
	if _, err := git(ctx, dir, nil, nil, "init", "-q", "--bare"); err != nil {
		return fmt.Errorf("global harness %s: %w", dir, err)
	}
	return nil
}

// GitDir is the git directory the store's objects and ref are in.
func (s *Store) GitDir() string { return s.gitDir }

// Ref is the store's ref.
func (s *Store) Ref() string { return s.ref }

// Head returns the newest commit of the store, or "" before the first change.
func (s *Store) Head(ctx context.Context) (string, error) {
	cmd := s.cmd(ctx, nil, "for-each-ref", "--format=%(objectname)", s.ref)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("harness %s: git for-each-ref: %w: %s", s.ref, err, strings.TrimSpace(stderr.String()))
	}
	// git skips a ref whose file holds no object id with a warning: that is a damaged store,
	// not an empty one (arbor fsck names it).
	if strings.Contains(stderr.String(), "ignoring broken ref") {
		return "", fmt.Errorf("harness %s is damaged: %s; arbor fsck says how to repair it", s.ref, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// Get returns the entry as of head.
func (s *Store) Get(ctx context.Context, k Kind, id string) (Entry, error) {
	head, err := s.Head(ctx)
	if err != nil {
		return Entry{}, err
	}
	return s.getAt(ctx, head, k, id)
}

// GetAt returns the entry as it was at commit.
func (s *Store) GetAt(ctx context.Context, commit string, k Kind, id string) (Entry, error) {
	return s.getAt(ctx, commit, k, id)
}

func (s *Store) getAt(ctx context.Context, commit string, k Kind, id string) (Entry, error) {
	if k.dir() == "" {
		_, err := ParseKind(string(k))
		return Entry{}, err
	}
	if commit == "" {
		return Entry{}, fmt.Errorf("%w: %s %s", ErrNotFound, k, id)
	}
	files, err := s.readFiles(ctx, commit, entryPath(k, id))
	if err != nil {
		return Entry{}, err
	}
	if len(files) == 0 {
		return Entry{}, fmt.Errorf("%w: %s %s", ErrNotFound, k, id)
	}
	e, err := decodeEntry(k, id, files)
	if err != nil {
		return Entry{}, err
	}
	if e.Version, err = s.lastChange(ctx, commit, entryPath(k, id)); err != nil {
		return Entry{}, err
	}
	return e, nil
}

// List returns every entry of kind k as of head, sorted by id, each with its version.
func (s *Store) List(ctx context.Context, k Kind) ([]Entry, error) {
	if k.dir() == "" {
		_, err := ParseKind(string(k))
		return nil, err
	}
	return s.list(ctx, []Kind{k})
}

// ListAll returns every entry as of head, by kind (as in [Kinds]) and then id, each with its
// version: what List of each kind gives, with one read of the tree and one walk of the
// history instead of one per kind.
func (s *Store) ListAll(ctx context.Context) ([]Entry, error) { return s.list(ctx, Kinds) }

// ListAllAt is ListAll as of commit ("" = the empty store): what a session pinned to that
// version of the harness sees.
func (s *Store) ListAllAt(ctx context.Context, commit string) ([]Entry, error) {
	if commit == "" {
		return []Entry{}, nil
	}
	return s.listAt(ctx, commit, Kinds)
}

// Resolve names the commit rev is in the store's object database (a full or abbreviated id,
// a proposal's ref), or says why not.
func (s *Store) Resolve(ctx context.Context, rev string) (string, error) {
	out, err := s.git(ctx, nil, nil, "rev-parse", "--verify", "--quiet", "--end-of-options", rev+"^{commit}")
	if err != nil || strings.TrimSpace(out) == "" {
		return "", fmt.Errorf("%w: %q is not a commit of the harness in %s", ErrNotFound, rev, s.gitDir)
	}
	return strings.TrimSpace(out), nil
}

func (s *Store) list(ctx context.Context, kinds []Kind) ([]Entry, error) {
	head, err := s.Head(ctx)
	if err != nil || head == "" {
		return nil, err
	}
	return s.listAt(ctx, head, kinds)
}

func (s *Store) listAt(ctx context.Context, head string, kinds []Kind) ([]Entry, error) {
	dirs := make([]string, len(kinds))
	for i, k := range kinds {
		dirs[i] = k.dir()
	}
	files, err := s.readFiles(ctx, head, dirs...)
	if err != nil {
		return nil, err
	}
	versions, err := s.lastChanges(ctx, head, dirs)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, k := range kinds {
		byID := map[string]map[string][]byte{}
		for p, b := range files {
			rest, ok := strings.CutPrefix(p, k.dir()+"/")
			if !ok {
				continue
			}
			id, _, _ := strings.Cut(rest, "/")
			id = strings.TrimSuffix(strings.TrimSuffix(id, ".md"), ".json")
			if byID[id] == nil {
				byID[id] = map[string][]byte{}
			}
			byID[id][p] = b
		}
		es := make([]Entry, 0, len(byID))
		for id, fs := range byID {
			e, err := decodeEntry(k, id, fs)
			if err != nil {
				return nil, err
			}
			e.Version = versions[k.dir()+"/"+id]
			es = append(es, e)
		}
		sort.Slice(es, func(i, j int) bool { return es[i].ID < es[j].ID })
		out = append(out, es...)
	}
	if out == nil {
		out = []Entry{}
	}
	return out, nil
}

// Put creates (base "") or updates (base = the version read) an entry, as one commit. A stale
// base is refused with a *StaleError. Storing what is already there changes nothing and
// returns the current version.
func (s *Store) Put(ctx context.Context, e Entry, base string, ch Change) (string, error) {
	if err := e.Validate(); err != nil {
		return "", err
	}
	op := "update"
	if base == "" {
		op = "create"
	}
	return s.change(ctx, e.Kind, e.ID, base, ch, op+" "+string(e.Kind)+" "+e.ID+": "+e.Title, e.files())
}

// Delete removes an entry, as one commit; base is the version read.
func (s *Store) Delete(ctx context.Context, k Kind, id, base string, ch Change) (string, error) {
	if base == "" {
		return "", fmt.Errorf("%w: delete %s %s: name the version you read", ErrInvalid, k, id)
	}
	return s.change(ctx, k, id, base, ch, "delete "+string(k)+" "+id, nil)
}

// Rollback makes a new commit in which the entry is as it was at version (absent, if it did not
// exist there). History is never rewritten: the rolled-back change stays in the log.
func (s *Store) Rollback(ctx context.Context, k Kind, id, version string, ch Change) (string, error) {
	old, err := s.getAt(ctx, version, k, id)
	var files []file
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return "", err
	default:
		files = old.files()
	}
	cur, err := s.Get(ctx, k, id)
	base := cur.Version
	if err != nil && !errors.Is(err, ErrNotFound) {
		return "", err
	}
	if base == "" && files == nil {
		return "", fmt.Errorf("%w: %s %s exists neither now nor at %s", ErrNotFound, k, id, short(version))
	}
	return s.change(ctx, k, id, base, ch, fmt.Sprintf("rollback %s %s to %s", k, id, short(version)), files)
}

// errMoved means another writer moved the ref between reading and updating it.
var errMoved = errors.New("the harness ref moved")

// edit is one entry's change within a commit: its files replaced by files (nil removes it),
// allowed only while the entry's current version is base.
type edit struct {
	k     Kind
	id    string
	base  string
	files []file
}

// change replaces the entry's files with files (nil: removes it) in one commit on top of head.
func (s *Store) change(ctx context.Context, k Kind, id, base string, ch Change, subject string, files []file) (string, error) {
	return s.commitEdits(ctx, []edit{{k, id, base, files}}, ch, subject)
}

// commitEdits makes the edits one commit on the ref. Losing the ref's compare and swap to
// another process's change of another entry is not the caller's problem: it tries again on the
// new head, where every base is checked again.
func (s *Store) commitEdits(ctx context.Context, edits []edit, ch Change, subject string) (string, error) {
	if err := ch.Validate(); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for try := 0; ; try++ {
		head, err := s.Head(ctx)
		if err != nil {
			return "", err
		}
		commit, changed, err := s.build(ctx, head, edits, ch, subject)
		if err != nil || !changed {
			return commit, err
		}
		err = s.moveRef(ctx, head, commit, subject)
		if err == nil {
			return commit, nil
		}
		if !errors.Is(err, errMoved) || try == 20 {
			return "", err
		}
	}
}

// build writes the commit of edits on top of head without moving any ref. Unchanged (the tree
// is head's) returns head's version of the first entry and changed false.
func (s *Store) build(ctx context.Context, head string, edits []edit, ch Change, subject string) (commit string, changed bool, _ error) {
	var first string
	for i, e := range edits {
		cur := ""
		if head != "" {
			var err error
			if cur, err = s.lastChangeIfPresent(ctx, head, entryPath(e.k, e.id)); err != nil {
				return "", false, err
			}
		}
		if cur != e.base {
			return "", false, &StaleError{Kind: e.k, ID: e.id, Read: e.base, Current: cur}
		}
		if i == 0 {
			first = cur
		}
	}
	tmp, err := os.MkdirTemp("", "arbor-harness-")
	if err != nil {
		return "", false, fmt.Errorf("harness: %w", err)
	}
	defer os.RemoveAll(tmp)
	env := []string{"GIT_INDEX_FILE=" + path.Join(tmp, "index")}
	if head != "" {
		_, err = s.git(ctx, env, nil, "read-tree", head)
	} else {
		_, err = s.git(ctx, env, nil, "read-tree", "--empty")
	}
	if err != nil {
		return "", false, err
	}
	// One --index-info batch: mode 0 removes every file of each entry, then its new files.
	var info bytes.Buffer
	for _, e := range edits {
		old, err := s.git(ctx, env, nil, "ls-files", "-z", "--", entryPath(e.k, e.id))
		if err != nil {
			return "", false, err
		}
		for f := range strings.SplitSeq(old, "\x00") {
			if f != "" {
				fmt.Fprintf(&info, "0 %s\t%s\n", strings.Repeat("0", 40), f)
			}
		}
		for _, f := range e.files {
			blob, err := s.git(ctx, nil, f.data, "hash-object", "-w", "--stdin")
			if err != nil {
				return "", false, err
			}
			fmt.Fprintf(&info, "100644 %s\t%s\n", strings.TrimSpace(blob), f.path)
		}
	}
	if _, err := s.git(ctx, env, info.Bytes(), "update-index", "--index-info"); err != nil {
		return "", false, err
	}
	tree, err := s.git(ctx, env, nil, "write-tree")
	if err != nil {
		return "", false, err
	}
	tree = strings.TrimSpace(tree)
	if head != "" {
		if headTree, err := s.git(ctx, nil, nil, "rev-parse", head+"^{tree}"); err == nil && strings.TrimSpace(headTree) == tree {
			return first, false, nil // nothing changed
		}
	}
	args := []string{"commit-tree", tree}
	if head != "" {
		args = append(args, "-p", head)
	}
	commit, err = s.git(ctx, signature, []byte(message(subject, ch)), args...)
	if err != nil {
		return "", false, err
	}
	return strings.TrimSpace(commit), true, nil
}

// moveRef moves the ref from head to commit by compare and swap: another writer that moved it
// meanwhile makes this one fail with errMoved.
func (s *Store) moveRef(ctx context.Context, head, commit, subject string) error {
	old := head
	if old == "" {
		old = strings.Repeat("0", 40)
	}
	if _, err := s.git(ctx, nil, nil, "update-ref", "-m", "arbor harness: "+oneLine(subject), s.ref, commit, old); err != nil {
		if now, herr := s.Head(ctx); herr == nil && now != head {
			return fmt.Errorf("%w while %q was written: %w", errMoved, oneLine(subject), err)
		}
		return err
	}
	return nil
}

var signature = []string{"GIT_AUTHOR_NAME=Arbor", "GIT_AUTHOR_EMAIL=arbor@localhost",
	"GIT_COMMITTER_NAME=Arbor", "GIT_COMMITTER_EMAIL=arbor@localhost"}

// Trailer keys, as `git log --format=%(trailers)` shows them.
const (
	trailerAuthor   = "Arbor-Author"
	trailerSession  = "Arbor-Session"
	trailerTurn     = "Arbor-Turn"
	trailerTrigger  = "Arbor-Trigger"
	trailerIntended = "Arbor-Intended-Effect"
	trailerObserved = "Arbor-Observed-Effect"
	trailerProposal = "Arbor-Proposal"
)

func message(subject string, ch Change) string {
	var b strings.Builder
	b.WriteString(oneLine(subject))
	b.WriteString("\n\n")
	fmt.Fprintf(&b, "%s: %s\n", trailerAuthor, ch.Author)
	if ch.Session != "" {
		fmt.Fprintf(&b, "%s: %s\n", trailerSession, oneLine(ch.Session))
	}
	if ch.Turn > 0 {
		fmt.Fprintf(&b, "%s: %d\n", trailerTurn, ch.Turn)
	}
	if len(ch.Trigger) > 0 {
		seqs := make([]string, len(ch.Trigger))
		for i, q := range ch.Trigger {
			seqs[i] = strconv.FormatUint(q, 10)
		}
		fmt.Fprintf(&b, "%s: %s\n", trailerTrigger, strings.Join(seqs, ","))
	}
	if ch.Intended != "" {
		fmt.Fprintf(&b, "%s: %s\n", trailerIntended, oneLine(ch.Intended))
	}
	if ch.Observed != "" {
		fmt.Fprintf(&b, "%s: %s\n", trailerObserved, oneLine(ch.Observed))
	}
	if ch.Proposal != "" {
		fmt.Fprintf(&b, "%s: %s\n", trailerProposal, oneLine(ch.Proposal))
	}
	return b.String()
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func parseChange(body string) Change {
	var c Change
	for line := range strings.SplitSeq(body, "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		switch k {
		case trailerAuthor:
			c.Author = v
		case trailerSession:
			c.Session = v
		case trailerTurn:
			c.Turn, _ = strconv.Atoi(v)
		case trailerTrigger:
			for q := range strings.SplitSeq(v, ",") {
				if n, err := strconv.ParseUint(q, 10, 64); err == nil {
					c.Trigger = append(c.Trigger, n)
				}
			}
		case trailerIntended:
			c.Intended = v
		case trailerObserved:
			c.Observed = v
		case trailerProposal:
			c.Proposal = v
		}
	}
	return c
}

// History lists the commits that changed the entry (or, with k "", the whole scope), newest
// first.
func (s *Store) History(ctx context.Context, k Kind, id string) ([]Version, error) {
	head, err := s.Head(ctx)
	if err != nil || head == "" {
		return nil, err
	}
	args := []string{"log", "--format=%H%x1f%aI%x1f%s%x1f%B%x1e", head}
	if k != "" {
		if k.dir() == "" {
			_, err := ParseKind(string(k))
			return nil, err
		}
		args = append(args, "--", entryPath(k, id))
	}
	out, err := s.git(ctx, nil, nil, args...)
	if err != nil {
		return nil, err
	}
	var vs []Version
	for rec := range strings.SplitSeq(out, "\x1e") {
		f := strings.SplitN(strings.TrimLeft(rec, "\n"), "\x1f", 4)
		if len(f) < 4 {
			continue
		}
		t, _ := time.Parse(time.RFC3339, f[1])
		vs = append(vs, Version{Commit: f[0], Time: t, Subject: f[2], Change: parseChange(f[3])})
	}
	if k != "" && len(vs) == 0 {
		return nil, fmt.Errorf("%w: %s %s has no history", ErrNotFound, k, id)
	}
	return vs, nil
}

// Diff is `git diff from to` of the entry's files (of the whole scope with k ""); from "" is
// the empty tree.
func (s *Store) Diff(ctx context.Context, k Kind, id, from, to string) (string, error) {
	if from == "" {
		from = emptyTree
	}
	args := []string{"diff", "--no-color", "--no-ext-diff", from, to}
	if k != "" {
		args = append(args, "--", entryPath(k, id))
	}
	return s.git(ctx, nil, nil, args...)
}

const emptyTree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

// lastChange is the newest commit at or before commit that touched p.
func (s *Store) lastChange(ctx context.Context, commit, p string) (string, error) {
	out, err := s.git(ctx, nil, nil, "log", "-1", "--format=%H", commit, "--", p)
	return strings.TrimSpace(out), err
}

// lastChangeIfPresent is lastChange for an entry that exists at commit, "" otherwise.
func (s *Store) lastChangeIfPresent(ctx context.Context, commit, p string) (string, error) {
	files, err := s.git(ctx, nil, nil, "ls-tree", "-r", "--name-only", commit, "--", p)
	if err != nil || strings.TrimSpace(files) == "" {
		return "", err
	}
	return s.lastChange(ctx, commit, p)
}

// lastChanges maps each "<dir>/<id>" under dirs to the newest commit that touched it, in one
// walk.
func (s *Store) lastChanges(ctx context.Context, head string, dirs []string) (map[string]string, error) {
	out, err := s.git(ctx, nil, nil, append([]string{"log", "--format=%x1e%H", "--name-only", head, "--"}, dirs...)...)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for rec := range strings.SplitSeq(out, "\x1e") {
		lines := strings.Split(strings.TrimSpace(rec), "\n")
		if len(lines) == 0 || lines[0] == "" {
			continue
		}
		for _, p := range lines[1:] {
			dir, rest, ok := strings.Cut(strings.TrimSpace(p), "/")
			if !ok {
				continue
			}
			id, _, _ := strings.Cut(rest, "/")
			key := dir + "/" + strings.TrimSuffix(strings.TrimSuffix(id, ".md"), ".json")
			if _, seen := m[key]; !seen {
				m[key] = lines[0]
			}
		}
	}
	return m, nil
}

// readFiles returns the files under the prefixes at commit, in one ls-tree and one cat-file
// batch.
func (s *Store) readFiles(ctx context.Context, commit string, prefixes ...string) (map[string][]byte, error) {
	out, err := s.git(ctx, nil, nil, append([]string{"ls-tree", "-r", "-z", commit, "--"}, prefixes...)...)
	if err != nil {
		return nil, err
	}
	var paths, blobs []string
	for rec := range strings.SplitSeq(out, "\x00") {
		meta, p, ok := strings.Cut(rec, "\t")
		if !ok {
			continue
		}
		f := strings.Fields(meta)
		if len(f) == 3 && f[1] == "blob" {
			paths, blobs = append(paths, p), append(blobs, f[2])
		}
	}
	files := map[string][]byte{}
	if len(blobs) == 0 {
		return files, nil
	}
	cmd := s.cmd(ctx, nil, "cat-file", "--batch")
	cmd.Stdin = strings.NewReader(strings.Join(blobs, "\n") + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("harness %s: read objects: %w: %s", s.ref, err, strings.TrimSpace(stderr.String()))
	}
	r := bufio.NewReader(bytes.NewReader(raw))
	for i := range blobs {
		hdr, err := r.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("harness %s: read objects: %w", s.ref, err)
		}
		f := strings.Fields(hdr)
		if len(f) != 3 {
			return nil, fmt.Errorf("harness %s: object %s: %q", s.ref, blobs[i], strings.TrimSpace(hdr))
		}
		n, _ := strconv.Atoi(f[2])
		data := make([]byte, n+1) // and the newline after it
		if _, err := io.ReadFull(r, data); err != nil {
			return nil, fmt.Errorf("harness %s: read objects: %w", s.ref, err)
		}
		files[paths[i]] = data[:n]
	}
	return files, nil
}

func (s *Store) cmd(ctx context.Context, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "git", append(gitstate.Guards(), args...)...)
	cmd.Env = gitEnv(s.gitDir, env)
	return cmd
}

func (s *Store) git(ctx context.Context, env []string, stdin []byte, args ...string) (string, error) {
	out, err := git(ctx, s.gitDir, env, stdin, args...)
	if err != nil {
		return out, fmt.Errorf("harness %s: %w", s.ref, err)
	}
	return out, nil
}

// gitEnv is the environment for git on gitDir: nothing of the caller's that would point git at
// another repository or index, and no configuration but the repository's. With the guards
// (gitstate.Guards) no hook or fsmonitor runs.
func gitEnv(gitDir string, extra []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GIT_") && k != "GIT_CONFIG_GLOBAL" && k != "GIT_CONFIG_NOSYSTEM" {
			continue
		}
		env = append(env, kv)
	}
	return append(append(env, "GIT_DIR="+gitDir, "GIT_TERMINAL_PROMPT=0", "LC_ALL=C"), extra...)
}

func git(ctx context.Context, gitDir string, env []string, stdin []byte, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append(gitstate.Guards(), args...)...)
	cmd.Env = gitEnv(gitDir, env)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("git %s: %w: %s", strings.Join(args[:min(len(args), 2)], " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
