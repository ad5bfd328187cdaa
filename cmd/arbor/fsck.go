package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/arborhq/arbor/agents/eventlog"
	"github.com/arborhq/arbor/agents/harness"
	"github.com/arborhq/arbor/gitstate"
	"github.com/arborhq/arbor/workspace"
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
	stores, harnessBad, err := checkHarness(ctx, repo.CommonDir())
	if err != nil {
		return err
	}
	fmt.Printf("%d logs and %d harness stores checked, %d with problems\n", len(logs), stores, bad+harnessBad)
	// --repair mends logs alone: a broken harness store still fails the check.
	if (bad > 0 && !*repair) || harnessBad > 0 {
		os.Exit(1)
	}
	return nil
}

// checkHarness checks the harness stores — the repository's workspace store, each session's,
// and the user's global one — printing a line for each, and returns how many it checked and
// how many are broken. A broken store stops no session (a turn goes on without it), so the
// line says how to start it afresh.
func checkHarness(ctx context.Context, commonDir string) (checked, bad int, err error) {
	refs, err := harness.Refs(ctx, commonDir)
	if err != nil {
		return 0, 0, err
	}
	// The workspace store first, whether or not it has a commit yet.
	workspaceRef := harness.ScopeWorkspace.Ref("")
	refs = append([]string{workspaceRef}, slices.DeleteFunc(refs, func(r string) bool { return r == workspaceRef })...)
	report := func(label, goesOn string, st *harness.Store, aside string) error {
		r, err := st.Check(ctx)
		if err != nil {
			return err
		}
		checked++
		switch {
		case !r.OK():
			bad++
			fix := "to start it afresh: " + r.Fix
			if aside != "" {
				fix = "to start it afresh move " + aside + " aside"
			} else {
				label += " in " + r.GitDir
			}
			fmt.Printf("%s: CORRUPT: %s — %s; %s\n", label, strings.Join(r.Problems, "; "), goesOn, fix)
		case r.Head == "":
			fmt.Printf("%s: ok, empty\n", label)
		default:
			fmt.Printf("%s: ok, %d commits, %d entries\n", label, r.Commits, r.Entries)
		}
		return nil
	}
	for _, ref := range refs {
		label, goesOn := "harness "+strings.TrimPrefix(ref, "refs/arbor/harness/"), "the sessions go on without it"
		if id, ok := strings.CutPrefix(ref, "refs/arbor/harness/session/"); ok {
			label, goesOn = "harness session "+id, "the session goes on without it"
		}
		st, err := harness.Open(commonDir, ref)
		if err != nil {
			return checked, bad, err
		}
		if err := report(label+" ("+ref+")", goesOn, st, ""); err != nil {
			return checked, bad, err
		}
	}
	data := workspace.DataDir()
	if data == "" {
		fmt.Println("harness global: not checked: no home directory and no XDG_DATA_HOME to find it in")
		return checked, bad, nil
	}
	dir := filepath.Join(data, "harness")
	label := "harness global (" + dir + ")"
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		checked++
		fmt.Printf("%s: ok, empty (not created yet)\n", label)
		return checked, bad, nil
	}
	st, err := harness.Open(dir, harness.ScopeGlobal.Ref(""))
	if err != nil {
		checked++
		bad++
		fmt.Printf("%s: CORRUPT: %v — the sessions go on without it; to start it afresh move %s aside\n", label, err, dir)
		return checked, bad, nil
	}
	return checked, bad, report(label, "the sessions go on without it", st, dir)
}
