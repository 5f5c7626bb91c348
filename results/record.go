package results

import "time"

// Status is a request's terminal state: every request ends in exactly one.
type Status string

// The terminal states.
const (
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"   // the backend failed the request (after any retries)
	StatusRejected  Status = "rejected" // refused: no endpoint, or too large for the replica
	StatusTimedOut  Status = "timeout"
)

// Record is one request's outcome. Times are offsets from the start of the run.
type Record struct {
	// ID, Tenant, Session and Turn identify the request in its workload.
	ID, Tenant, Session string
	Turn                int
	// PrefixGroup is the workload's shared-prefix group, if any.
	PrefixGroup string
	// Endpoint is where the request was served (the last one tried); Reason is the routing
	// decision's branch.
	Endpoint, Reason string
	// Status is the terminal state; Error explains a non-completed one.
	Status Status
	Error  string
	// Arrival is when the request was issued; FirstToken when its first token arrived (0 if
	// none); Finish when it ended.
	Arrival, FirstToken, Finish time.Duration
	// PromptTokens, CachedTokens and OutputTokens are the usage; CachedTokens is the prompt
	// part served from the prefix cache.
	PromptTokens, CachedTokens, OutputTokens int
	// CPUCachedTokens is the part of CachedTokens loaded from a CPU KV tier (the simulator's
	// engine reports it; 0 without a tier). requests.csv does not carry it.
	CPUCachedTokens int
	// Preemptions counts the replica's preemptions of the request; Retries the router's
	// re-sends to another endpoint.
	Preemptions, Retries int
	// PrefillEndpoint is, in a fleet split into prefill and decode pools, the endpoint that
	// ran the request's prefill leg (empty when its decode endpoint prefilled it), and
	// KVTransfer how long its KV took to reach the decode endpoint (0 without a transfer).
	PrefillEndpoint string
	KVTransfer      time.Duration
}

// TTFT returns the time to first token, or false when there was no token.
func (r *Record) TTFT() (time.Duration, bool) {
	if r.FirstToken <= 0 && r.OutputTokens == 0 {
		return 0, false
	}
	return r.FirstToken - r.Arrival, true
}

// TPOT returns the mean time per output token after the first, as vllm bench serve defines it,
// or false with fewer than two tokens.
func (r *Record) TPOT() (time.Duration, bool) {
	if r.OutputTokens < 2 || r.Status != StatusCompleted {
		return 0, false
	}
	return (r.Finish - r.FirstToken) / time.Duration(r.OutputTokens-1), true
}
