package gitbench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/arborhq/arbor/gitstate"
)

// SoakOptions sizes a soak run.
type SoakOptions struct {
	Ops   int    // fork/checkpoint/discard operations in all (500)
	Files int    // files in the generated repository (200)
	Seed  uint64 // for the operation mix and kill times (1)
	Dir   string // where to generate the repository (a temporary directory, removed after)
	// MaxRun bounds how long a worker lives before it is killed (400 ms); each kill lands at a
	// random moment within it.
	MaxRun time.Duration
}

// SoakReport is what a soak run did and found.
type SoakReport struct {
	Ops         int           `json:"ops"`
	Kills       int           `json:"kills"`
	Forks       int           `json:"forks"`
	Checkpoints int           `json:"checkpoints"`
	Discards    int           `json:"discards"`
	Recreated   int           `json:"recreated"`
	Orphans     int           `json:"orphans"`
	Duration    time.Duration `json:"duration"`
}

// Soak runs Ops fork/checkpoint/discard operations in worker processes that it kills with
// SIGKILL at random moments. After every kill it reconciles the repository against the
// sessions the journal recorded and checks that nothing was lost: `git fsck` is clean, every
// recorded checkpoint is still reachable from a ref, every recorded session's worktree works
// with the git CLI, and no unrecorded worktree remains. The binary must call [SoakWorker] at
// start.
func Soak(ctx context.Context, logger *slog.Logger, o SoakOptions) (*SoakReport, error) {
	if o.Ops == 0 {
		o.Ops = 500
	}
	if o.Files == 0 {
		o.Files = 200
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.MaxRun == 0 {
		o.MaxRun = 400 * time.Millisecond
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	dir := o.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "arbor-soak-git-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	if err := Generate(ctx, dir, o.Files); err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	rng := rand.New(rand.NewPCG(o.Seed, 7))
	rep := &SoakReport{}
	start := time.Now()
	done := 0
	for done < o.Ops {
		cmd := exec.CommandContext(ctx, exe)
		cmd.Env = append(os.Environ(), envSoakDir+"="+dir, fmt.Sprintf("%s=%d", envSoakOps, o.Ops-done),
			fmt.Sprintf("%s=%d", envSoakSeed, rng.Uint64()))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return rep, err
		}
		if err := cmd.Start(); err != nil {
			return rep, fmt.Errorf("soak: start worker: %w", err)
		}
		// The kill clock starts when the worker is ready, so slow starts (-race, a loaded
		// machine) do not turn every run into a kill before the first operation.
		ready := make(chan struct{})
		go func() {
			sc := bufio.NewScanner(stdout)
			sc.Scan() // "ready", or EOF when the worker died first
			close(ready)
			for sc.Scan() {
			}
		}()
		exited := make(chan error, 1)
		go func() {
			<-ready
			exited <- cmd.Wait()
		}()
		select {
		case <-ready:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			return rep, fmt.Errorf("soak: worker not ready after a minute\n%s", stderr.String())
		}
		select {
		case err := <-exited:
			if err != nil {
				return rep, fmt.Errorf("soak: worker failed: %v\n%s", err, stderr.String())
			}
		case <-time.After(time.Duration(rng.Int64N(int64(o.MaxRun)))):
			cmd.Process.Kill()
			<-exited
			rep.Kills++
		case <-ctx.Done():
			cmd.Process.Kill()
			<-exited
			return rep, ctx.Err()
		}
		st, err := readJournal(dir)
		if err != nil {
			return rep, fmt.Errorf("soak: %w", err)
		}
		if err := verify(ctx, logger, dir, st, rep); err != nil {
			return rep, fmt.Errorf("soak after %d ops, %d kills: %w", st.done, rep.Kills, err)
		}
		done = st.done
		rep.Forks, rep.Checkpoints, rep.Discards = st.byOp["fork"], st.byOp["checkpoint"], st.byOp["discard"]
	}
	rep.Ops = done
	rep.Duration = time.Since(start)
	return rep, nil
}

// verify reconciles and then checks the invariants.
func verify(ctx context.Context, logger *slog.Logger, dir string, st *soakState, rep *SoakReport) error {
	r, err := gitstate.Open(dir, logger)
	if err != nil {
		return err
	}
	defer r.Close()
	known := map[string]string{}
	for _, name := range st.liveNames() {
		known[name] = st.sessions[name].Dir
	}
	rr, err := r.Reconcile(ctx, known)
	if err != nil {
		return err
	}
	if len(rr.Problems) > 0 {
		return fmt.Errorf("reconcile problems: %s", strings.Join(rr.Problems, "; "))
	}
	rep.Recreated += len(rr.Recreated)
	rep.Orphans += len(rr.Orphans)
	// Sessions whose discard was cut short were reconciled as orphans: finish them.
	for _, o := range rr.Orphans {
		st.forget(o.Name)
	}
	if _, err := runGit(ctx, dir, "fsck", "--no-progress", "--no-dangling"); err != nil {
		return err
	}
	for name, d := range known {
		if _, err := runGit(ctx, d, "status", "--porcelain"); err != nil {
			return fmt.Errorf("session %s: %w", name, err)
		}
	}
	list, err := runGit(ctx, dir, "worktree", "list", "--porcelain")
	if err != nil {
		return err
	}
	for _, l := range strings.Split(list, "\n") {
		if wt, ok := strings.CutPrefix(l, "worktree "); ok && wt != dir && !strings.HasPrefix(dir, wt) {
			found := false
			for _, d := range known {
				if d == wt {
					found = true
				}
			}
			if !found {
				return fmt.Errorf("worktree %s belongs to no recorded session", wt)
			}
		}
	}
	all, err := runGit(ctx, dir, "rev-list", "--all")
	if err != nil {
		return err
	}
	reachable := map[string]bool{}
	for _, h := range strings.Fields(all) {
		reachable[h] = true
	}
	for _, c := range st.commits {
		if !reachable[c] {
			return fmt.Errorf("recorded checkpoint %s is reachable from no ref: work lost", c)
		}
	}
	return nil
}

type soakSession struct{ Dir, Branch string }

// soakState is the journal replayed: what a daemon would have recorded.
type soakState struct {
	sessions map[string]soakSession
	last     map[string]string // session → last recorded checkpoint
	commits  []string          // every recorded checkpoint: none may be lost
	done     int               // completed operations
	byOp     map[string]int    // completed operations by kind
	forgot   map[string]bool
}

func readJournal(dir string) (*soakState, error) {
	st := &soakState{sessions: map[string]soakSession{}, last: map[string]string{}, forgot: map[string]bool{}, byOp: map[string]int{}}
	f, err := os.Open(journalPath(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e entry
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue // a torn last line from a kill
		}
		switch e.Phase {
		case "intent":
			if e.Op == "discard" {
				st.forgot[e.Name] = true // if it does not finish, Reconcile cleans it up as an orphan
			}
		case "done":
			st.done++
			st.byOp[e.Op]++
			st.apply(e)
		}
	}
	return st, sc.Err()
}

func (st *soakState) apply(e entry) {
	switch e.Op {
	case "fork":
		st.sessions[e.Name] = soakSession{Dir: e.Dir, Branch: e.Branch}
	case "checkpoint":
		st.last[e.Name] = e.Commit
		st.commits = append(st.commits, e.Commit)
	case "discard":
		st.forget(e.Name)
	}
}

func (st *soakState) forget(name string) {
	delete(st.sessions, name)
	delete(st.last, name)
}

func (st *soakState) liveNames() []string {
	var out []string
	for n := range st.sessions {
		if !st.forgot[n] {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
