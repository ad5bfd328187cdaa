package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/arborhq/arbor/agents/eval"
	"github.com/arborhq/arbor/server"
	"github.com/arborhq/arbor/workspace"
)

const evalUsage = `usage:
  arbor eval run SUITE [--split feedback|heldout] [--tags a,b] [--harness REF] [--model M] [--repeat K] [--parallel N] [--detach] [--json]
  arbor eval results [RUN|latest] [--json]
  arbor eval compare A B [--json]
  arbor eval stop RUN
SUITE is a suite directory or a built-in suite (` + "`example`" + `); REF a harness commit
(arbor harness history), global:REV, or a proposal id; RUN an id, a unique prefix or "latest".`

func cmdEval(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%s", evalUsage)
	}
	switch args[0] {
	case "run":
		return evalRunCmd(ctx, args[1:])
	case "results", "ls":
		return evalResultsCmd(ctx, args[1:])
	case "compare":
		return evalCompareCmd(ctx, args[1:])
	case "stop":
		return evalStopCmd(ctx, args[1:])
	default:
		return fmt.Errorf("unknown eval command %q\n%s", args[0], evalUsage)
	}
}

func evalRunCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("eval run", flag.ContinueOnError)
	split := fs.String("split", "", "feedback or heldout (default: every task)")
	tags := fs.String("tags", "", "only tasks with every one of these tags (comma-separated)")
	harnessRef := fs.String("harness", "", "the harness version measured (default: the current one)")
	modelName := fs.String("model", "", "a configured model (default: the suite's scripted model)")
	repeat := fs.Int("repeat", 1, "runs of each task (2 or more to measure the noise)")
	parallel := fs.Int("parallel", 1, "tasks at a time")
	detach := fs.Bool("detach", false, "start the run and return; see it with arbor eval results")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	dir := fs.String("dir", ".", "the repository whose harness is measured")
	pos, err := flags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%s", evalUsage)
	}
	if *repeat < 1 {
		return fmt.Errorf("--repeat %d: want at least 1 (each task runs that many times; 2 or more measure the noise)", *repeat)
	}
	abs, err := absDir(*dir)
	if err != nil {
		return err
	}
	suite := pos[0]
	if _, err := os.Stat(suite); err == nil {
		if suite, err = absDir(suite); err != nil {
			return err
		}
	}
	var tagList []string
	for t := range strings.SplitSeq(*tags, ",") {
		if t = strings.TrimSpace(t); t != "" {
			tagList = append(tagList, t)
		}
	}
	c, err := connect(ctx, true, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	run, err := server.EvalRun.Call(ctx, c, server.EvalRunParams{Dir: abs, Suite: suite, Split: *split, Tags: tagList,
		Harness: *harnessRef, Model: *modelName, Repeat: repeat, Parallel: *parallel})
	if err != nil {
		return err
	}
	if *detach {
		if *asJSON {
			return printJSON(run)
		}
		fmt.Printf("eval run %s started: %d task(s) × %d on %s\n  follow it: arbor eval results %s\n", run.ID, len(run.Tasks), run.Repeat, run.Model, run.ID)
		return nil
	}
	if !*asJSON {
		fmt.Printf("eval run %s: suite %s, %d task(s) × %d, model %s, harness %s\n", run.ID, run.Suite, len(run.Tasks), run.Repeat, run.Model, harnessLabel(run.Harness))
	}
	shown := map[string]bool{}
	for {
		res, err := server.EvalResults.Call(ctx, c, server.EvalResultsParams{Dir: abs, Run: run.ID})
		if err != nil {
			return err
		}
		rep := res.Report
		if !*asJSON {
			for _, r := range rep.Results {
				if k := eval.Key(r.Task, r.Repeat); !shown[k] {
					shown[k] = true
					fmt.Println("  " + resultLine(r))
				}
			}
		}
		if !res.Running && rep.Run.Status != eval.RunRunning {
			if *asJSON {
				return printJSON(rep)
			}
			fmt.Println()
			printReport(os.Stdout, rep)
			if rep.Run.Status != eval.RunDone {
				return exitCode(1)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(os.Stderr, "\nthe run goes on in the daemon: arbor eval results %s (arbor eval stop %s ends it)\n", run.ID, run.ID)
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func evalResultsCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("eval results", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	dir := fs.String("dir", ".", "the repository")
	pos, abs, c, err := evalArgs(ctx, fs, dir, args, func(n int) bool { return n <= 1 })
	if err != nil {
		return err
	}
	defer c.Close()
	p := server.EvalResultsParams{Dir: abs}
	if len(pos) == 1 {
		p.Run = pos[0]
	}
	res, err := server.EvalResults.Call(ctx, c, p)
	if err != nil {
		return err
	}
	if *asJSON {
		if res.Report != nil {
			return printJSON(res.Report)
		}
		return printJSON(res.Runs)
	}
	if res.Report != nil {
		printReport(os.Stdout, res.Report)
		return nil
	}
	if len(res.Runs) == 0 {
		fmt.Println("no eval runs in this repository yet: arbor eval run example")
		return nil
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, "RUN\tSUITE\tSPLIT\tTASKS\tMODEL\tHARNESS\tSTATUS\tCREATED\tFOR")
	for _, r := range res.Runs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d×%d\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Suite, orDash(r.Split), len(r.Tasks), r.Repeat, r.Model,
			harnessLabel(r.Harness), r.Status, r.Created.Local().Format("2006-01-02 15:04"), orDash(r.Label))
	}
	return w.Flush()
}

func evalCompareCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("eval compare", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	dir := fs.String("dir", ".", "the repository")
	pos, abs, c, err := evalArgs(ctx, fs, dir, args, func(n int) bool { return n == 2 })
	if err != nil {
		return err
	}
	defer c.Close()
	cmp, err := server.EvalCompare.Call(ctx, c, server.EvalCompareParams{Dir: abs, A: pos[0], B: pos[1]})
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(cmp)
	}
	printComparison(os.Stdout, cmp)
	return nil
}

func evalStopCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("eval stop", flag.ContinueOnError)
	dir := fs.String("dir", ".", "the repository")
	pos, abs, c, err := evalArgs(ctx, fs, dir, args, func(n int) bool { return n == 1 })
	if err != nil {
		return err
	}
	defer c.Close()
	run, err := server.EvalStop.Call(ctx, c, server.EvalStopParams{Dir: abs, Run: pos[0]})
	if err != nil {
		return err
	}
	fmt.Printf("eval run %s: %s\n", run.ID, run.Status)
	return nil
}

