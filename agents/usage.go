package agents

import "github.com/arborhq/arbor/agents/event"

// Usage is the accounting of one session, or of a subtree when rolled up.
type Usage struct {
	ModelCalls         int64   `json:"modelCalls"`
	InputTokens        int64   `json:"inputTokens"`
	OutputTokens       int64   `json:"outputTokens"`
	CostUSD            float64 `json:"costUSD"`
	KernelExecs        int64   `json:"kernelExecs"`
	Messages           int64   `json:"messages"`
	HumanInterventions int64   `json:"humanInterventions"`
	Retries            int64   `json:"retries"`
}

// addTokens counts one model call's tokens and cost.
func (u *Usage) addTokens(t event.TokenUsage) {
	u.InputTokens += t.InputTokens
	u.OutputTokens += t.OutputTokens
	u.CostUSD += t.CostUSD
}

// Add returns u + v.
func (u Usage) Add(v Usage) Usage {
	u.ModelCalls += v.ModelCalls
	u.InputTokens += v.InputTokens
	u.OutputTokens += v.OutputTokens
	u.CostUSD += v.CostUSD
	u.KernelExecs += v.KernelExecs
	u.Messages += v.Messages
	u.HumanInterventions += v.HumanInterventions
	u.Retries += v.Retries
	return u
}
