// Package gitbench measures gitstate against the git CLI, both run in the same process on the
// same generated repository, and reports ratios (`arbor bench git`).
//
// Call [Run] for the standard suite (20,000 files), or [RunOptions] for a smaller one.
package gitbench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/arborhq/arbor/bench"
	"github.com/arborhq/arbor/gitstate"
)

// Options sizes a run. Zero fields take the defaults of [Run].
type Options struct {
	Files      int    // files in the generated repository (20,000)
	Rounds     int    // timed repetitions per figure, concurrent forks too; medians are reported (5)
	Concurrent int    // forks created at once (50)
	DiffFiles  int    // files changed in the diffed session (50)
	Dir        string // where to generate the repository (a temporary directory, removed after)
	// Source, when set, is an existing repository (e.g. the project's own) to clone and measure
	// instead of a generated one; Files is then ignored.
	Source string
}

// Validate reports options that cannot work.
func (o Options) Validate() error {
	if o.Files < 0 || o.Rounds < 0 || o.Concurrent < 0 || o.DiffFiles < 0 {
		return fmt.Errorf("bench options %+v: negative sizes", o)
	}
	if o.DiffFiles > o.Files && o.Files > 0 {
		return fmt.Errorf("bench options: %d diff files exceed %d files", o.DiffFiles, o.Files)
	}
	return nil
}

func (o *Options) defaults() {
	if o.Files == 0 {
		o.Files = 20000
	}
	if o.Rounds == 0 {
		o.Rounds = 5
	}
	if o.Concurrent == 0 {
		o.Concurrent = 50
	}
	if o.DiffFiles == 0 {
		o.DiffFiles = min(50, o.Files)
	}
}

// Run generates a 20,000-file repository in a temporary directory and times, each beside the
// git CLI doing the same job: fork vs `git worktree add`, a 1-file checkpoint vs
// `git add -A && git commit`, a 50-file diff vs `git diff <merge-base> <branch>`, and 50
// concurrent forks.
func Run(ctx context.Context, logger *slog.Logger) (*bench.Report, error) {
	return RunOptions(ctx, logger, Options{})
}

