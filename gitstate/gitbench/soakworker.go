package gitbench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/arborhq/arbor/gitstate"
)

// Environment of a soak worker process.
const (
	envSoakDir  = "ARBOR_GITSTATE_SOAK_DIR"
	envSoakOps  = "ARBOR_GITSTATE_SOAK_OPS"
	envSoakSeed = "ARBOR_GITSTATE_SOAK_SEED"
)

// SoakWorker runs a soak worker and exits when this process was started as one by [Soak];
// otherwise it returns at once. Call it first thing in main (and in TestMain).
func SoakWorker() {
	dir := os.Getenv(envSoakDir)
	if dir == "" {
		return
	}
	ops, _ := strconv.Atoi(os.Getenv(envSoakOps))
	seed, _ := strconv.ParseUint(os.Getenv(envSoakSeed), 10, 64)
	if err := soakWork(context.Background(), dir, ops, seed); err != nil {
		fmt.Fprintln(os.Stderr, "soak worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// entry is one line of the soak journal: what the worker is about to do ("intent") and what it
// finished ("done"). The journal plays the part of the daemon's session records.
type entry struct {
	Op     string `json:"op"` // fork, checkpoint, discard
	Phase  string `json:"phase"`
	Name   string `json:"name"`
	Dir    string `json:"dir,omitempty"`
	Branch string `json:"branch,omitempty"`
	Commit string `json:"commit,omitempty"`
}

type journal struct{ f *os.File }

func (j journal) add(e entry) error {
	b, _ := json.Marshal(e)
	if _, err := j.f.Write(append(b, '\n')); err != nil {
		return err
	}
	return j.f.Sync()
}

func journalPath(dir string) string { return filepath.Join(dir, ".git", "arbor", "soak.jsonl") }

func soakWork(ctx context.Context, dir string, ops int, seed uint64) error {
	r, err := gitstate.Open(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer r.Close()
	state, err := readJournal(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(journalPath(dir)), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(journalPath(dir), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	j := journal{f}
	rng := rand.New(rand.NewPCG(seed, uint64(os.Getpid())))
	_, head, err := r.Head(ctx)
	if err != nil {
		return err
	}
	files, err := r.Diff(ctx, head, head) // empty; proves the repository reads
	if err != nil || len(files.Files) != 0 {
		return fmt.Errorf("sanity diff: %v", err)
	}
	fmt.Println("ready") // the driver times its kill from here
	for n := 0; n < ops; n++ {
		live := state.liveNames()
		switch p := rng.IntN(10); {
		case len(live) == 0 || p < 4 && len(live) < 8:
			name := fmt.Sprintf("w%d-%d-%d", os.Getpid(), n, time.Now().UnixNano()%1e6)
			base := head
			if len(live) > 0 && rng.IntN(2) == 0 {
				if c := state.last[live[rng.IntN(len(live))]]; c != "" {
					base = c // fork at a checkpoint
				}
			}
			e := entry{Op: "fork", Name: name, Branch: "arbor/soak/" + name, Dir: filepath.Join(dir, ".git", "arbor", "worktrees", name)}
			if err := step(j, &e, func() error {
				return r.Fork(ctx, gitstate.WorktreeSpec{Name: name, Branch: e.Branch, Base: base, Dir: e.Dir})
			}); err != nil {
				return err
			}
			state.apply(e)
		case p < 8:
			name := live[rng.IntN(len(live))]
			s := state.sessions[name]
			touched := scribble(rng, s.Dir)
			if rng.IntN(3) == 0 {
				touched = nil
			}
			e := entry{Op: "checkpoint", Name: name}
			if err := step(j, &e, func() error {
				c, _, err := r.Checkpoint(ctx, s.Dir, fmt.Sprint("soak turn ", n), touched)
				e.Commit = c
				return err
			}); err != nil {
				return err
			}
			state.apply(e)
		default:
			name := live[rng.IntN(len(live))]
			s := state.sessions[name]
			e := entry{Op: "discard", Name: name, Dir: s.Dir, Branch: s.Branch}
			if err := step(j, &e, func() error {
				if _, _, err := r.Checkpoint(ctx, s.Dir, "before discard", nil); err != nil {
					return err
				}
				_, err := r.Discard(ctx, s.Dir, "", false)
				return err
			}); err != nil {
				return err
			}
			state.apply(e)
		}
	}
	return nil
}

// step journals the intent, runs f, and journals completion with whatever f filled in.
func step(j journal, e *entry, f func() error) error {
	e.Phase = "intent"
	if err := j.add(*e); err != nil {
		return err
	}
	if err := f(); err != nil {
		return fmt.Errorf("%s %s: %w", e.Op, e.Name, err)
	}
	e.Phase = "done"
	return j.add(*e)
}

// scribble changes, adds or deletes a few files in a worktree and returns the paths.
func scribble(rng *rand.Rand, dir string) []string {
	var touched []string
	for range 1 + rng.IntN(3) {
		p := fmt.Sprintf("soak/f%d.txt", rng.IntN(12))
		full := filepath.Join(dir, p)
		if rng.IntN(4) == 0 {
			os.Remove(full)
		} else {
			os.MkdirAll(filepath.Dir(full), 0o755)
			os.WriteFile(full, []byte(fmt.Sprintln(rng.Uint64())), 0o644)
		}
		touched = append(touched, p)
	}
	return touched
}
