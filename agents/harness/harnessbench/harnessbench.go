// Package harnessbench measures the continual harness for `arbor bench harness`: the harness
// block of a turn's context assembled from 10,000 entries, a commit and a rollback of one entry
// on a store that holds them, reading that store, and the daemon's start with it as the global
// store. Each figure stands beside a reference measured in the same run: the same entries
// serialised, the same change committed and reverted with the git CLI in an ordinary worktree,
// the same tree read by git archive, the daemon started without a global store.
//
// The entries are those of [Generate]: a tenth notes, six tenths memories, the rest skills and
// subagent specs, of the sizes a harness grown over months holds. The stores are built in one
// git fast-import (one commit of every entry) rather than a Put each, and checked through
// [harness.Store.List] before anything is timed.
//
// Call [Run] with the path of the arbor binary.
package harnessbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/arborhq/arbor/agents/harness"
	"github.com/arborhq/arbor/bench"
)

// Options size the run.
type Options struct {
	Exe     string // the arbor binary whose daemon start is measured (required)
	Runs    int    // repetitions of each measurement; a figure is the median of the runs' p50s (default 5)
	Entries int    // entries in the harness (default 10,000)
	Iters   int    // timed commits and rollbacks per run (default 20); Render runs 5× as many, List ¼
	Starts  int    // daemon starts per run with the global store, and as many without (default 5)
}

// Validate reports options that cannot run.
func (o Options) Validate() error {
	if o.Exe == "" {
		return errors.New("harness bench: no arbor binary to start the daemon from")
	}
	if o.Runs < 0 || o.Entries < 0 || o.Iters < 0 || o.Starts < 0 {
		return fmt.Errorf("harness bench: negative option in %+v", o)
	}
	return nil
}

func (o *Options) defaults() {
	if o.Runs == 0 {
		o.Runs = 5
	}
	if o.Entries == 0 {
		o.Entries = 10000
	}
	if o.Iters == 0 {
		o.Iters = 20
	}
	if o.Starts == 0 {
		o.Starts = 5
	}
}

// globalRef is the global scope's ref, in the bare repository at $XDG_DATA_HOME/arbor/harness.
var globalRef = harness.ScopeGlobal.Ref("")

