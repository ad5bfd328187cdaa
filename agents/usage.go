package agents

import "github.com/arborhq/arbor/agents/event"

// Usage is the accounting of one session, or of a subtree when rolled up.
type Usage struct {
	ModelCalls  int64 `json:"modelCalls"`
	InputTokens int64 `json:"inputTokens"`
	// CachedInputTokens is the part of InputTokens the endpoints reported reading from their
	// prompt caches: the prefix of each request that repeated the one before.
	CachedInputTokens  int64   `json:"cachedInputTokens"`
	OutputTokens       int64   `json:"outputTokens"`
	CostUSD            float64 `json:"costUSD"`
	KernelExecs        int64   `json:"kernelExecs"`
	Messages           int64   `json:"messages"`
	HumanInterventions int64   `json:"humanInterventions"`
	Retries            int64   `json:"retries"`
	// HarnessEdits counts changes this session made to the harness that applied: its own
	// scope's edits and its accepted proposals.
	HarnessEdits int64 `json:"harnessEdits"`
	// Refine calls and their tokens, apart from the task's (ModelCalls, InputTokens, … do not
	// include them).
	RefineCalls        int64   `json:"refineCalls"`
	RefineInputTokens  int64   `json:"refineInputTokens"`
	RefineOutputTokens int64   `json:"refineOutputTokens"`
	RefineCostUSD      float64 `json:"refineCostUSD"`
}

// addRefine counts one refine run.
func (u *Usage) addRefine(d event.Refined) {
	u.RefineCalls += int64(d.Calls)
	u.RefineInputTokens += d.Usage.InputTokens
	u.RefineOutputTokens += d.Usage.OutputTokens
	u.RefineCostUSD += d.Usage.CostUSD
}

// addTokens counts one model call's tokens and cost.
func (u *Usage) addTokens(t event.TokenUsage) {
	u.InputTokens += t.InputTokens
	u.CachedInputTokens += t.CachedInputTokens
	u.OutputTokens += t.OutputTokens
	u.CostUSD += t.CostUSD
}

// Add returns u + v.
func (u Usage) Add(v Usage) Usage {
	u.ModelCalls += v.ModelCalls
	u.InputTokens += v.InputTokens
	u.CachedInputTokens += v.CachedInputTokens
	u.OutputTokens += v.OutputTokens
	u.CostUSD += v.CostUSD
	u.KernelExecs += v.KernelExecs
	u.Messages += v.Messages
	u.HumanInterventions += v.HumanInterventions
	u.Retries += v.Retries
	u.HarnessEdits += v.HarnessEdits
	u.RefineCalls += v.RefineCalls
	u.RefineInputTokens += v.RefineInputTokens
	u.RefineOutputTokens += v.RefineOutputTokens
	u.RefineCostUSD += v.RefineCostUSD
	return u
}
