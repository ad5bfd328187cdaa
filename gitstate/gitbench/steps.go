package gitbench

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/arborhq/arbor/bench"
	"github.com/arborhq/arbor/gitstate"
)

// checkpoint times a turn that changed one file: Checkpoint with the touched path (what the
// file watcher provides), Checkpoint with a full scan (the fallback), and the CLI's
// `git add -A && git commit` in a worktree of its own.
func (b *run) checkpoint() error {
	so, sg := b.spec("ckpt"), b.spec("git")
	if err := b.r.Fork(b.ctx, so); err != nil {
		return fmt.Errorf("checkpoint setup: %w", err)
	}
	if err := b.gitAdd(sg); err != nil {
		return fmt.Errorf("checkpoint setup: %w", err)
	}
	defer b.cleanup(so, sg)
	var touched, full, ref []time.Duration
	for i := range b.o.Rounds {
		p := b.files[i*97%len(b.files)]
		for _, d := range []string{so.Dir, sg.Dir} {
			if err := appendLine(filepath.Join(d, p), fmt.Sprintf("// round %d\n", i)); err != nil {
				return err
			}
		}
		d, err := timed(func() error { return ckpt(b, so.Dir, []string{p}) })
		if err != nil {
			return err
		}
		touched = append(touched, d)
		d, err = timed(func() error {
			if _, err := runGit(b.ctx, sg.Dir, "add", "-A"); err != nil {
				return err
			}
			_, err := runGit(b.ctx, sg.Dir, "commit", "-q", "-m", fmt.Sprint("round ", i))
			return err
		})
		if err != nil {
			return err
		}
		ref = append(ref, d)
		if err := appendLine(filepath.Join(so.Dir, p), "// again\n"); err != nil {
			return err
		}
		d, err = timed(func() error { return ckpt(b, so.Dir, nil) })
		if err != nil {
			return err
		}
		full = append(full, d)
	}
	b.add("checkpoint, 1 file changed (touched paths)", touched, "git add -A && git commit", ref, "ratio <= 0.2")
	b.add("checkpoint, 1 file changed (full scan)", full, "git add -A && git commit", append([]time.Duration(nil), ref...), "fallback")
	return nil
}

