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
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// CheckReport is what [Store.Check] found of one store.
type CheckReport struct {
	GitDir  string `json:"gitDir"`
	Ref     string `json:"ref"`
	Head    string `json:"head,omitempty"` // "" = no commit: the store is empty, or its ref is broken
	Commits int    `json:"commits"`        // commits read, head and its history
	Objects int    `json:"objects"`        // objects read whole and checked against their ids
	Entries int    `json:"entries"`        // entries decoded at head
	// Problems says what is broken, one item each, naming the object and its file where known;
	// none means the store is sound.
	Problems []string `json:"problems,omitempty"`
	// Fix is how to start the scope afresh when it is broken (its entries are lost; the damaged
	// objects are left for whoever would recover them).
	Fix string `json:"fix,omitempty"`
}

// OK reports whether the store is sound.
func (r CheckReport) OK() bool { return len(r.Problems) == 0 }

// Check verifies the store: its ref names a commit (an absent ref is an empty store, which is
// sound), every object the ref reaches — each commit of the history, each tree and each version
// of each file — is present and reads whole with the content its id names, and every entry at
// head decodes. It reads only what the ref reaches, never the rest of the repository, so a store
// in a big repository checks as fast as one alone. The error is for a check that could not run
// (no git, the context done); what is broken is in the report.
//
// The walk is `git rev-list --objects` into `git cat-file --batch`, which hashes what it reads:
// rev-list alone would list a truncated blob without noticing.
func (s *Store) Check(ctx context.Context) (CheckReport, error) {
	r := CheckReport{GitDir: s.gitDir, Ref: s.ref}
	head, err := s.checkRef(ctx, &r)
	if err != nil || head == "" {
		return r, err
	}
	r.Head = head
	afresh := fmt.Sprintf("git --git-dir=%s update-ref -d %s", s.gitDir, s.ref)
	out, errOut, err := s.run(ctx, head+"\n", "cat-file", "--batch-check")
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return r, err
	}
	switch f := strings.Fields(out); {
	case ee != nil:
		r.Problems = append(r.Problems, fmt.Sprintf("the head commit %s cannot be read: %s", short(head), gitWords(errOut)))
		r.Fix = afresh
		return r, nil
	case len(f) >= 2 && f[1] == "missing":
		r.Problems = append(r.Problems, fmt.Sprintf("the head commit %s is missing from the object store", short(head)))
		r.Fix = afresh
		return r, nil
	case len(f) >= 2 && f[1] != "commit":
		r.Problems = append(r.Problems, fmt.Sprintf("the ref names a %s (%s), not a commit", f[1], short(head)))
		r.Fix = afresh
		return r, nil
	}
	objs, err := s.reachable(ctx, head, &r)
	if err != nil {
		return r, err
	}
	if err := s.readObjects(ctx, objs, &r); err != nil {
		return r, err
	}
	if !r.OK() {
		r.Fix = afresh
		return r, nil
	}
	for _, k := range Kinds {
		es, err := s.List(ctx, k)
		if err != nil {
			if ctx.Err() != nil {
				return r, ctx.Err()
			}
			r.Problems = append(r.Problems, fmt.Sprintf("the %s entries at head do not decode: %v", k, err))
			continue
		}
		r.Entries += len(es)
	}
	if !r.OK() {
		r.Fix = fmt.Sprintf("fix or remove the entry (arbor harness edit / rm), or start afresh: %s", afresh)
	}
	return r, nil
}

