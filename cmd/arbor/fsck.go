package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/arborhq/arbor/agents/eventlog"
	"github.com/arborhq/arbor/gitstate"
)

func cmdFsck(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("fsck", flag.ContinueOnError)
	repair := fs.Bool("repair", false, "keep the longest valid prefix of a damaged log (the original is copied aside)")
	pos, err := flags(fs, args)
	if err != nil {
		return err
	}
	dir := "."
	if len(pos) > 0 {
		dir = pos[0]
	}
	repo, err := gitstate.Open(dir, nil)
	if err != nil {
		return err
	}
	logs, _ := filepath.Glob(filepath.Join(repo.CommonDir(), "arbor", "sessions", "*", "events.jsonl"))
	bad := 0
	for _, p := range logs {
		check := eventlog.Check
		if *repair {
			check = eventlog.Repair
		}
		r, err := check(p)
		if err != nil {
			bad++
			fmt.Printf("%s: %v\n", p, err)
			continue
		}
		status := "ok"
		switch {
		case r.Repaired:
			status = fmt.Sprintf("repaired: kept the valid prefix (%d bytes), dropped %d checksummed lines; the original is at %s", r.ValidBytes, r.Dropped, r.Backup)
		case r.Corrupt:
			bad++
			status = "CORRUPT (the session is quarantined; run arbor fsck --repair): " + r.Detail
		case r.TornTail:
			// An append cut short by a crash was never acknowledged; Open sets it aside.
			status = "torn tail (never acknowledged; set aside when the session is next opened): " + r.Detail
		}
		fmt.Printf("%s: %d records, last seq %d: %s\n", filepath.Base(filepath.Dir(p)), r.Records, r.LastSeq, status)
	}
	fmt.Printf("%d logs checked, %d with problems\n", len(logs), bad)
	if bad > 0 && !*repair {
		os.Exit(1)
	}
	return nil
}
