package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/arborhq/arbor/server"
)

const heartbeatUsage = `usage: arbor heartbeat ID "instruction" --every 10m | --cron "*/15 * * * *" [--json]
       arbor heartbeat delete HID
Sends session ID the instruction as a message on a schedule: every a duration (at least 1s),
or a five-field cron expression (minute hour day-of-month month day-of-week) or @hourly.
Each delivery carries its run number; ticks that come while the session is busy, or while
the daemon is down, arrive as one message with their count. See arbor heartbeats.`

// cmdHeartbeat creates or deletes a heartbeat.
func cmdHeartbeat(ctx context.Context, args []string) error {
	del := len(args) > 0 && args[0] == "delete"
	if del {
		args = args[1:]
	}
	fs := flag.NewFlagSet("heartbeat", flag.ContinueOnError)
	every := fs.String("every", "", "an interval, like 10m or 1h30m")
	cron := fs.String("cron", "", `a cron expression, like "*/15 * * * *"`)
	asJSON := fs.Bool("json", false, "as JSON")
	fs.Usage = func() { fmt.Fprintln(fs.Output(), heartbeatUsage); fs.PrintDefaults() }
	pos, err := flags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case del && (len(pos) != 1 || *every != "" || *cron != ""):
		return errors.New(heartbeatUsage)
	case !del && len(pos) != 2:
		return errors.New(heartbeatUsage)
	case !del && (*every == "") == (*cron == ""):
		return fmt.Errorf("give exactly one of --every and --cron\n%s", heartbeatUsage)
	}
	c, err := connect(ctx, true, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	var hb *server.Heartbeat
	if del {
		hb, err = server.HeartbeatDelete.Call(ctx, c, server.HeartbeatID{ID: pos[0]})
	} else {
		hb, err = server.HeartbeatCreate.Call(ctx, c, server.HeartbeatCreateParams{Session: pos[0], Instruction: pos[1], Every: *every, Cron: *cron})
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(hb)
	}
	if del {
		fmt.Printf("heartbeat %s of session %s deleted after %d runs (%d delivered, %d pending dropped with it)\n",
			hb.ID, abbrev(hb.Session, 8), hb.Ticks, hb.Delivered, hb.Pending)
		return nil
	}
	fmt.Printf("heartbeat %s for session %s, %s; first due %s\n", hb.ID, abbrev(hb.Session, 8), schedule(*hb), due(hb.NextDue, time.Now()))
	return nil
}

const heartbeatsUsage = `usage: arbor heartbeats [ID] [--json]
Lists the heartbeats of session ID, or of every session: schedule, next due time, runs
(delivered of due) and the runs pending while the session is busy.`

// cmdHeartbeats lists heartbeats.
func cmdHeartbeats(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("heartbeats", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "as JSON")
	fs.Usage = func() { fmt.Fprintln(fs.Output(), heartbeatsUsage); fs.PrintDefaults() }
	pos, err := flags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return errors.New(heartbeatsUsage)
	}
	c, err := connect(ctx, true, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	p := server.HeartbeatListParams{}
	if len(pos) == 1 {
		p.Session = pos[0]
	}
	res, err := server.HeartbeatList.Call(ctx, c, p)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(res)
	}
	if len(res.Heartbeats) == 0 {
		fmt.Println("no heartbeats (add one with arbor heartbeat ID \"instruction\" --every 10m)")
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSESSION\tSCHEDULE\tNEXT DUE\tRUNS\tPENDING\tINSTRUCTION")
	now := time.Now()
	for _, hb := range res.Heartbeats {
		next := due(hb.NextDue, now)
		if !hb.Scheduled {
			next = "— (session stopped)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%d\t%s\n", hb.ID, abbrev(hb.Session, 8), schedule(hb), next,
			hb.Delivered, hb.Ticks, hb.Pending, firstLine(hb.Instruction))
	}
	return tw.Flush()
}

func schedule(hb server.Heartbeat) string {
	if hb.Cron != "" {
		return "cron " + hb.Cron
	}
	return "every " + hb.Every
}

// due is a due time as a clock time and how far off it is.
func due(t, now time.Time) string {
	d := t.Sub(now).Round(time.Second)
	if d <= 0 {
		return t.Local().Format("2006-01-02 15:04:05") + " (now)"
	}
	return fmt.Sprintf("%s (in %s)", t.Local().Format("2006-01-02 15:04:05"), d)
}
