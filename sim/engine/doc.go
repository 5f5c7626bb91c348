// Package engine simulates one vLLM replica at scheduler-step granularity: a KV block pool
// with vLLM's prefix cache (16-token blocks, chained hashes, only full blocks cached, ref
// counts, a free queue whose head is evicted first, freed blocks appended in reverse order,
// hits capped at num_tokens − 1), and the scheduler (V1: running requests first, then waiting
// ones, within max_num_batched_tokens and max_num_seqs; chunked prefill falls out of the token
// budget; preemption by recompute of the newest running request). Each step's duration comes
// from gpumodel.
//
// A Replica follows a named vLLM release (Release, Config.Release; the newest by default):
// the V1 releases, and V0 as vLLM 0.6 ran it (prompt-only steps, multi-step decode bursts),
// each rule a switch of Semantics that docs/simulator.md lists with the vLLM code it follows.
// It runs on a sim.Kernel and reports first tokens, completions and, when asked, KV events
// (blocks stored and removed, as vLLM publishes them) through hooks; Abort ends a request as
// a client disconnect does. In a disaggregated fleet a request is a prefill leg (one token,
// its blocks held for the decoder until ReleaseHeld or the abort timeout) or a decode leg
// (blocks taken, the prompt's KV read through Hooks.RemoteRead and RemoteKVDone, the last
// prompt token recomputed), as vLLM's NixlConnector runs them (pd.go).
//
// Guarantees: the same configuration and the same calls give the same steps, times and hooks;
// KV use never exceeds the pool; every submitted request ends in exactly one completion,
// rejection or abort. Not modelled: the API server, tokenization and detokenization cost,
// speculative decoding, and the KV transfer itself (the caller prices it).
package engine
