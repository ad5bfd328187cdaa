package agentbench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/arborhq/arbor/agents"
	"github.com/arborhq/arbor/bench"
)

// forkFigures are one run's fork times, in ms: until the forks returned (registered) and until
// their files were written, o.Forks at once and summed over o.Forks one after another. The
// one-by-one registrations are summed twice: each fork made as the last one returned, so the
// earlier forks' files are being written meanwhile as they are for forks made at once
// (regOneByOne), and each made once the last one's files were in, on a quiet machine
// (regQuiet).
type forkFigures struct{ regTogether, regOneByOne, regQuiet, fullTogether, fullOneByOne float64 }

// forkRegistration forks one session o.Forks times one after another, each waited for until
// its files are in; o.Forks times one after another, each as the last returned; then o.Forks
// times at once.
func forkRegistration(ctx context.Context, dir, fixture string, o Options) (ff forkFigures, err error) {
	e, err := newEnvIn(ctx, dir, fixture, 0, o)
	if err != nil {
		return ff, err
	}
	defer e.stop()
	src, err := e.svc.Create(ctx, agents.CreateRequest{Task: "leaf to fork", Dir: e.repo})
	if err != nil {
		return ff, err
	}
	if err := e.waitQuiet(ctx, 5*time.Minute); err != nil {
		return ff, err
	}
	// oneByOne forks src o.Forks times, each as the last returned or (waitEach) once its
	// files were in, and sums their registrations and their times until the files were in.
	oneByOne := func(prefix string, waitEach bool) (reg, full time.Duration, made []*agents.Session, err error) {
		for i := range o.Forks {
			start := time.Now()
			f, err := e.svc.Fork(ctx, src.ID(), 0, fmt.Sprint(prefix, i))
			if err != nil {
				return 0, 0, nil, err
			}
			reg += time.Since(start)
			if waitEach {
				if err := f.AwaitWorktree(ctx); err != nil {
					return 0, 0, nil, err
				}
				full += time.Since(start)
			}
			made = append(made, f)
		}
		return reg, full, made, nil
	}
	awaitAll := func(made []*agents.Session) error {
		for _, f := range made {
			if err := f.AwaitWorktree(ctx); err != nil {
				return err
			}
		}
		return nil
	}
	reg, full, _, err := oneByOne("serial-", true)
	if err != nil {
		return ff, err
	}
	quick, _, serial, err := oneByOne("next-", false)
	if err != nil {
		return ff, err
	}
	if err := awaitAll(serial); err != nil { // the forks at once start on a machine as quiet as the first of these
		return ff, err
	}
	var wg sync.WaitGroup
	errs := make(chan error, o.Forks)
	made := make([]*agents.Session, o.Forks)
	start := time.Now()
	for i := range o.Forks {
		wg.Go(func() {
			f, err := e.svc.Fork(ctx, src.ID(), 0, fmt.Sprint("together-", i))
			if err != nil {
				errs <- err
			}
			made[i] = f
		})
	}
	wg.Wait()
	regAll := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return ff, err
	}
	if err := awaitAll(made); err != nil {
		return ff, err
	}
	fullAll := time.Since(start)
	return forkFigures{bench.Ms(regAll), bench.Ms(quick), bench.Ms(reg), bench.Ms(fullAll), bench.Ms(full)}, nil
}