// evalArgs parses a subcommand's flags (fs has a "dir" flag, read through dir), checks the
// number of arguments, and connects to the daemon.
func evalArgs(ctx context.Context, fs *flag.FlagSet, dir *string, args []string, ok func(n int) bool) ([]string, string, *server.Client, error) {
	pos, err := flags(fs, args)
	if err != nil {
		return nil, "", nil, err
	}
	if !ok(len(pos)) {
		return nil, "", nil, fmt.Errorf("%s", evalUsage)
	}
	abs, err := absDir(*dir)
	if err != nil {
		return nil, "", nil, err
	}
	c, err := connect(ctx, true, nil)
	if err != nil {
		return nil, "", nil, err
	}
	return pos, abs, c, nil
}

func harnessLabel(h map[string]string) string {
	var parts []string
	for _, sc := range []string{"workspace", "global"} {
		c := h[sc]
		if c == "" {
			c = "empty"
		} else if len(c) > 10 {
			c = c[:10]
		}
		parts = append(parts, sc+"="+c)
	}
	return strings.Join(parts, " ")
}

func orDash(s string) string {
	if s == "" {
		return "all"
	}
	return s
}

// resultLine is one task run, as it lands.
func resultLine(r eval.TaskResult) string {
	mark := map[string]string{eval.Passed: "✓", eval.Failed: "✗", eval.Errored: "!"}[r.Status]
	claim := "no claim"
	if r.Claimed {
		claim = "claimed"
		if r.FalseClaim() {
			claim = "claimed falsely"
		}
	}
	line := fmt.Sprintf("%s %-24s %-8s %-16s %7s tok  %5.1fs", mark, eval.Key(r.Task, r.Repeat), r.Status, claim,
		thousands(r.Usage.Tokens()), float64(r.WallMs)/1000)
	if len(r.Flags) > 0 {
		line += "  [" + strings.Join(r.Flags, ", ") + "]"
	}
	if r.Error != "" {
		line += "\n      " + r.Error
	}
	if r.Status == eval.Failed && r.Check != nil {
		if last := lastLine(r.Check.Output); last != "" {
			line += "\n      check: " + last
		}
		if j := r.Check.Judged; j != "" && !strings.HasPrefix(j, "exit code ") || strings.Contains(j, ", but") {
			line += "\n      judged: " + j
		}
		if r.Fixture != "" {
			line += "\n      its work: git -C " + workspace.ShellQuote(r.Fixture) + " diff main " + r.Branch
		}
	}
	return line
}