// RunOptions is [Run] with other sizes.
func RunOptions(ctx context.Context, logger *slog.Logger, o Options) (*bench.Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o.defaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	dir := o.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "arbor-bench-git-")
		if err != nil {
			return nil, fmt.Errorf("bench git: %w", err)
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	if o.Source != "" {
		logger.Info("cloning repository", "source", o.Source, "dir", dir)
		if _, err := runGit(ctx, "", "clone", "-q", "--no-hardlinks", o.Source, dir); err != nil {
			return nil, fmt.Errorf("bench git: %w", err)
		}
		if _, err := runGit(ctx, dir, "checkout", "-q", "-B", "main"); err != nil {
			return nil, fmt.Errorf("bench git: %w", err)
		}
	} else {
		logger.Info("generating repository", "files", o.Files, "dir", dir)
		if err := Generate(ctx, dir, o.Files); err != nil {
			return nil, fmt.Errorf("bench git: generate: %w", err)
		}
	}
	out, err := runGit(ctx, dir, "ls-files", "-s", "-z")
	if err != nil {
		return nil, fmt.Errorf("bench git: %w", err)
	}
	var files []string // regular files only: edits append a line to them
	for _, rec := range strings.Split(out, "\x00") {
		if meta, name, ok := strings.Cut(rec, "\t"); ok && (strings.HasPrefix(meta, "100644 ") || strings.HasPrefix(meta, "100755 ")) {
			files = append(files, name)
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("bench git: %s has no files", dir)
	}
	o.DiffFiles = min(o.DiffFiles, len(files))
	r, err := gitstate.Open(dir, logger)
	if err != nil {
		return nil, fmt.Errorf("bench git: %w", err)
	}
	defer r.Close()
	suite := fmt.Sprintf("git (%d files)", len(files))
	if o.Source != "" {
		suite = fmt.Sprintf("git (%s, %d files)", o.Source, len(files))
	}
	b := &run{ctx: ctx, logger: logger, o: o, r: r, dir: dir, files: files,
		report: &bench.Report{Suite: suite}}
	_, b.head, err = r.Head(ctx)
	if err != nil {
		return nil, fmt.Errorf("bench git: %w", err)
	}
	for _, step := range []func() error{b.fork, b.checkpoint, b.diff, b.concurrent} {
		if err := step(); err != nil {
			return b.report, fmt.Errorf("bench git: %w", err)
		}
	}
	return b.report, nil
}

type run struct {
	ctx    context.Context
	logger *slog.Logger
	o      Options
	r      *gitstate.Repo
	dir    string
	files  []string // tracked text files, for edits
	head   string
	seq    int
	report *bench.Report
}

// spec names a fresh session worktree (ours) or CLI worktree (kind "git").
func (b *run) spec(kind string) gitstate.WorktreeSpec {
	b.seq++
	id := fmt.Sprintf("%s%04d", kind, b.seq)
	return gitstate.WorktreeSpec{Name: id, Branch: "bench/" + id, Base: b.head,
		Dir: filepath.Join(b.r.CommonDir(), "arbor", "worktrees", id)}
}

func (b *run) gitAdd(s gitstate.WorktreeSpec) error {
	_, err := runGit(b.ctx, b.dir, "worktree", "add", "-q", "-b", s.Branch, s.Dir, s.Base)
	return err
}

// timed runs f and returns how long it took.
func timed(f func() error) (time.Duration, error) {
	start := time.Now()
	err := f()
	return time.Since(start), err
}

func (b *run) fork() error {
	// The floor: the same files copied by cp -a from a plain tree of HEAD (made untimed).
	tree := filepath.Join(b.r.CommonDir(), "arbor", "bench-tree")
	if err := os.MkdirAll(tree, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(tree)
	if _, err := runShell(b.ctx, b.dir, "git archive HEAD | tar -x -C "+tree); err != nil {
		return fmt.Errorf("fork: plain tree: %w", err)
	}
	var ours, ref, floor []time.Duration
	for i := range b.o.Rounds {
		dst := filepath.Join(b.r.CommonDir(), "arbor", fmt.Sprint("bench-cp-", i))
		d, err := timed(func() error { _, err := runShell(b.ctx, b.dir, "cp -a "+tree+" "+dst); return err })
		if err != nil {
			return fmt.Errorf("fork: cp -a: %w", err)
		}
		floor = append(floor, d)
		os.RemoveAll(dst)
		so, sg := b.spec("fork"), b.spec("git")
		// Alternate which goes first so neither always meets a warmer cache.
		steps := []func() error{
			func() error {
				d, err := timed(func() error { return b.r.Fork(b.ctx, so) })
				ours = append(ours, d)
				return err
			},
			func() error {
				d, err := timed(func() error { return b.gitAdd(sg) })
				ref = append(ref, d)
				return err
			},
		}
		if i%2 == 1 {
			steps[0], steps[1] = steps[1], steps[0]
		}
		for _, s := range steps {
			if err := s(); err != nil {
				return fmt.Errorf("fork: %w", err)
			}
		}
		b.cleanup(so, sg)
	}
	b.add("fork (branch + worktree ready)", ours, "git worktree add -b", ref, "ratio <= 1.0")
	b.add("fork (branch + worktree ready), against the floor", append([]time.Duration(nil), ours...), "cp -a of the same tree", floor, "")
	return nil
}

// cleanup removes benchmark worktrees, untimed: the files in parallel (deleting a million
// files is most of a run otherwise), then the registrations.
func (b *run) cleanup(specs ...gitstate.WorktreeSpec) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for _, s := range specs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			os.RemoveAll(s.Dir)
		})
	}
	wg.Wait()
	for _, s := range specs {
		if err := b.r.RemoveWorktree(b.ctx, s.Dir, true); err != nil {
			b.logger.Warn("bench cleanup", "dir", s.Dir, "err", err)
		}
	}
}

func runShell(ctx context.Context, dir, script string) (string, error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s: %w\n%s", script, err, out)
	}
	return string(out), nil
}

func (b *run) add(name string, ours []time.Duration, refName string, ref []time.Duration, goal string) {
	f := bench.Figure{Name: name, Unit: "ms", Goal: goal}
	f.Value, f.Spread = bench.MedianMs(ours)
	if refName != "" {
		f.Reference = refName
		f.RefValue, _ = bench.MedianMs(ref)
	}
	b.logger.Info("bench figure", "name", f.Name, "ms", f.Value, "ref", f.RefValue)
	b.report.Add(f)
}