// checkRef returns the commit the ref names, "" when it is absent or broken (a problem then).
func (s *Store) checkRef(ctx context.Context, r *CheckReport) (string, error) {
	out, errOut, err := s.run(ctx, "", "for-each-ref", "--format=%(objectname) %(refname)", s.ref)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.Problems = append(r.Problems, fmt.Sprintf("%s cannot be read as a git repository: %s", s.gitDir, gitWords(errOut)))
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(out, "\n") {
		if oid, name, ok := strings.Cut(line, " "); ok && name == s.ref {
			return oid, nil
		}
	}
	// git skips a ref whose value is not an object id, with a warning.
	if !strings.Contains(errOut+"\n", "broken ref "+s.ref+"\n") {
		return "", nil
	}
	file := filepath.Join(s.gitDir, filepath.FromSlash(s.ref))
	if b, err := os.ReadFile(file); err == nil {
		v := strings.TrimSpace(string(b))
		if len(v) > 60 {
			v = v[:60] + "…"
		}
		r.Problems = append(r.Problems, fmt.Sprintf("the ref file %s holds %q, not a commit id", file, v))
		r.Fix = "remove " + file
	} else {
		r.Problems = append(r.Problems, "the ref's value is not a commit id (git: ignoring broken ref)")
		r.Fix = fmt.Sprintf("remove the line of %s from %s", s.ref, filepath.Join(s.gitDir, "packed-refs"))
	}
	return "", nil
}

// object is one object the ref reaches: a commit, a root tree, or another (a file's blob or a
// directory's tree, path its path in the tree, where known).
type object struct {
	id, path, kind string // kind "commit", "tree" (a commit's root tree) or ""
}

func (o object) String() string {
	switch {
	case o.kind != "":
		return o.kind + " " + short(o.id)
	case o.path == "":
		return "object " + short(o.id)
	}
	return fmt.Sprintf("object %s (%s)", short(o.id), o.path)
}

// reachable lists the objects the ref reaches, those present first to be read; a missing one, or
// a walk that git cannot finish, is a problem.
func (s *Store) reachable(ctx context.Context, head string, r *CheckReport) ([]object, error) {
	out, errOut, err := s.run(ctx, "", "rev-list", "--objects", "--missing=print", head)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return nil, err
	}
	var objs []object
	var missing []string
	for line := range strings.SplitSeq(out, "\n") {
		switch id, p, named := strings.Cut(line, " "); {
		case line == "":
		case strings.HasPrefix(line, "?"):
			missing = append(missing, line[1:])
		case !named:
			objs = append(objs, object{id: id, kind: "commit"})
		case p == "":
			objs = append(objs, object{id: id, kind: "tree"})
		default:
			objs = append(objs, object{id: id, path: p})
		}
	}
	if len(missing) > 0 {
		named := s.named(ctx, head)
		for _, id := range missing {
			o, ok := named[id]
			if !ok {
				o = object{id: id}
			}
			r.Problems = append(r.Problems, o.String()+" is missing from the object store")
		}
	}
	if ee != nil {
		r.Problems = append(r.Problems, "the history cannot be walked: "+gitWords(errOut))
	}
	return objs, nil
}

// named names each tree and each version of each file of the history by its id, as far as
// the trees read: only to name a missing object.
func (s *Store) named(ctx context.Context, head string) map[string]object {
	m := map[string]object{}
	// The commits' trees first: reading them needs no tree, which may be the missing one.
	out, _, _ := s.run(ctx, "", "log", "--format=%T", head)
	for _, id := range strings.Fields(out) {
		m[id] = object{id: id, kind: "tree"}
	}
	out, _, _ = s.run(ctx, "", "log", "--raw", "-r", "-t", "--no-abbrev", "--no-renames", "--format=", head)
	for line := range strings.SplitSeq(out, "\n") {
		meta, p, ok := strings.Cut(line, "\t")
		if f := strings.Fields(meta); ok && len(f) == 5 {
			m[f[3]] = object{id: f[3], path: p}
		}
	}
	return m
}

// readObjects reads every object whole through `git cat-file --batch`, which checks each against
// its id. cat-file stops at the first corrupt object, so after one it starts again past it.
func (s *Store) readObjects(ctx context.Context, objs []object, r *CheckReport) error {
	for len(objs) > 0 {
		n, errOut, err := s.catFile(ctx, objs, r)
		if err != nil {
			return err
		}
		if n == len(objs) {
			return nil
		}
		r.Problems = append(r.Problems, fmt.Sprintf("%s is corrupt: %s", objs[n], gitWords(errOut)))
		objs = objs[n+1:]
	}
	return nil
}

