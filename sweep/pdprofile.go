package sweep

import (
	"maps"
	"slices"
)

// pdProfiles are the shipped per-stage profiles: how llm-d, NVIDIA Dynamo and SGLang's
// gateway route a fleet split into prefill and decode pools, as far as kvroute's policies
// express them (docs/policies.md, "P/D profiles", says what each cannot express). A policy
// entry naming one with no keys (`llm-d-pd`, `{name: llm-d-pd}`) is that P/D spec.
var pdProfiles = map[string]func() PDSpec{
	// llm-d/llm-d-router v0.10.0 deploy/config/pd-epp-config.yaml:1-37: the approximate
	// producer (maxPrefixTokensToMatch 16384, lruCapacityPerServer 31250), both profiles
	// prefix-cache-scorer weight 2 + queue-scorer weight 1 + max-score-picker, the
	// prefix-based-pd-decider with nonCachedTokens 16.
	"llm-d-pd": func() PDSpec {
		stage := func() PolicySpec {
			return PolicySpec{Name: "prefix-score", Params: map[string]any{
				"variant": "llm-d-router-v0.10.0", "prefix_weight": 2, "queue_weight": 1, "kv_cache_weight": 0,
				"max_prefix_tokens_to_match": 16384, "lru_capacity_per_server": 31250}}
		}
		return PDSpec{Decider: PolicySpec{Name: "prefix-based", Params: map[string]any{"non_cached_tokens": 16}},
			Prefill: stage(), Decode: stage()}
	},
	// llm-d/llm-d@83bb7c18 guides/pd-disaggregation/router/pd-disaggregation.values.yaml:
	// always-disagg-pd-decider; prefill prefix-cache-affinity-filter (peakPrefillThroughput
	// 33821) + token-load-scorer; decode active-request-scorer, here least-request.
	"llm-d-pd-guide": func() PDSpec {
		return PDSpec{Decider: PolicySpec{Name: "always"},
			Prefill: PolicySpec{Name: "token-load", Params: map[string]any{"peak_prefill_throughput": 33821}},
			Decode:  PolicySpec{Name: "least-request"}}
	},
	// NVIDIA Dynamo's KV router on both pools; conditional_prefill_enabled false by default
	// (ai-dynamo/dynamo@0243c51b lib/kv-router/src/scheduling/config.rs), so every request
	// prefills remotely; the decode router forces overlap_score_credit 0 (selector/default.rs
	// worker_logit at 07a6c9ce).
	"dynamo-pd": func() PDSpec {
		return PDSpec{Decider: PolicySpec{Name: "always"}, Prefill: PolicySpec{Name: "kv-router"},
			Decode: PolicySpec{Name: "kv-router", Params: map[string]any{"overlap_score_credit": 0}}}
	},
	// Dynamo with conditional prefill enabled, policy token_cap: the decode worker is the
	// cache-hot one of the aggregated cost (overlap credit 1), and the prefill stays on it
	// when the net-new tokens are at most 5000 (conditional_prefill.rs).
	"dynamo-pd-conditional": func() PDSpec {
		return PDSpec{Decider: PolicySpec{Name: "token-cap"}, Prefill: PolicySpec{Name: "kv-router"},
			Decode: PolicySpec{Name: "kv-router"}}
	},
	// SGLang's PD router: a prefill worker and a decode worker picked independently with the
	// prefill and decode policies, which default to --policy, cache_aware
	// (sgl-project/sglang@004dcda2 sgl-model-gateway/src/routers/http/pd_router.rs
	// select_pd_pair); both legs are always sent.
	"sglang-pd": func() PDSpec {
		return PDSpec{Decider: PolicySpec{Name: "always"}, Prefill: PolicySpec{Name: "cache-aware"},
			Decode: PolicySpec{Name: "cache-aware"}}
	},
}

// PDProfiles returns the shipped P/D profiles' names in ascending order.
func PDProfiles() []string { return slices.Sorted(maps.Keys(pdProfiles)) }

// PDProfile returns the shipped P/D profile called name (a fresh copy), or false.
func PDProfile(name string) (PDSpec, bool) {
	f, ok := pdProfiles[name]
	if !ok {
		return PDSpec{}, false
	}
	return f(), true
}

// withProfile returns p as the shipped profile it names when it names one and has no
// parameters or P/D keys of its own; otherwise p.
func withProfile(p PolicySpec) PolicySpec {
	if p.PD != nil || len(p.Params) > 0 {
		return p
	}
	if pd, ok := PDProfile(p.Name); ok {
		p.PD = &pd
	}
	return p
}
