package router

// policyInfos is what Builtin records about each policy: the upstream code it reproduces
// (project, release or commit, file) and its rule in one line. docs/policies.md explains each
// in full, with the upstream lines the decision cases of testdata/upstream cite.
var policyInfos = map[string]PolicyInfo{
	"random":         {Source: "kvroute", Rule: "uniformly random ready endpoint"},
	"round-robin":    {Source: "kvroute", Rule: "ready endpoints in snapshot order, cyclically"},
	"least-request":  {Source: "kvroute", Rule: "fewest running+waiting (+ router in-flight) requests"},
	"power-of-two":   {Source: "kvroute", Rule: "less loaded of two random ready endpoints"},
	"least-kv-cache": {Source: "kvroute", Rule: "lowest KV-cache usage"},
	"session-affinity": {Source: "kvroute after AIBrix x-aibrix-session-key",
		Rule: "rendezvous hash of the session key; no key: least-request"},
	"prefix-cache": {
		Source: "AIBrix v0.7.0 (vllm-project/aibrix c5465890) pkg/plugins/gateway/algorithms/prefix_cache.go",
		Rule:   "imbalanced → least running only; deepest block match (per model) with running ≤ mean + 2·sample σ; else least running",
	},
	"vtc-basic": {
		Source:   "AIBrix v0.7.0 (vllm-project/aibrix c5465890) pkg/plugins/gateway/algorithms/vtc/vtc_basic.go",
		Rule:     "first min of |i − tenant tokens/bucket| + min(running/100, 1) + U[0, 0.1); tenants charged estimates at routing",
		Variants: []string{VTCAIBrix, VTCRealUsage + " (prompt at routing, real completion at finish; kvroute)"},
	},
	"prefix-tree": {
		Source:   "Ray Serve PrefixCacheAffinityRouter (ray-project/ray master 2026: LoRA key prefix and spill; 06c16f2f after PR #59390; ef82d1d9 before it) python/ray/llm/_internal/serve/routing_policies/prefix_aware/prefix_aware_router.py, python/ray/serve/_private/request_router/request_router.py",
		Rule:     "replicas holding the longest character match (≥ 10% of the text, LoRA text under its adapter) else the smallest trees; of those below max_ongoing_requests, the shortest queue, ties at random; a LoRA request spills by cached queue length",
		Variants: []string{PrefixTreeRayLoRA, PrefixTreeRay + " (06c16f2f: no adapter key, no spill)", PrefixTreeRayOld + " (ef82d1d9: also queue spread > 10 → power of two)"},
	},
	"cache-aware": {
		Source:   "SGLang sgl-model-gateway (sgl-project/sglang b93974f1) sgl-model-gateway/src/policies/cache_aware.rs; src/routers/http/router.rs (033e8423)",
		Rule:     "over the ready workers only: imbalanced → first least-loaded; character match rate > 0.3 → a tenant of the deepest match whatever its load (not ready: it leaves the tree, the first ready worker, nothing inserted); else least-loaded",
		Variants: []string{CacheAwareGateway, CacheAwareRouter + " (low match → smallest tree, sgl-router/src/policies/cache_aware.rs)"},
	},
	"prefix-score": {
		Source:   "GIE EPP v1.5.0 (kubernetes-sigs/gateway-api-inference-extension) pkg/epp/framework/plugins/requestcontrol/dataproducer/approximateprefix/hashing.go",
		Rule:     "max of 2·queue score + 2·(1 − KV usage) + 3·matched-block fraction, summed in that order; blocks of engine block size × 4 chars (json of messages for chat), cache_salt in the first",
		Variants: []string{PrefixScoreGIE, PrefixScoreLLMD + " (token blocks ≥ 64, dataproducer/prefixhash/hashing.go)"},
	},
	"precise-prefix": {
		Source: "llm-d precise prefix cache as llm-d-router v0.10.0 ships it (llm-d/llm-d-router v0.10.0 deploy/config/epp-precise-prefix-cache-config.yaml, pkg/kvcache, pkg/kvevents/pool.go, preciseprefixcache)",
		Rule:   "max of 2·KV-event run of 64-token index blocks (re-chunked per event, stores counted per pod, ≤ 10 endpoints a block, LoRA-salted) + 1·(1 − KV usage) + 1·queue score",
	},
	"chwbl": {
		Source:   "Neutree v1.1.1 (neutree-ai/neutree 6cb41726) cluster-image-builder/serve/_replica_scheduler/chwbl_scheduler.py",
		Rule:     "MD5 ring of a system+first-user-messages key (else the whole body, str(payload)); first endpoint on the ring with load+1 ≤ (T+1)/n·1.25, else the first",
		Variants: []string{CHWBLNeutree, CHWBLKubeAI + " (xxhash ring of adapter+first 100 runes, load ≤ (T+1)/n·1.25; internal/loadbalancer/balance_chwbl.go)"},
	},
	"lmetric": {
		Source: "LMetric (arXiv 2603.15202) in AIBrix's unmerged PR #2571 (vllm-project/aibrix 2519ad59, not on main) pkg/plugins/gateway/algorithms/l_metric_local.go; table pkg/utils/prefixcacheindexer/hash.go",
		Rule:   "lowest (pending new tokens + the request's uncached tokens) × (pending requests + 1); one table entry per block for all models; a removed pod's entries and sums kept",
	},
	"kv-router": {
		Source: "NVIDIA Dynamo KV router (ai-dynamo/dynamo 07a6c9ce) lib/kv-router/src/scheduling/selector/default.rs; expiry sequences/single.rs (04df1c42)",
		Rule:   "lowest prefill_load_scale·max(0, prefill blocks − credit·cached blocks) + decode blocks, in the workers' block size, LoRA-salted; requests older than 1 h dropped; softmax above temperature 0",
	},
	"token-load": {
		Source: "llm-d optimized-baseline profile (llm-d/llm-d 0a3b0c93 guides/optimized-baseline/router) over llm-d-router v0.10.0 plugins: dataproducer/approximateprefix + inflightload, scheduling/filter/prefixcacheaffinity, scorer/tokenload",
		Rule:   "endpoints with prefix score ≥ 0.8 unless their TTFT penalty is too high; then the fewest in-flight + own uncached tokens (whole blocks of max(64, engine block) tokens)",
	},
	"predicted-ttft": {
		Source: "kvroute",
		Rule:   "smallest predicted TTFT: queued and uncached prompt tokens priced by the endpoint's step-time model, plus the wait for KV space",
	},
}
