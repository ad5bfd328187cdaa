package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/arborhq/arbor/server"
)

const goalUsage = `usage: arbor goal ID "objective" [--budget tokens=N,turns=N,wall=2h,cost=5] [--until CMD [--check-timeout 5m]] [--replace]
       arbor goal ID [pause|resume|clear] [--json]
Gives session ID a goal that keeps it taking turns until the goal is met, a budget runs out,
or it stalls (turns that change nothing back off, then end it). Budgets count the session and
all its subagents. With --until the goal is met only when CMD passes in the session's
worktree (it runs after each turn); otherwise the model reports it met (goal.complete).
Without an objective, shows the goal (or pauses, resumes or clears it).`

// cmdGoal sets, shows, pauses, resumes or clears a session's goal.
func cmdGoal(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("goal", flag.ContinueOnError)
	budget := fs.String("budget", "", "limits: tokens=N,turns=N,wall=DURATION,cost=USD")
	until := fs.String("until", "", "an end-condition command run in the worktree after each turn")
	checkTimeout := fs.String("check-timeout", "", "bounds the end condition (default goals.checkTimeout, 10m)")
	replace := fs.Bool("replace", false, "replace the session's active or paused goal")
	asJSON := fs.Bool("json", false, "as JSON")
	fs.Usage = func() { fmt.Fprintln(fs.Output(), goalUsage); fs.PrintDefaults() }
	pos, err := flags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 || len(pos) > 2 {
		return errors.New(goalUsage)
	}
	c, err := connect(ctx, true, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	id := pos[0]
	var g *server.Goal
	switch {
	case len(pos) == 1:
		res, err := server.GoalGet.Call(ctx, c, server.GoalRef{Session: id})
		if err != nil {
			return err
		}
		if res.Goal == nil {
			if *asJSON {
				return printJSON(res)
			}
			fmt.Printf("session %s has no goal; set one with: arbor goal %s \"objective\"\n", abbrev(id, 8), abbrev(id, 8))
			return nil
		}
		g = res.Goal
	case pos[1] == "pause" || pos[1] == "resume" || pos[1] == "clear":
		if g, err = server.GoalControl.Call(ctx, c, server.GoalControlParams{Session: id, Action: pos[1]}); err != nil {
			return err
		}
	default:
		p := server.GoalSetParams{Session: id, Objective: pos[1], Until: *until, CheckTimeout: *checkTimeout, Replace: *replace}
		if err := parseBudget(*budget, &p); err != nil {
			return err
		}
		if g, err = server.GoalSet.Call(ctx, c, p); err != nil {
			return err
		}
	}
	if *asJSON {
		return printJSON(g)
	}
	printGoal(g)
	return nil
}

// parseBudget reads --budget tokens=N,turns=N,wall=D,cost=USD into p; errors name the item.
func parseBudget(s string, p *server.GoalSetParams) error {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	for i, item := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(item), "=")
		bad := func(want string) error {
			return fmt.Errorf("--budget item %d %q: %s", i+1, item, want)
		}
		if !ok {
			return bad("want KEY=VALUE with KEY tokens, turns, wall or cost")
		}
		switch k {
		case "tokens":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return bad("want a whole number of tokens above zero")
			}
			p.TokenBudget = &n
		case "turns":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return bad("want a whole number of turns above zero")
			}
			p.TurnBudget = &n
		case "wall":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return bad("want a duration above zero such as 2h or 90m")
			}
			p.WallBudget = v
		case "cost":
			f, err := strconv.ParseFloat(strings.TrimPrefix(v, "$"), 64)
			if err != nil || f <= 0 {
				return bad("want an amount of USD above zero such as 5 or 0.50")
			}
			p.CostBudget = &f
		default:
			return bad("unknown budget; want tokens, turns, wall or cost")
		}
	}
	return nil
}

func printGoal(g *server.Goal) {
	fmt.Printf("goal of %s: %s\n", abbrev(g.Session, 8), g.Objective)
	status := strings.ReplaceAll(g.Status, "_", " ")
	if g.Waiting != "" {
		status += " (waiting on " + g.Waiting + ")"
	}
	fmt.Printf("  status:   %s\n", status)
	if g.Reason != "" {
		fmt.Printf("  why:      %s\n", g.Reason)
	}
	if b := budgetText(g.TokenBudget, g.TurnBudget, g.WallBudgetMs, g.CostBudget); b != "" {
		fmt.Printf("  budget:   %s\n", b)
	}
	fmt.Printf("  spent:    %d turns, %s (the whole subtree since %s)\n", g.Turns, spendText(g.Spent), g.Set.Local().Format("2006-01-02 15:04"))
	if g.Until != "" {
		fmt.Printf("  until:    `%s` (%d checks)\n", g.Until, g.Checks)
	}
	fmt.Printf("  success:  claimed by the model: %s; verified: %s\n", yesNo(g.Claimed), verifiedText(g))
	if g.Evidence != "" {
		fmt.Printf("  evidence: %s\n", g.Evidence)
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func verifiedText(g *server.Goal) string {
	switch {
	case g.Until == "":
		return "no end condition"
	case g.Verified:
		return "yes"
	}
	return "no"
}

const progressUsage = `usage: arbor progress ID [--json]
Prints session ID's cost–progress series: each verifier outcome (end condition, harness gate),
checkpoint and goal change, with the tokens and cost its whole subtree had spent by then.`

// cmdProgress prints a session's cost–progress series.
func cmdProgress(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("progress", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "as JSON")
	fs.Usage = func() { fmt.Fprintln(fs.Output(), progressUsage); fs.PrintDefaults() }
	pos, err := flags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New(progressUsage)
	}
	c, err := connect(ctx, true, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := server.Progress.Call(ctx, c, server.ProgressParams{Session: pos[0]})
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(res)
	}
	if len(res.Points) == 0 {
		fmt.Printf("session %s has no progress points yet (checkpoints, goals, end-condition and gate results)\n", abbrev(res.Session, 8))
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tKIND\tSTATUS\tTOKENS\tCOST\tCALLS\tDETAIL")
	for _, p := range res.Points {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t$%.4f\t%d\t%s\n", p.Seq, p.Time.Local().Format("15:04:05"), p.Kind, p.Status,
			p.Spend.Tokens, p.Spend.CostUSD, p.Spend.ModelCalls, clipLine(p.Detail, 60))
	}
	return tw.Flush()
}

func clipLine(s string, n int) string {
	s = firstLine(s)
	if len(s) > n {
		s = s[:n-1] + "…"
	}
	return s
}
