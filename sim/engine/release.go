package engine

import (
	"fmt"
	"strings"
	"time"
)

// Semantics switches each rule in which vLLM V1 releases differ. The zero value is the engine
// as it was first written (LegacyRelease); docs/simulator.md cites the vLLM code behind
// each rule.
type Semantics struct {
	// ReserveFullPrompt admits a waiting request only when KV blocks for all its tokens fit,
	// not only its first chunk: SchedulerConfig.scheduler_reserve_full_isl, default True
	// since vLLM PR #37307 (allocate_slots(..., full_sequence_must_fit=True) in
	// vllm/v1/core/sched/scheduler.py, Scheduler.schedule).
	ReserveFullPrompt bool
	// AsyncScheduling runs vLLM's batch queue of two (EngineCore.step_with_batch_queue in
	// vllm/v1/engine/core.py, default on in 2026 releases): the batch that runs after the
	// one in flight is scheduled when that one starts, so a request arriving mid-step waits
	// about one more step, and the step's CPU work (scheduling, output processing) overlaps
	// the GPU's instead of adding to it.
	AsyncScheduling bool
	// HashOutput hashes and caches full blocks of generated tokens even when the request
	// carries no Answer (BlockPool.cache_full_blocks in vllm/v1/core/block_pool.py caches
	// every full block of the request, generated tokens included; newer releases hash them
	// as the Request appends them), so a preempted request hits its own output on recompute.
	HashOutput bool
	// DuplicateHits keeps every block holding a hash cached and hittable
	// (BlockHashToBlockMap in vllm/v1/core/block_pool.py), not only the first one.
	DuplicateHits bool
	// UnhashedToHead puts freed blocks that carry no hash at the head of the free queue, to
	// be reused first; hashed ones still go to the tail (BlockPool.free_blocks).
	UnhashedToHead bool
	// SkipPreemptedStats leaves the lookups of preempted requests out of
	// vllm:prefix_cache_queries/hits (PrefixCacheStats.record(..., preempted=True) counts
	// them apart since vLLM PR #25787).
	SkipPreemptedStats bool
	// NullBlock reserves block 0 as vLLM's null block (BlockPool.null_block): one block of
	// capacity less than num_gpu_blocks.
	NullBlock bool
	// V0Scheduler schedules as vLLM's V0 engine does with chunked prefill off
	// (Scheduler._schedule_default in vllm/core/scheduler.py; schedule_v0.go): a step runs
	// either whole prompts or decodes, never both, and a decode batch runs
	// Config.SchedulerSteps steps per schedule (--num-scheduler-steps).
	V0Scheduler bool
	// HostStep is host time every step adds to its GPU time, unhidden: V0 prepares its inputs,
	// samples and processes its outputs in the engine's process between steps, which V1 moves
	// off the critical path (AsyncScheduling prices V1's overlap from the Deployment's
	// overheads). Fitted, not measured, to the fourteen vLLM 0.6.0 workload points of
	// gpumodel/testdata/calibration.json once all-reduces are priced as vLLM's custom
	// all-reduce (gpumodel.GPU.CustomAllReduceLatency): with 2 ms the 19 checked points miss by
	// 9.0% on average and at most 20.6%; with none, 13.2% (TP 4 latencies 19–31% low); with
	// 3 ms, 9.9% (TP 1 latencies up to 17% high).
	HostStep time.Duration
}

// Release is a named vLLM release range and the semantics the engine follows for it.
type Release struct {
	Name string
	Semantics
}

// The releases the engine models. Newest is the default.
var (
	// NewestRelease is vLLM 0.33 (2026-11, the newest on PyPI when written): every rule on.
	NewestRelease = Release{Name: "v0.33", Semantics: Semantics{
		ReserveFullPrompt: true, AsyncScheduling: true, HashOutput: true, DuplicateHits: true,
		UnhashedToHead: true, SkipPreemptedStats: true, NullBlock: true,
	}}
	// LegacyRelease is the behaviour the engine modelled before it named a release: V1 as of
	// vLLM 0.8–0.10 (2025), synchronous scheduling and first-chunk admission, without the
	// null block and without hashing generated tokens that have no Answer.
	LegacyRelease = Release{Name: "v0.8-v0.10"}
	// V0Release is vLLM's V0 engine as 0.5–0.6 (2024) ran it with chunked prefill off, the
	// engine of the published vLLM 0.6.0 benchmarks: V0's scheduler, and the prefix cache as
	// LegacyRelease keeps it (as with --enable-prefix-caching; V0's own evictor, LRU by last
	// access, breaks ties differently).
	V0Release = Release{Name: "v0.6", Semantics: Semantics{V0Scheduler: true, HostStep: 2 * time.Millisecond}}
)

// CheckSchedulerSteps reports whether a replica of release rel can run n scheduler steps per
// schedule (vLLM V0's --num-scheduler-steps): 0 or 1 on any release, more only on V0.
func (rel Release) CheckSchedulerSteps(n int) error {
	if n < 0 || n > 1 && !rel.V0Scheduler {
		return fmt.Errorf("num_scheduler_steps %d: want 0 or 1, or more with vLLM V0 (%s)", n, V0Release.Name)
	}
	return nil
}

// Releases lists the modelled releases, newest first.
func Releases() []Release { return []Release{NewestRelease, LegacyRelease, V0Release} }

// ParseRelease returns the release named name: "v0.33" (also "0.33", "latest" or empty, the
// default), "v0.8-v0.10" (also "0.8-0.10", "legacy") or "v0.6" (also "0.6", "v0").
func ParseRelease(name string) (Release, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	switch n {
	case "", "latest", "newest":
		return NewestRelease, nil
	case "legacy":
		return LegacyRelease, nil
	case "v0":
		return V0Release, nil
	}
	for _, r := range Releases() {
		if n == r.Name || "v"+n == r.Name {
			return r, nil
		}
	}
	names := make([]string, 0, 3)
	for _, r := range Releases() {
		names = append(names, r.Name)
	}
	return Release{}, fmt.Errorf("unknown vLLM release %q: want one of %s (or latest)", name, strings.Join(names, ", "))
}
