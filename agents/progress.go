package agents

import (
	"fmt"
	"time"

	"github.com/arborhq/arbor/agents/event"
)

// ProgressPoint is one point of a session's cost–progress series: a verifier outcome (an end
// condition, a harness gate), a checkpoint or a goal change, with what the session's subtree
// had spent when it was recorded.
type ProgressPoint struct {
	Seq    uint64
	Time   time.Time
	Kind   string // checkpoint, goal_set, goal_changed, verified or gate
	Status string // a goal's status; passed, failed or skipped for a verifier
	Detail string
	Spend  event.Spend
}

// Progress returns the session's series in log order. Records written before spending was
// recorded on them carry none and are left out.
func (s *Service) Progress(id string) ([]ProgressPoint, error) {
	sess, err := s.Get(id)
	if err != nil {
		return nil, err
	}
	recs, err := sess.Events(0)
	if err != nil {
		return nil, err
	}
	out := []ProgressPoint{}
	for _, r := range recs {
		p, err := event.Decode(event.Type(r.Type), r.Data)
		if err != nil {
			continue
		}
		pt := ProgressPoint{Seq: r.Seq, Time: r.TS}
		switch d := p.(type) {
		case event.Checkpoint:
			if d.Spend == nil {
				continue
			}
			pt.Kind, pt.Detail, pt.Spend = "checkpoint", short(d.Commit), *d.Spend
			if d.Merged != "" {
				pt.Detail += " (merged " + shortID(d.Merged) + ")"
			}
		case event.GoalSet:
			pt.Kind, pt.Status, pt.Detail, pt.Spend = "goal_set", GoalActive, d.Objective, d.Spend
		case event.GoalChanged:
			pt.Kind, pt.Status, pt.Detail, pt.Spend = "goal_changed", d.Status, d.Reason, d.Spend
		case event.Verified:
			pt.Kind, pt.Status, pt.Detail, pt.Spend = "verified", verdictWord(d.Passed, d.Skipped), d.Command, d.Spend
			if !d.Passed && !d.Skipped {
				pt.Detail += fmt.Sprintf(" (exit %d)", d.ExitCode)
			}
		case event.HarnessApplied:
			if d.Gate == nil || d.Gate.Spend == nil {
				continue
			}
			pt.Kind, pt.Status, pt.Detail, pt.Spend = "gate", verdictWord(d.Gate.Passed, false), "proposal "+d.Proposal+": "+d.Gate.Command, *d.Gate.Spend
		case event.HarnessRejected:
			if d.Gate == nil || d.Gate.Spend == nil {
				continue
			}
			pt.Kind, pt.Status, pt.Detail, pt.Spend = "gate", verdictWord(d.Gate.Passed && d.Gate.Error == "", false), "proposal "+d.Proposal+": "+d.Gate.Command, *d.Gate.Spend
		default:
			continue
		}
		out = append(out, pt)
	}
	return out, nil
}

func verdictWord(passed, skipped bool) string {
	switch {
	case skipped:
		return "skipped"
	case passed:
		return "passed"
	}
	return "failed"
}
