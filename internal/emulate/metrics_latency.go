package emulate

import (
	"kvroute/sim"
	"kvroute/sim/engine"
)

// The names, bucket bounds and semantics below follow vLLM V1's PrometheusStatLogger in
// vllm-project/vllm vllm/v1/metrics/loggers.py at commit 005a810b: iteration tokens
// :328-337, time per output token :380-389 (that commit exports this name; later releases
// add vllm:inter_token_latency_seconds with the same buckets, which cmd/loadgen and
// calibration also read), the request-latency buckets :404-407 shared by e2e :408-414, queue
// :416-423, inference :425-432, prefill :434-441 and decode :443-450; their observations in
// record() :503, iteration tokens :542-544, time per output token :553-554, per finished
// request :556-573. Times are seconds on the engine's clock scaled to wall time, as
// time_to_first_token_seconds is.

// iterationTokenBuckets are vllm:iteration_tokens_total's bounds, in tokens.
var iterationTokenBuckets = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}

// tpotBuckets are vllm:time_per_output_token_seconds's bounds, in seconds.
var tpotBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
	1, 2.5, 5, 7.5, 10, 20, 40, 80}

// phaseHists are the engine-side histograms a calibration reads besides TTFT and E2E.
type phaseHists struct {
	// iter is tokens per engine step: the step's new prompt tokens (counted when a request is
	// first scheduled, as vllm:prompt_tokens_total is) plus its generated tokens.
	iter histogram
	// tpot is, per request and step after its first token, the time since its previous
	// token (vLLM observes one gap per request per engine output).
	tpot histogram
	// queue, prefill, decode and inference are per completed request: first scheduled −
	// arrival, first token − first scheduled, last token − first token, and last token −
	// first scheduled (vLLM's queued_time, prefill_time, decode_time, inference_time).
	queue, prefill, decode, inference histogram
}

func newPhaseHists() phaseHists {
	return phaseHists{iter: newHistogram(iterationTokenBuckets), tpot: newHistogram(tpotBuckets),
		queue: newHistogram(e2eBuckets), prefill: newHistogram(e2eBuckets),
		decode: newHistogram(e2eBuckets), inference: newHistogram(e2eBuckets)}
}

func (p phaseHists) clone() phaseHists {
	return phaseHists{iter: p.iter.clone(), tpot: p.tpot.clone(), queue: p.queue.clone(),
		prefill: p.prefill.clone(), decode: p.decode.clone(), inference: p.inference.clone()}
}

// observeRequest records a completed request's phases; seconds maps virtual durations to
// wall seconds.
func (p *phaseHists) observeRequest(res engine.Result, seconds func(sim.Time) float64) {
	p.queue.observe(seconds(res.Scheduled - res.Arrival))
	p.prefill.observe(seconds(res.FirstToken - res.Scheduled))
	p.decode.observe(seconds(res.Finish - res.FirstToken))
	p.inference.observe(seconds(res.Finish - res.Scheduled))
}

// write writes the histograms in the order vLLM defines them around TTFT and E2E.
func (e exposition) writePhases(p phaseHists) {
	e.histogram("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", p.tpot)
}

// writeRequestPhases writes the per-request phase histograms, after E2E.
func (e exposition) writeRequestPhases(p phaseHists) {
	e.histogram("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", p.queue)
	e.histogram("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", p.inference)
	e.histogram("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", p.prefill)
	e.histogram("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", p.decode)
}