func printReport(w io.Writer, rep *eval.Report) {
	run := rep.Run
	fmt.Fprintf(w, "eval run %s — suite %s (%s), model %s, harness %s, %s\n", run.ID, run.Suite, orDash(run.Split), run.Model, harnessLabel(run.Harness), run.Status)
	if run.Sandbox != "" && run.Sandbox != "bwrap" {
		fmt.Fprintf(w, "  warning   the tasks ran unsandboxed (%s)\n", strings.TrimPrefix(run.Sandbox, "none: "))
	}
	if run.Label != "" {
		fmt.Fprintf(w, "  for       %s\n", run.Label)
	}
	fmt.Fprintf(w, "  success   %s", rep.Rate)
	if rep.Spread != nil {
		fmt.Fprintf(w, "; across %d repeats ±%.1f points (sd)", len(rep.PerRepeat), 100**rep.Spread)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  claims    %d claimed, %d of them false (the check failed)\n", rep.Claimed, rep.False)
	fmt.Fprintf(w, "  flagged   %d task run(s) with degenerate output\n", rep.Degen)
	if rep.Errored > 0 {
		fmt.Fprintf(w, "  errored   %d task run(s) could not be judged (left out of the success rate)\n", rep.Errored)
	}
	if rep.Pending > 0 {
		fmt.Fprintf(w, "  pending   %d task run(s) not finished\n", rep.Pending)
	}
	refine := ""
	if m := rep.Mean; m.RefineTokens > 0 || m.RefineCalls > 0 {
		refine = fmt.Sprintf(", %s refine", thousands(m.RefineTokens))
	}
	fmt.Fprintf(w, "  per task  %s tokens (%s in, %s cached, %s out%s), $%.4f, %.1fs\n", thousands(rep.Mean.Tokens()), thousands(rep.Mean.InputTokens),
		thousands(rep.Mean.CachedInputTokens), thousands(rep.Mean.OutputTokens), refine, rep.Mean.CostUSD+rep.Mean.RefineCostUSD, rep.WallMs/1000)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tSPLIT\tPASSED\tCLAIMED\tFALSE\tTOKENS\tCOST\tTIME\tFLAGS")
	for _, t := range rep.Tasks {
		var flags []string
		for f, n := range t.Flags {
			flags = append(flags, fmt.Sprintf("%s×%d", f, n))
		}
		passed := fmt.Sprintf("%d/%d", t.Passed, t.Runs-t.Errored)
		if t.Errored > 0 {
			passed += fmt.Sprintf(" (+%d errored)", t.Errored)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t$%.4f\t%.1fs\t%s\n", t.Task, t.Split, passed, t.Claimed, t.False, thousands(int64(t.Tokens)),
			t.CostUSD, t.WallMs/1000, strings.Join(sorted(flags), " "))
	}
	tw.Flush()
}

func printComparison(w io.Writer, c *eval.Comparison) {
	fmt.Fprintf(w, "A  %s  model %s, harness %s\n", c.A.ID, c.A.Model, harnessLabel(c.A.Harness))
	fmt.Fprintf(w, "B  %s  model %s, harness %s\n\n", c.B.ID, c.B.Model, harnessLabel(c.B.Harness))
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tA\tB\tTOKENS A\tTOKENS B")
	for _, t := range c.Tasks {
		fmt.Fprintf(tw, "%s\t%.0f%% of %d\t%.0f%% of %d\t%s\t%s\n", t.Task, 100*t.A, t.RunsA, 100*t.B, t.RunsB, thousands(int64(t.TokensA)), thousands(int64(t.TokensB)))
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, warn := range c.Warnings {
		fmt.Fprintln(w, "note: "+warn)
	}
	fmt.Fprintln(w, c.Verdict)
}

// lastLine is the line of a check's output that says most: the first assertion or failing
// test it names, or else its last line; bounded.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	l := strings.TrimSpace(lines[len(lines)-1])
	for _, x := range lines {
		x = strings.TrimSpace(x)
		if strings.HasPrefix(x, "AssertionError") || strings.HasPrefix(x, "FAIL:") || strings.HasPrefix(x, "ERROR:") || strings.HasPrefix(x, "E   ") {
			l = x
			break
		}
	}
	if len(l) > 160 {
		l = l[:160] + "…"
	}
	return l
}

func sorted(s []string) []string { sort.Strings(s); return s }

func thousands(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}