func ckpt(b *run, dir string, touched []string) error {
	_, changed, err := b.r.Checkpoint(b.ctx, dir, "bench turn", touched)
	if err == nil && !changed {
		err = fmt.Errorf("checkpoint of %s saw no change", dir)
	}
	return err
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// diff times the review of a session that changed DiffFiles files: Diff plus rendering the
// unified text, against `git diff <merge-base> <branch>`.
func (b *run) diff() error {
	so := b.spec("diff")
	if err := b.r.Fork(b.ctx, so); err != nil {
		return fmt.Errorf("diff setup: %w", err)
	}
	defer b.cleanup(so)
	for i := range b.o.DiffFiles {
		if err := appendLine(filepath.Join(so.Dir, b.files[i*(len(b.files)/b.o.DiffFiles)]), "// changed by the session\n"); err != nil {
			return err
		}
	}
	if err := ckpt(b, so.Dir, nil); err != nil {
		return err
	}
	var ours, ref []time.Duration
	for range b.o.Rounds {
		d, err := timed(func() error {
			diff, err := b.r.Diff(b.ctx, "main", so.Branch)
			if err == nil && len(diff.Files) != b.o.DiffFiles {
				err = fmt.Errorf("diff has %d files, want %d", len(diff.Files), b.o.DiffFiles)
			}
			if err == nil {
				_ = diff.Unified()
			}
			return err
		})
		if err != nil {
			return err
		}
		ours = append(ours, d)
		d, err = timed(func() error {
			cmd := exec.CommandContext(b.ctx, "git", "diff", b.head, so.Branch)
			cmd.Dir, cmd.Stdout, cmd.Env = b.dir, io.Discard, append(os.Environ(), gitEnv...)
			return cmd.Run()
		})
		if err != nil {
			return err
		}
		ref = append(ref, d)
	}
	b.add(fmt.Sprintf("diff, %d files (Diff + Unified)", b.o.DiffFiles), ours, "git diff <merge-base> <branch>", ref, "ratio <= 1.5")
	return nil
}

// concurrent starts Concurrent forks at once on one Repo, then as many `git worktree add`
// processes at once, Rounds times, and reports the median totals. Every round has fresh specs
// and each side's worktrees are removed before the other side runs, so both start from a
// repository with no other worktrees; the order alternates as in fork.
func (b *run) concurrent() error {
	n := b.o.Concurrent
	var ours, ref, serial []time.Duration
	failed, refFailed := 0, 0
	for i := range b.o.Rounds {
		steps := []func(){
			func() {
				d, f := b.forksAtOnce("conc", func(s gitstate.WorktreeSpec) error { return b.r.Fork(b.ctx, s) })
				ours, failed = append(ours, d), failed+f
			},
			func() {
				d, f := b.forksAtOnce("git", b.gitAdd)
				ref, refFailed = append(ref, d), refFailed+f
			},
		}
		if i%2 == 1 {
			steps[0], steps[1] = steps[1], steps[0]
		}
		for _, s := range steps {
			s()
		}
		d, err := b.forksOneByOne()
		if err != nil {
			return err
		}
		serial = append(serial, d)
		if failed > 0 {
			break // the figure below says how many; more rounds would only repeat it
		}
	}
	tries := n * len(ours)
	f := bench.Figure{Name: fmt.Sprintf("%d concurrent forks, total", n), Unit: "ms",
		Reference: fmt.Sprintf("%d concurrent git worktree add", n), Goal: "all succeed",
		Note: fmt.Sprintf("%d/%d succeeded over %d rounds (git: %d/%d)", tries-failed, tries, len(ours), tries-refFailed, tries)}
	f.Value, f.Spread = bench.MedianMs(ours)
	f.RefValue, _ = bench.MedianMs(ref)
	b.logger.Info("bench figure", "name", f.Name, "ms", f.Value, "ref", f.RefValue)
	b.report.Add(f)
	if failed > 0 {
		return fmt.Errorf("%d of %d concurrent forks failed", failed, tries)
	}
	g := bench.Figure{Name: fmt.Sprintf("%d concurrent forks, total, against serial", n), Unit: "ms",
		Reference: fmt.Sprintf("the sum of %d forks one after another", n), Goal: "ratio <= 0.6"}
	g.Value, g.Spread = bench.MedianMs(ours)
	g.RefValue, _ = bench.MedianMs(serial)
	b.report.Add(g)
	return nil
}

// forksOneByOne makes Concurrent forks one after another and returns the sum of their times,
// removing the worktrees after (untimed).
func (b *run) forksOneByOne() (time.Duration, error) {
	specs := make([]gitstate.WorktreeSpec, b.o.Concurrent)
	for i := range specs {
		specs[i] = b.spec("serial")
	}
	defer b.cleanup(specs...)
	var sum time.Duration
	for _, s := range specs {
		d, err := timed(func() error { return b.r.Fork(b.ctx, s) })
		if err != nil {
			return 0, fmt.Errorf("serial fork: %w", err)
		}
		sum += d
	}
	return sum, nil
}

// forksAtOnce runs create on Concurrent fresh specs of kind at once, returns how long they
// took together and how many failed, and removes the worktrees (untimed).
func (b *run) forksAtOnce(kind string, create func(gitstate.WorktreeSpec) error) (time.Duration, int) {
	specs := make([]gitstate.WorktreeSpec, b.o.Concurrent)
	for i := range specs {
		specs[i] = b.spec(kind)
	}
	defer b.cleanup(specs...)
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	start := time.Now()
	for _, s := range specs {
		wg.Go(func() {
			if err := create(s); err != nil {
				b.logger.Warn("concurrent fork failed", "kind", kind, "name", s.Name, "err", err)
				mu.Lock()
				failed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return time.Since(start), failed
}