// Run builds the harness in a private temp dir and measures every figure o.Runs times.
func Run(ctx context.Context, o Options) (*bench.Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o.defaults()
	tmp, err := os.MkdirTemp("", "arbor-harnessbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	entries := Generate(o.Entries)
	rep := &bench.Report{Suite: "harness"}
	if err := render(rep, entries, o); err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	data := filepath.Join(tmp, "data") // XDG_DATA_HOME of the daemon with the global store
	st, err := BuildStore(ctx, filepath.Join(data, "arbor", "harness"), globalRef, entries)
	if err != nil {
		return nil, err
	}
	wt := filepath.Join(tmp, "worktree")
	if err := worktree(ctx, wt, entries); err != nil {
		return nil, err
	}
	if err := commits(ctx, rep, st, wt, entries, o); err != nil {
		return nil, fmt.Errorf("commits: %w", err)
	}
	if err := list(ctx, rep, st, filepath.Join(data, "arbor", "harness"), o); err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	if err := daemon(ctx, rep, tmp, data, o); err != nil {
		return nil, fmt.Errorf("daemon start: %w", err)
	}
	return rep, rep.Validate()
}

// p50s collects one p50 per run of a measurement.
type p50s []float64

func (p *p50s) add(ds []time.Duration) { *p = append(*p, bench.Ms(bench.Percentile(ds, 50))) }

func (p p50s) median() (float64, *bench.Spread) { return bench.Median(p) }

// render times the harness block of a turn's context from every entry, spread over the three
// scopes, against json.Marshal of the same scopes: both walk every entry once, and the second
// is what handing them to a client (arbor/harness.list) costs at the least.
func render(rep *bench.Report, entries []harness.Entry, o Options) error {
	scopes := Spread(entries)
	var rs, cs, js p50s
	var block string
	for range o.Runs {
		var r, c, j []time.Duration
		// As a turn renders: right after List decoded the entries, so they are in the cache.
		// Each render starts on a collected heap, so none pays for another's garbage.
		for range 5 * o.Iters {
			runtime.GC()
			t := time.Now()
			block = harness.Render(scopes, harness.DefaultBudgetTokens)
			r = append(r, time.Since(t))
		}
		// The reference, and Render again after it walked every entry's text: the entries'
		// ids are then out of the cache, the worst case for Render.
		for range 5 * o.Iters {
			runtime.GC()
			t := time.Now()
			if _, err := json.Marshal(scopes); err != nil {
				return err
			}
			j = append(j, time.Since(t))
			runtime.GC()
			t = time.Now()
			harness.Render(scopes, harness.DefaultBudgetTokens)
			c = append(c, time.Since(t))
		}
		rs.add(r)
		cs.add(c)
		js.add(j)
	}
	if n := harness.EstimateTokens(block); n > harness.DefaultBudgetTokens || n == 0 {
		return fmt.Errorf("the block of %d entries takes %d tokens, want 1 to %d", len(entries), n, harness.DefaultBudgetTokens)
	}
	v, sp := rs.median()
	cold, csp := cs.median()
	ref, _ := js.median()
	rep.Add(bench.Figure{Name: fmt.Sprintf("prompt assembly: Render of %d entries p50", len(entries)), Value: v, Spread: sp, Unit: "ms",
		Reference: "json.Marshal of the same entries", RefValue: ref, Goal: "<= 2 ms",
		Note: fmt.Sprintf("over session/workspace/global, 1 in 50 shadowed; a %d-token block of budget %d; %d renders a run, as a turn renders right after reading the stores",
			harness.EstimateTokens(block), harness.DefaultBudgetTokens, 5*o.Iters)})
	rep.Add(bench.Figure{Name: fmt.Sprintf("prompt assembly, entries out of the cache: Render of %d entries p50", len(entries)), Value: cold, Spread: csp, Unit: "ms",
		Reference: "json.Marshal of the same entries", RefValue: ref,
		Note: "each render right after json.Marshal walked every entry's text"})
	return nil
}

// commits times Store.Put of one changed note and Store.Rollback of that change, against the
// git CLI committing the same file (git add, git commit) and reverting it (git revert) in an
// ordinary worktree of the same entries. The file is written before git's clock starts; the
// store gets the entry in memory.
func commits(ctx context.Context, rep *bench.Report, st *harness.Store, wt string, entries []harness.Entry, o Options) error {
	var note harness.Entry
	for _, e := range entries {
		if e.Kind == harness.Note {
			note = e
			break
		}
	}
	if note.ID == "" {
		return errors.New("no note among the entries")
	}
	cur, err := st.Get(ctx, harness.Note, note.ID)
	if err != nil {
		return err
	}
	base, ch := cur.Version, harness.Change{Author: "user"}
	var rel string
	for p := range files(note) {
		rel = p
	}
	var puts, gitPuts, rbs, gitRbs p50s
	seq := 0
	for range o.Runs {
		var put, gitPut, rb, gitRb []time.Duration
		for range o.Iters {
			seq++
			e := note
			e.Body += fmt.Sprintf("\nRevision %d.", seq)
			t := time.Now()
			v, err := st.Put(ctx, e, base, ch)
			put = append(put, time.Since(t))
			if err != nil {
				return err
			}
			if v == base {
				return fmt.Errorf("Put of revision %d made no commit", seq)
			}
			if err := os.WriteFile(filepath.Join(wt, rel), files(e)[rel], 0o644); err != nil {
				return err
			}
			t = time.Now()
			if err := gitIn(ctx, wt, "add", "--", rel); err != nil {
				return err
			}
			if err := gitIn(ctx, wt, "commit", "-q", "-m", "update note "+e.ID+": "+e.Title, "-m", "Arbor-Author: user"); err != nil {
				return err
			}
			gitPut = append(gitPut, time.Since(t))

			t = time.Now()
			r, err := st.Rollback(ctx, harness.Note, note.ID, base, ch)
			rb = append(rb, time.Since(t))
			if err != nil {
				return err
			}
			t = time.Now()
			if err := gitIn(ctx, wt, "revert", "--no-edit", "HEAD"); err != nil {
				return err
			}
			gitRb = append(gitRb, time.Since(t))
			base = r
		}
		puts.add(put)
		gitPuts.add(gitPut)
		rbs.add(rb)
		gitRbs.add(gitRb)
	}
	if got, err := st.Get(ctx, harness.Note, note.ID); err != nil || got.Body != note.Body || got.Version != base {
		return fmt.Errorf("after the rollbacks the note reads %+v (%v), want its first body at %s", got, err, base)
	}
	v, sp := puts.median()
	ref, _ := gitPuts.median()
	n := fmt.Sprintf("one note changed in a store of %d entries; %d commits a run", len(entries), o.Iters)
	rep.Add(bench.Figure{Name: "harness commit: Store.Put p50", Value: v, Spread: sp, Unit: "ms",
		Reference: "git add + git commit of the same file in a worktree", RefValue: ref, Note: n})
	v, sp = rbs.median()
	ref, _ = gitRbs.median()
	rep.Add(bench.Figure{Name: "harness rollback: Store.Rollback p50", Value: v, Spread: sp, Unit: "ms",
		Reference: "git revert of the same commit in a worktree", RefValue: ref, Note: "the change just made, back to the version before it"})
	return nil
}

// list times reading the whole store, as a turn does when the scope changed (ListAll), against
// git archive of the same tree, which reads every blob of it once.
func list(ctx context.Context, rep *bench.Report, st *harness.Store, gitDir string, o Options) error {
	var ls, as p50s
	n := 0
	for range o.Runs {
		var l, a []time.Duration
		for range max(1, o.Iters/4) {
			t := time.Now()
			es, err := st.ListAll(ctx)
			if err != nil {
				return err
			}
			n = len(es)
			l = append(l, time.Since(t))
			cmd := exec.CommandContext(ctx, "git", "archive", "--format=tar", st.Ref())
			cmd.Env, cmd.Stdout = gitEnv("GIT_DIR="+gitDir), io.Discard
			t = time.Now()
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("git archive: %w", err)
			}
			a = append(a, time.Since(t))
		}
		ls.add(l)
		as.add(a)
	}
	v, sp := ls.median()
	ref, _ := as.median()
	rep.Add(bench.Figure{Name: "read the store: ListAll p50", Value: v, Spread: sp, Unit: "ms",
		Reference: "git archive of the same tree", RefValue: ref,
		Note: fmt.Sprintf("%d entries, with their versions; what a turn reads when a scope changed", n)})
	return nil
}
