// Package emulate serves simulated vLLM replicas over real HTTP, so the router and the load
// generator run end to end on a machine with no GPU.
//
// A Replica runs one sim/engine replica (vLLM V1's scheduler, KV block pool and prefix cache,
// with gpumodel's step times) on its own goroutine, in wall-clock time: virtual time is
// (wall − start) × Config.Speed, so Speed 1 is real time and Speed 10 makes every step take a
// tenth of its simulated duration. The goroutine runs the kernel's events whose time has come
// and sleeps until the step in flight ends or a request arrives; handlers talk to it over
// channels, and tokens flow back to them one per engine step, so time to first token,
// queueing, prefix-cache hits and preemption under KV pressure are what the simulator says.
// Token counts, first-token and finish times equal the engine's exactly; the times of the
// tokens in between are exact unless a step skips a running request (preemption, or a token
// budget spent on a long prefill), when they are attributed in the engine's running order.
//
// Over HTTP a Replica speaks the part of vLLM's API that routers and load generators use:
// POST /v1/chat/completions and /v1/completions (streamed as server-sent events, or whole),
// GET /v1/models, GET /health and GET /metrics, a Prometheus page with vLLM's metric names,
// labels (model_name, engine="0") and histogram buckets; its latencies are wall seconds
// (virtual time ÷ Speed), what clients measure. Text in the workloads' synthetic vocabulary
// (workloads.Words, what cmd/loadgen sends for generated workloads) becomes the very token ids
// the workload drew, so a live prompt has the simulator's token count; other text becomes
// token ids by hashing its 4-byte chunks, so equal text prefixes share cache blocks. A chat
// prompt is each message's content tokenized on its own and concatenated, with no template
// tokens and no roles, as the simulator's workloads count it. Every request generates exactly max_tokens
// tokens (16 when absent) of deterministic words seeded by its prompt: one word a token for
// completions; for chat, max_tokens synthetic-vocabulary words, handed to the engine as the
// answer's token ids, so a conversation's next turn, which re-sends the answer
// as an assistant message, hits its blocks in the prefix cache as it would on vLLM. A client
// that disconnects aborts its request (engine.Replica.Abort), freeing its batch slot and blocks
// at the end of the step in flight, as vLLM does.
//
// Every successful completion carries X-Kvroute-Engine-Ttft (HeaderEngineTTFT): its time to
// first token on the engine's virtual clock, in seconds, which is what the simulator reports
// and which neither HTTP nor a busy host lengthens; cmd/loadgen records it.
//
// Fail, Recover, SetSlowdown and SetErrorRate inject failures, also over HTTP under /admin/.
package emulate
