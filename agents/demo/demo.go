// Package demo runs Arbor end to end on a throwaway repository with the built-in scripted
// model: a real kernel renames a function across files on the session's own branch, as an
// autonomous run that ends only when the project's tests pass in the session's worktree, and
// /refine turns the session's one misstep into a reviewed memory of the repository's harness.
//
// Call [Run]; it prints the session, a summary of its events and the diff.
package demo

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/arborhq/arbor/agents"
	"github.com/arborhq/arbor/agents/eventlog"
	"github.com/arborhq/arbor/agents/harness"
	"github.com/arborhq/arbor/agents/model/scripted"
	"github.com/arborhq/arbor/workspace"
)

//go:embed script.json
var scriptJSON []byte

// Task is what the demo asks the agent to do.
const Task = "Rename area_of to rect_area across the project and keep the tests passing"

// Check is the demo run's end condition: the project's tests.
const Check = "python3 -m unittest -q"

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

var project = map[string]string{
	// As in any Python project: running the tests writes bytecode that is nobody's work.
	".gitignore": "__pycache__/\n",
	"geometry.py": `"""Shapes and their measures."""


def area_of(width, height):
    """Area of a width × height rectangle."""
    return width * height


def perimeter(width, height):
    return 2 * (width + height)
`,
	"report.py": `from geometry import area_of, perimeter


def describe(width, height):
    return f"{width}x{height}: area {area_of(width, height)}, perimeter {perimeter(width, height)}"


if __name__ == "__main__":
    print(describe(3, 4))
`,
	"test_geometry.py": `import unittest

from geometry import area_of
from report import describe


class GeometryTest(unittest.TestCase):
    def test_area(self):
        self.assertEqual(area_of(3, 4), 12)

    def test_describe(self):
        self.assertIn("area 12", describe(3, 4))


if __name__ == "__main__":
    unittest.main()
`,
	"README.md": "# shapes\n\nA tiny project for the Arbor demo.\n",
}

// Options configure Run.
type Options struct {
	Dir    string // where to make the repository; "" = a new temp dir
	Keep   bool   // keep the temp dir
	Python string // kernel Python; "" = auto
	Logger *slog.Logger
}

// Run makes the repository, serves the scripted model, runs the session to idle and prints
// what happened.
func Run(ctx context.Context, w io.Writer, o Options) error {
	start := time.Now()
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "arbor-demo-")
		if err != nil {
			return err
		}
		dir = d
		if !o.Keep {
			defer os.RemoveAll(dir)
		}
	}
	repo := filepath.Join(dir, "shapes")
	if err := makeRepo(repo); err != nil {
		return err
	}
	fmt.Fprintf(w, "demo repository: %s\n", repo)

	script, err := scripted.Parse(scriptJSON, "demo script")
	if err != nil {
		return err
	}
	sctx, stopModel := context.WithCancel(ctx)
	url, wait, err := scripted.Serve(sctx, "127.0.0.1:0", script, o.Logger)
	if err != nil {
		stopModel()
		return err
	}
	defer func() { stopModel(); wait() }()
	fmt.Fprintf(w, "scripted model:  %s\n", url)

	svc, err := agents.New(agents.Options{StateDir: filepath.Join(dir, "state"), Logger: o.Logger,
		Overrides: workspace.Overrides{ModelBaseURL: url, Model: "scripted", KernelPython: o.Python}})
	if err != nil {
		return err
	}
	defer svc.Close(context.WithoutCancel(ctx))
	settled := make(chan agents.Info, 16)
	unsub := svc.Subscribe(watcher{settled})
	defer unsub()

	// An autonomous run: done only when the project's own tests pass in the session's worktree.
	goal := agents.GoalSpec{Objective: Task, Until: Check, TurnBudget: 6, By: "autonomous"}
	sess, err := svc.Create(ctx, agents.CreateRequest{Task: Task, Dir: repo, Goal: &goal})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "session:         %s on branch %s\n", sess.ID(), sess.Meta().Branch)
	fmt.Fprintf(w, "autonomous run:  until `%s` passes in its worktree (at most %d turns)\n\n", Check, goal.TurnBudget)
	info, err := waitSettled(ctx, settled, sess.ID(), 2*time.Minute)
	if err != nil {
		return err
	}
	recs, err := sess.Events(0)
	if err != nil {
		return err
	}
	summarize(w, recs)
	g, ok, err := svc.GoalOf(sess.ID())
	if err != nil || !ok {
		return fmt.Errorf("the demo session's goal: %v", err)
	}
	fmt.Fprintf(w, "run %s after %d turn(s): verified by `%s`: %s; the model claimed success: %s\n",
		g.Status, g.Turns, g.Until, yesNo(g.Verified), yesNo(g.Claimed))
	d, err := svc.Diff(ctx, sess.ID())
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\n── diff of %s against its merge-base ──\n%s", info.Branch, d.Unified())
	fmt.Fprintf(w, "\nstate %s · %d model calls · %d tokens · %d kernel runs · %.1fs\n",
		info.State, info.Usage.ModelCalls, info.Usage.InputTokens+info.Usage.OutputTokens, info.Usage.KernelExecs, time.Since(start).Seconds())
	if info.State != agents.Idle {
		return fmt.Errorf("the demo session ended %s: %s", info.State, info.Error)
	}
	if !g.Verified {
		return fmt.Errorf("the demo's end condition did not pass: %s", g.Reason)
	}
	if !strings.Contains(d.Unified(), "+def rect_area") {
		return errors.New("the demo session's diff does not rename area_of")
	}
	return refine(ctx, w, svc, sess.ID(), repo)
}

