package router

import "time"

// kvWait predicts how long a request waits for KV space on endpoint e before it can run:
// zero while the KV the endpoint will need fits its capacity, else the overflow divided by
// the rate at which finishing requests free KV. The need is the KV in use as last scraped, the
// output still to come for the decoding requests (half of out each, out standing in for their
// output lengths), the queued requests' uncached prompt tokens (pending, not yet allocated),
// and this request's uncached prompt and output. The KV in use plus the decoding requests'
// growth turns over once per output lifetime, out decode steps (each priced by the endpoint's
// step-time model at its batch). vLLM admits a waiting request only when its blocks fit
// (whole-prompt admission since vLLM #37307) and preempts running ones when they cannot grow,
// so an endpoint with a warm cache but a full KV cache makes a request wait for other
// requests to finish, which prefill time alone does not show. Zero when the capacity, the
// step-time model or out is unknown.
func kvWait(e *EndpointState, pending, newTokens, out, decoding int, ctx int64) time.Duration {
	capacity := float64(e.NumGPUBlocks * e.BlockSize)
	if capacity <= 0 || e.Prefill == nil || out <= 0 {
		return 0
	}
	held := e.KVUsage*capacity + float64(decoding*out)/2
	over := held + float64(pending+newTokens+out) - capacity
	if over <= 0 || held <= 0 {
		return 0
	}
	lifetime := time.Duration(out) * e.Prefill.BatchTime(1, decoding, ctx)
	return time.Duration(over / held * float64(lifetime))
}
