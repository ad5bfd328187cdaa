package longrunbench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/arborhq/arbor/agents"
	"github.com/arborhq/arbor/bench"
)

// requestClock records when model requests were served.
type requestClock struct {
	mu sync.Mutex
	at []time.Time
}

func (c *requestClock) tick() {
	c.mu.Lock()
	c.at = append(c.at, time.Now())
	c.mu.Unlock()
}

// between counts the requests served in [from, to).
func (c *requestClock) between(from, to time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.at {
		if !t.Before(from) && t.Before(to) {
			n++
		}
	}
	return n
}

// parkedGoal counts the model calls of a goal parked on its working child: the lead sets a
// goal, starts a worker whose cell takes 10 s, and ends its turn; until the worker's answer
// arrives the goal may call its model not once. The reference is the same goal's requests
// outside the park (the turn that parked it and the one the answer started).
func (e *env) parkedGoal(ctx context.Context, rep *bench.Report) error {
	lead, err := e.svc.Create(ctx, agents.CreateRequest{Task: "lead the work", Dir: e.repo})
	if err != nil {
		return err
	}
	wait := func(what string, cond func(agents.Goal) bool) (time.Time, error) {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			if g, ok, _ := e.svc.GoalOf(lead.ID()); ok && cond(g) {
				return time.Now(), nil
			}
			if time.Now().After(deadline) {
				return time.Time{}, fmt.Errorf("timed out waiting for %s", what)
			}
			select {
			case <-ctx.Done():
				return time.Time{}, ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	parked, err := wait("the goal to park", func(g agents.Goal) bool { return g.Waiting == "children" })
	if err != nil {
		return err
	}
	if _, err := wait("the goal to complete and its turn to end", func(g agents.Goal) bool {
		st := lead.State()
		return g.Status == agents.GoalComplete && st != agents.Running && st != agents.Admitted
	}); err != nil {
		return err
	}
	e.lead.mu.Lock()
	var resumed time.Time
	for _, t := range e.lead.at {
		if t.After(parked) {
			resumed = t
			break
		}
	}
	total := len(e.lead.at)
	e.lead.mu.Unlock()
	if resumed.IsZero() {
		return fmt.Errorf("the goal completed without a model request after it parked")
	}
	// The park ends with the worker's answer, just before the request it caused.
	during := e.lead.between(parked, resumed)
	rep.Add(bench.Figure{Name: "goal parked on a working child: its model calls", Value: float64(during), Unit: "requests",
		Reference: "the same goal's requests outside the park", RefValue: float64(total - during), Goal: "0",
		Note: fmt.Sprintf("parked %.1f s while the child's cell ran; counted at the model stub", resumed.Sub(parked).Seconds())})
	return nil
}
