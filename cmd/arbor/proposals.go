package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/arborhq/arbor/server"
)

const refineUsage = `usage: arbor refine ID [--focus TEXT] [--scope session|workspace|global] [--json]
Asks a model to propose minimal harness edits from what went wrong in session ID since its last
refine; the scope's policy applies each one or leaves it for review (arbor proposals).`

// cmdRefine runs /refine on a session and prints what it proposed.
func cmdRefine(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("refine", flag.ContinueOnError)
	focus := fs.String("focus", "", "what to look at (e.g. \"the failing import\")")
	scope := fs.String("scope", "session", "the scope the edits are for")
	asJSON := fs.Bool("json", false, "as JSON")
	fs.Usage = func() { fmt.Fprintln(fs.Output(), refineUsage); fs.PrintDefaults() }
	pos, err := flags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New(refineUsage)
	}
	c, err := connect(ctx, true, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	id := pos[0]
	res, err := server.RefineRun.Call(ctx, c, server.RefineRunParams{Session: id, Focus: *focus, Scope: *scope})
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(res)
	}
	fmt.Printf("refine of %s (%s scope): events %d–%d, %d model call(s), %d+%d tokens (apart from the task's)\n",
		abbrev(id, 8), res.Scope, res.FromSeq, res.ToSeq, res.Calls, res.InputTokens, res.OutputTokens)
	if res.Error != "" {
		fmt.Printf("no proposal: %s\n", res.Error)
		return nil
	}
	if res.Summary != "" {
		fmt.Printf("summary: %s\n", res.Summary)
	}
	if len(res.Proposals) == 0 {
		fmt.Println("no edits proposed")
		return nil
	}
	printProposals(res.Proposals)
	return nil
}

const proposalsUsage = `usage: arbor proposals [PID] [--status pending|applied|rejected|all] [--dir D] [--json]
       arbor proposals accept PID
       arbor proposals reject PID [--reason TEXT]
Lists the harness proposals of this repository, its sessions and your global harness
(pending ones by default); with PID, shows one with its diff.`

// cmdProposals lists, shows, accepts and rejects harness proposals.
func cmdProposals(ctx context.Context, args []string) error {
	sub := ""
	if len(args) > 0 && (args[0] == "accept" || args[0] == "reject") {
		sub, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("proposals", flag.ContinueOnError)
	dir := fs.String("dir", ".", "a directory inside the repository")
	status := fs.String("status", "pending", "pending, applied, rejected or all")
	reason := fs.String("reason", "", "why (for reject)")
	asJSON := fs.Bool("json", false, "as JSON")
	fs.Usage = func() { fmt.Fprintln(fs.Output(), proposalsUsage); fs.PrintDefaults() }
	pos, err := flags(fs, args)
	if err != nil {
		return err
	}
	if *dir, err = absDir(*dir); err != nil {
		return err
	}
	if (sub != "" && len(pos) != 1) || len(pos) > 1 {
		return errors.New(proposalsUsage)
	}
	c, err := connect(ctx, true, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	switch {
	case sub == "accept":
		p, err := server.RefineAccept.Call(ctx, c, server.ProposalDecideParams{Dir: *dir, ID: pos[0]})
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(p)
		}
		if p.Status == "applied" {
			fmt.Printf("%s applied to the %s harness as %s: %s\n", p.ID, p.Scope, short(p.Applied), editsLine(p.Edits))
		} else {
			fmt.Printf("%s was not applied: %s by %s: %s\n", p.ID, p.Status, decider(p.DecidedBy), p.Reason)
		}
		if p.Observed != "" {
			fmt.Printf("observed: %s\n", p.Observed)
		}
		if p.Status != "applied" {
			os.Exit(1)
		}
		return nil
	case sub == "reject":
		p, err := server.RefineReject.Call(ctx, c, server.ProposalDecideParams{Dir: *dir, ID: pos[0], Reason: *reason})
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(p)
		}
		fmt.Printf("%s rejected: %s\n", p.ID, p.Reason)
		return nil
	case len(pos) == 1:
		p, err := server.RefineProposal.Call(ctx, c, server.ProposalRef{Dir: *dir, ID: pos[0]})
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(p)
		}
		showProposal(p)
		return nil
	}
	res, err := server.RefineProposals.Call(ctx, c, server.ProposalsParams{Dir: *dir, Status: *status})
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(res.Proposals)
	}
	if len(res.Proposals) == 0 {
		fmt.Printf("no %s proposals\n", strings.TrimSuffix(*status, "all"))
		return nil
	}
	printProposals(res.Proposals)
	return nil
}

func editsLine(es []server.ProposalEdit) string {
	var parts []string
	for _, e := range es {
		parts = append(parts, e.Op+" "+e.Kind+" "+e.ID)
	}
	return strings.Join(parts, ", ")
}

func printProposals(ps []server.Proposal) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROPOSAL\tSTATUS\tSCOPE\tAUTHOR\tSESSION\tCHANGE\tREASON")
	for _, p := range ps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.ID, p.Status, p.Scope, p.Author, abbrev(p.Session, 8), editsLine(p.Edits), firstLine(p.Reason))
	}
	tw.Flush()
	for _, p := range ps {
		if p.Status == "pending" {
			fmt.Println("review one with `arbor proposals PID`, then `arbor proposals accept|reject PID`")
			break
		}
	}
}

func showProposal(p *server.Proposal) {
	fmt.Printf("proposal %s: %s (%s scope, %s)\n", p.ID, editsLine(p.Edits), p.Scope, p.Status)
	fmt.Printf("author:   %s", p.Author)
	if p.Session != "" {
		fmt.Printf(" (session %s, turn %d)", p.Session, p.Turn)
	}
	fmt.Printf("\ncreated:  %s\n", p.Created.Local().Format(time.DateTime))
	if len(p.Trigger) > 0 {
		var seqs []string
		for _, q := range p.Trigger {
			seqs = append(seqs, fmt.Sprint(q))
		}
		fmt.Printf("trigger:  events %s\n", strings.Join(seqs, ", "))
	}
	if p.Rationale != "" {
		fmt.Printf("why:      %s\n", p.Rationale)
	}
	if p.Intended != "" {
		fmt.Printf("intended: %s\n", p.Intended)
	}
	for _, a := range p.Advice {
		fmt.Printf("advice:   %s\n", a)
	}
	if p.Reason != "" {
		fmt.Printf("reason:   %s (by %s)\n", p.Reason, decider(p.DecidedBy))
	}
	if p.Observed != "" {
		fmt.Printf("observed: %s\n", p.Observed)
	}
	if p.Applied != "" {
		fmt.Printf("applied:  %s (by %s)\n", p.Applied, decider(p.DecidedBy))
	}
	fmt.Println()
	fmt.Print(p.Diff)
}

// decider names who decided a proposal in words; "gate" is what proposals decided before the
// branch check had its name.
func decider(by string) string {
	switch by {
	case "branch-check", "gate":
		return "the branch check"
	case "eval-gate":
		return "the eval gate"
	}
	return by
}