// refine shows the continual harness: /refine reads the session's misstep, proposes a memory
// for the repository's shared harness, which waits for review; the demo accepts it as the user
// would (arbor proposals accept) and shows the commit with its trailers.
func refine(ctx context.Context, w io.Writer, svc *agents.Service, id, repo string) error {
	fmt.Fprintf(w, "\n── /refine: what the session's misstep teaches the repository's harness ──\n")
	out, err := svc.Refine(ctx, id, agents.RefineRequest{Scope: harness.ScopeWorkspace, Trigger: "user"})
	if err != nil {
		return err
	}
	if out.Error != "" || len(out.Proposals) != 1 {
		return fmt.Errorf("the demo's refine proposed %d edits: %s", len(out.Proposals), out.Error)
	}
	p := out.Proposals[0]
	fmt.Fprintf(w, "refine read events %d–%d (%d model call, %d tokens, counted apart from the task's)\n",
		out.FromSeq, out.ToSeq, out.Calls, out.Usage.InputTokens+out.Usage.OutputTokens)
	fmt.Fprintf(w, "proposal %s (%s): %s — %s, waiting for review\n  why: %s\n", p.ID, p.Scope, p.Title(), p.Status, p.Rationale)
	_, diff, err := svc.Proposal(ctx, repo, p.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s", diff)
	q, err := svc.AcceptProposal(ctx, repo, p.ID)
	if err != nil {
		return err
	}
	if q.Status != harness.Applied {
		return fmt.Errorf("the demo's proposal was %s: %s", q.Status, q.Reason)
	}
	msg, err := exec.CommandContext(ctx, "git", "-C", repo, "log", "-1", "--format=%h %s%n%(trailers)", q.Ref).Output()
	if err != nil {
		return fmt.Errorf("git log %s: %w", q.Ref, err)
	}
	fmt.Fprintf(w, "accepted (arbor proposals accept %s) → git log -1 %s:\n%s", p.ID, q.Ref, indentLines(string(msg)))
	fmt.Fprintf(w, "every later session of this repository sees it in its context; arbor harness history, diff and rollback work on it\n")
	return nil
}

func indentLines(s string) string {
	var b strings.Builder
	for l := range strings.Lines(s) {
		if strings.TrimSpace(l) != "" {
			b.WriteString("  " + l)
		}
	}
	return b.String()
}

type watcher struct{ ch chan agents.Info }

func (w watcher) SessionChanged(in agents.Info) {
	if in.State == agents.Idle || in.State == agents.Failed || in.State == agents.Stopped {
		select {
		case w.ch <- in:
		default:
		}
	}
}

func (watcher) Event(string, eventlog.Record) {}

func waitSettled(ctx context.Context, ch <-chan agents.Info, id string, limit time.Duration) (agents.Info, error) {
	t := time.NewTimer(limit)
	defer t.Stop()
	for {
		select {
		case in := <-ch:
			if in.ID == id {
				return in, nil
			}
		case <-t.C:
			return agents.Info{}, fmt.Errorf("the demo session did not finish within %v", limit)
		case <-ctx.Done():
			return agents.Info{}, ctx.Err()
		}
	}
}

func summarize(w io.Writer, recs []eventlog.Record) {
	counts := map[string]int{}
	for _, r := range recs {
		counts[r.Type]++
		var d map[string]any
		json.Unmarshal(r.Data, &d)
		switch r.Type {
		case "assistant_message":
			if t, _ := d["text"].(string); t != "" {
				fmt.Fprintf(w, "  #%-3d assistant: %s\n", r.Seq, t)
			}
		case "tool_finished":
			out, _ := d["output"].(string)
			fmt.Fprintf(w, "  #%-3d python → %s\n", r.Seq, strings.ReplaceAll(strings.TrimSpace(out), "\n", "\n         "))
		case "checkpoint":
			c, _ := d["commit"].(string)
			fmt.Fprintf(w, "  #%-3d checkpoint %.10s\n", r.Seq, c)
		case "state_changed":
			fmt.Fprintf(w, "  #%-3d state → %v\n", r.Seq, d["state"])
		case "verified":
			verdict := "failed"
			if d["passed"] == true {
				verdict = "passed"
			}
			fmt.Fprintf(w, "  #%-3d end condition `%v` %s\n", r.Seq, d["command"], verdict)
		case "goal_changed":
			fmt.Fprintf(w, "  #%-3d goal → %v: %v\n", r.Seq, d["status"], d["reason"])
		}
	}
	var kinds []string
	for k, n := range counts {
		kinds = append(kinds, fmt.Sprintf("%s×%d", k, n))
	}
	sort.Strings(kinds)
	fmt.Fprintf(w, "\n%d events: %s\n", len(recs), strings.Join(kinds, ", "))
}

func makeRepo(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, body := range project {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "."},
		{"-c", "user.name=Arbor Demo", "-c", "user.email=demo@arbor.invalid", "commit", "-q", "-m", "shapes: initial project"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}