// catFile reads objs in order and returns how many it read before cat-file failed (len(objs)
// when it did not), with what cat-file said.
func (s *Store) catFile(ctx context.Context, objs []object, r *CheckReport) (int, string, error) {
	var in strings.Builder
	for _, o := range objs {
		in.WriteString(o.id + "\n")
	}
	cmd := s.cmd(ctx, nil, "cat-file", "--batch")
	cmd.Stdin = strings.NewReader(in.String())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, "", err
	}
	if err := cmd.Start(); err != nil {
		return 0, "", fmt.Errorf("harness %s: check: %w", s.ref, err)
	}
	br := bufio.NewReader(stdout)
	n := 0
	for ; n < len(objs); n++ {
		hdr, err := br.ReadString('\n')
		if err != nil {
			break
		}
		f := strings.Fields(hdr)
		if len(f) == 2 && f[1] == "missing" {
			r.Problems = append(r.Problems, objs[n].String()+" is missing from the object store (or its file is empty)")
			continue
		}
		if len(f) != 3 {
			break
		}
		size, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			break
		}
		if c, err := io.CopyN(io.Discard, br, size+1); err != nil || c != size+1 {
			break
		}
		r.Objects++
		if f[1] == "commit" {
			r.Commits++
		}
	}
	io.Copy(io.Discard, br)
	werr := cmd.Wait()
	if ctx.Err() != nil {
		return n, "", ctx.Err()
	}
	if n == len(objs) && werr != nil {
		// Everything was read, yet cat-file failed: say so rather than call the store sound.
		r.Problems = append(r.Problems, "reading the objects failed: "+gitWords(stderr.String()))
	}
	return n, stderr.String(), nil
}

// run runs git on the store's directory; an *exec.ExitError means git ran and failed.
func (s *Store) run(ctx context.Context, stdin string, args ...string) (stdout, stderr string, err error) {
	cmd := s.cmd(ctx, nil, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	err = cmd.Run()
	if ctx.Err() != nil {
		return "", "", ctx.Err()
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		err = fmt.Errorf("harness %s: check: git %s: %w", s.ref, args[0], err)
	}
	return o.String(), e.String(), err
}

// gitWords is what git said of a failure: its error lines, once each, bounded.
func gitWords(stderr string) string {
	var lines []string
	seen := map[string]bool{}
	for l := range strings.SplitSeq(stderr, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || seen[l] {
			continue
		}
		seen[l] = true
		lines = append(lines, l)
	}
	if len(lines) == 0 {
		return "git failed and said nothing"
	}
	w := strings.Join(lines, "; ")
	if len(w) > 400 {
		w = w[:400] + "…"
	}
	return w
}

// Refs lists the harness refs of the repository whose git directory is gitDir, sorted, with
// those whose value is broken (git skips them, warning) among them, so a check finds them too.
func Refs(ctx context.Context, gitDir string) ([]string, error) {
	s := &Store{gitDir: gitDir, ref: "refs/arbor/harness/"}
	out, errOut, err := s.run(ctx, "", "for-each-ref", "--format=%(refname)", s.ref)
	if err != nil {
		return nil, fmt.Errorf("harness refs of %s: %w: %s", gitDir, err, gitWords(errOut))
	}
	refs := strings.Fields(out)
	for l := range strings.SplitSeq(errOut, "\n") {
		if _, ref, ok := strings.Cut(l, "ignoring broken ref "); ok && strings.HasPrefix(ref, s.ref) {
			refs = append(refs, strings.TrimSpace(ref))
		}
	}
	slices.Sort(refs)
	return slices.Compact(refs), nil
}
