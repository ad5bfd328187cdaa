package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/arborhq/arbor/agents/model/scripted"
)

func cmdFakeModel(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("fake-model", flag.ContinueOnError)
	script := fs.String("script", "", "JSON script (see DESIGN.md)")
	addr := fs.String("addr", "127.0.0.1:0", "address to listen on")
	if _, err := flags(fs, args); err != nil {
		return err
	}
	if *script == "" {
		return fmt.Errorf("usage: arbor fake-model --script FILE [--addr 127.0.0.1:0]")
	}
	s, err := scripted.Load(*script)
	if err != nil {
		return err
	}
	url, wait, err := scripted.Serve(ctx, *addr, s, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		return err
	}
	fmt.Println(url)
	return wait()
}
