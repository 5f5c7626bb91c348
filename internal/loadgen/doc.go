// Package loadgen replays a workloads.Stream against an OpenAI-compatible server (a kvroute
// router, vLLM, or an emulated replica) and measures each request the way `vllm bench serve`
// does, producing the same results.Record values the simulator produces, so live and
// simulated runs are compared in one schema.
//
// # Arrivals
//
// Run is open-loop: one dispatcher goroutine maps each request's workload Arrival to wall
// time (the start of the run plus Arrival) and fires the request in a goroutine of its own,
// so a slow server never slows the offered load. Multi-turn sessions are closed-loop: when a
// turn ends, Run reports it to Stream.Done with the answer actually received, and the
// dispatcher peeks again, because the follow-up turn may be due before the request it was
// waiting for. Options.MaxConcurrency caps the requests in flight without delaying the
// dispatcher; a request waiting for a slot is measured from when it is sent.
//
// # Requests and measurement
//
// A request with Messages is sent as a streamed chat completion, one without as a streamed
// completion, with max_tokens = OutputTokens, ignore_eos, stream_options.include_usage, the
// tenant as "user" and the session in the X-Session-Id header. Every content chunk counts as
// a token arrival: TTFT is the first one's offset from the send, ITL the gaps between them,
// E2E the time to "data: [DONE]". Prompt, cached (usage.prompt_tokens_details.cached_tokens)
// and completion tokens come from the final usage chunk when the server sends one. The
// router's X-Kvroute-Endpoint (the backend's name) and X-Kvroute-Reason response headers, when
// present (cmd/route sends them with -debug-headers), fill Record.Endpoint and Record.Reason;
// the emulator's X-Kvroute-Engine-Ttft (the TTFT on its engine's clock) fills
// Result.EngineTTFT, which no HTTP hop and no busy host lengthen.
//
// # Failures
//
// Every request sent ends in exactly one Result with a terminal status: completed; rejected
// (HTTP 4xx or 503); failed, with the cause (HTTP status and OpenAI error message, transport
// error, a chunk that is not JSON, an error event, a stream that ends without [DONE]); or
// timed out (Options.RequestTimeout). A failed turn ends its session.
//
// # Server counters
//
// Scrape reads the vLLM prefix-cache counters from Prometheus pages before and after a run;
// ServerHitRate turns the two readings into the servers' token-weighted hit rate over the
// run. Pages without vLLM series (a router's own /metrics) are skipped. The same readings
// hold vLLM's latency and step histograms (HistogramNames); HistogramDeltas turns them into
// each server's increase over the run and WriteMetricsFile writes those as vllm-metrics.json,
// which calibration reads.
//
// # Results
//
// Bench accumulates Results into the JSON document `vllm bench serve --save-result` writes
// (ttfts, itls, latencies, input_lens, output_lens and the mean/median/std/pXX keys).
//
// The package reads the wall clock (it measures real servers) but has no global state and
// starts no goroutine that outlives Run.
package loadgen
