package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/arborhq/arbor/server"
)

func cmdDiff(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("diff", flag.ContinueOnError)
	stat := fs.Bool("stat", false, "files with added and deleted line counts")
	asJSON := fs.Bool("json", false, "files and hunks as JSON")
	turn := fs.Int("turn", 0, "only the change of this turn")
	all := fs.Bool("all", false, "the whole change, also what was accepted already (default: what remains to review)")
	pos, err := flags(fs, args)
	if err != nil {
		return err
	}
	if err := needArgs(pos, 1, "diff ID [--stat] [--json] [--turn N] [--all]"); err != nil {
		return err
	}
	c, err := connect(ctx, true, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	d, err := server.SessionDiff.Call(ctx, c, server.DiffParams{ID: pos[0], Turn: *turn, All: *all})
	if err != nil {
		return err
	}
	switch {
	case *asJSON:
		return printJSON(d)
	case *stat:
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 1, ' ', 0)
		adds, dels := 0, 0
		for _, f := range d.Files {
			fmt.Fprintf(tw, " %s\t| +%d -%d\t%s\n", f.Path, f.Additions, f.Deletions, f.Status)
			adds += f.Additions
			dels += f.Deletions
		}
		tw.Flush()
		fmt.Printf(" %d files changed, %d insertions(+), %d deletions(-)\n", len(d.Files), adds, dels)
		return nil
	}
	fmt.Print(d.Patch)
	return nil
}
