package main

import (
	"context"
	"flag"
	"os"

	"github.com/arborhq/arbor/agents/demo"
)

func cmdDemo(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	keep := fs.Bool("keep", false, "keep the demo repository for a look around")
	if _, err := flags(fs, args); err != nil {
		return err
	}
	return demo.Run(ctx, os.Stdout, demo.Options{Keep: *keep, Python: os.Getenv("ARBOR_KERNEL_PYTHON")})
}
