package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/arborhq/arbor/server"
)

func cmdLog(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("log", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "one {seq,ts,type,data} object per line")
	follow := fs.Bool("follow", false, "keep printing new events until the session settles")
	pos, err := flags(fs, args)
	if err != nil {
		return err
	}
	if err := needArgs(pos, 1, "log ID [--json] [--follow]"); err != nil {
		return err
	}
	f := newFollower(os.Stdout, *asJSON)
	c, err := connect(ctx, true, f.notify)
	if err != nil {
		return err
	}
	defer c.Close()
	if *follow {
		return f.follow(ctx, c, pos[0])
	}
	lr, err := server.SessionLog.Call(ctx, c, server.LogParams{ID: pos[0]})
	if err != nil {
		return err
	}
	for _, e := range lr.Events {
		printEvent(os.Stdout, e, *asJSON)
	}
	return nil
}

func cmdSend(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	mode := fs.String("mode", "auto", "auto, steer or follow_up")
	pos, err := flags(fs, args)
	if err != nil {
		return err
	}
	if err := needArgs(pos, 2, `send ID "text" [--mode auto|steer|follow_up]`); err != nil {
		return err
	}
	c, err := connect(ctx, true, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := server.SessionSend.Call(ctx, c, server.SendParams{ID: pos[0], Text: pos[1], Mode: *mode})
	if err != nil {
		return err
	}
	fmt.Println(res.Status)
	return nil
}

func cmdStop(ctx context.Context, args []string) error {
	pos, err := flags(flag.NewFlagSet("stop", flag.ContinueOnError), args)
	if err != nil {
		return err
	}
	if err := needArgs(pos, 1, "stop ID"); err != nil {
		return err
	}
	c, err := connect(ctx, true, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	s, err := server.SessionStop.Call(ctx, c, server.SessionRef{ID: pos[0]})
	if err != nil {
		return err
	}
	fmt.Println("stopped", s.ID)
	return nil
}
