// Package engine simulates one vLLM V1 replica at scheduler-step granularity: a KV block pool
// with vLLM's prefix cache (16-token blocks, chained hashes, only full blocks cached, ref
// counts, a free queue whose head is evicted first, freed blocks appended in reverse order,
// hits capped at num_tokens − 1), and the V1 scheduler (running requests first, then waiting
// ones, within max_num_batched_tokens and max_num_seqs; chunked prefill falls out of the token
// budget; preemption by recompute of the newest running request). Each step's duration comes
// from gpumodel. The replica runs on a sim.Kernel and reports first tokens and completions
// through hooks. It follows a named vLLM release (Release, Config.Release; the newest by
// default), whose rules docs/simulator.md lists with the vLLM code each one follows.
package engine
