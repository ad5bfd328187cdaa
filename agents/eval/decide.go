package eval

import "fmt"

// The eval gate's decision: whether a harness edit applies, is refused, or waits for a person,
// from the comparison of the slice run without (A) and with (B) it. The decision rests on the
// comparison's noise, never on a raw delta: with a few repeats of a few tasks a difference of
// one run is chance, and the gate says so rather than guess.

// GateOutcome is what an eval gate decided.
type GateOutcome string

const (
	GateApply  GateOutcome = "apply"  // a drop in success is ruled out and tokens stay within the bound
	GateRefuse GateOutcome = "refuse" // a drop in success, or a rise in tokens past the bound, was measured
	GateReview GateOutcome = "review" // the noise cannot tell: a person decides, with the measurement
)

// GateBounds are what an edit may cost and still apply by itself.
type GateBounds struct {
	// MaxSuccessDrop is the drop in mean success (a fraction: 0.1 = 10 points) an applying edit
	// must rule out at 95%: the lower end of the interval of the change may not go below -it.
	MaxSuccessDrop float64
	// MaxTokenIncrease is the rise in tokens per task allowed (0.1 = 10%): an edit applies when
	// the upper end of the interval stays within it, and is refused when the lower end is past it.
	MaxTokenIncrease float64
}

// DefaultGateBounds are the bounds of an eval gate that sets none.
var DefaultGateBounds = GateBounds{MaxSuccessDrop: 0.1, MaxTokenIncrease: 0.1}

// Decide is the eval gate's decision on the comparison c of the slice without and with an edit,
// and why, in a clause ("a drop in success is ruled out …").
func Decide(c *Comparison, b GateBounds) (GateOutcome, string) {
	if len(c.Tasks) == 0 {
		return GateReview, "no task of the slice finished on both sides, so nothing was measured"
	}
	if c.SuccessNoise == nil {
		return GateReview, "with one run per task the noise is unknown (set the gate's repeat to 2 or more)"
	}
	sn := *c.SuccessNoise
	lo, hi := c.SuccessAdjusted-sn, c.SuccessAdjusted+sn
	tlo, thi := c.Tokens, c.Tokens
	if c.TokensNoise != nil {
		tlo, thi = c.Tokens-*c.TokensNoise, c.Tokens+*c.TokensNoise
	}
	interval := fmt.Sprintf("95%% interval of the change in success %+.1f to %+.1f points", 100*lo, 100*hi)
	const eps = 1e-9
	switch {
	case hi < -eps:
		return GateRefuse, "success drops: the " + interval + " lies below zero"
	case tlo > b.MaxTokenIncrease+eps:
		return GateRefuse, fmt.Sprintf("tokens per task rise by more than %.0f%% (at least %+.1f%% at 95%%)", 100*b.MaxTokenIncrease, 100*tlo)
	case lo >= -b.MaxSuccessDrop-eps && thi <= b.MaxTokenIncrease+eps:
		return GateApply, fmt.Sprintf("a drop of more than %.0f points is ruled out (%s) and tokens stay within %.0f%%", 100*b.MaxSuccessDrop, interval, 100*b.MaxTokenIncrease)
	case lo < -b.MaxSuccessDrop-eps:
		return GateReview, fmt.Sprintf("the noise cannot rule out a drop of more than %.0f points (%s): more tasks or repeats would tell", 100*b.MaxSuccessDrop, interval)
	}
	return GateReview, fmt.Sprintf("tokens per task may rise by more than %.0f%% (up to %+.1f%% at 95%%): more repeats would tell", 100*b.MaxTokenIncrease, 100*thi)
}
