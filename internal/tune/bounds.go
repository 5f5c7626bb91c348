package tune

// Bounds is the range a parameter is searched in.
type Bounds struct {
	// Lo and Hi bound the value (seconds for a duration).
	Lo float64 `json:"lo"`
	Hi float64 `json:"hi"`
	// Log searches the range on a logarithmic scale (for sizes and rates spanning decades).
	Log bool `json:"log,omitempty"`
	// Step rounds values to its multiples (0: whole numbers for an int, none for a float).
	Step float64 `json:"step,omitempty"`
	// Optional parameters are searched only when named (simulate -tune-params): they act
	// on a part of the system the default traffic does not have, which Note names.
	Optional bool   `json:"optional,omitempty"`
	Note     string `json:"-"`
}

// Shared ranges.
var (
	weight     = Bounds{Lo: 0, Hi: 10} // a scorer's weight; only ratios matter
	fraction   = Bounds{Lo: 0, Hi: 1}  // a threshold on a score or match rate in [0, 1]
	tierWeight = Bounds{Lo: 0, Hi: 2, Optional: true, Note: "weighs blocks in a CPU tier or on disk; no effect on a fleet without one"}
)

// boundsTable holds the search bounds of each built-in policy's parameters, by policy and
// parameter name (json tag). Ranges span the values upstream ships or documents and
// a decade or so around them; a test checks every entry against the policy's configuration
// and that each numeric parameter is here or in fixedTable.
var boundsTable = map[string]map[string]Bounds{
	"kv-router": {
		"overlap_score_credit":  {Lo: 0, Hi: 2},
		"prefill_load_scale":    {Lo: 0.1, Hi: 10, Log: true},
		"router_temperature":    {Lo: 0, Hi: 1},
		"host_cache_hit_weight": tierWeight,
		"disk_cache_hit_weight": tierWeight,
	},
	"prefix-score": {
		"prefix_weight":              weight,
		"queue_weight":               weight,
		"kv_cache_weight":            weight,
		"average_chars_per_token":    {Lo: 1, Hi: 16, Log: true},
		"max_prefix_blocks_to_match": {Lo: 16, Hi: 2048, Log: true},
	},
	"precise-prefix": {
		"block_size":      {Lo: 16, Hi: 512, Log: true, Step: 16},
		"prefix_weight":   weight,
		"kv_cache_weight": weight,
		"queue_weight":    weight,
	},
	"prefix-cache": {
		"block_size":                {Lo: 16, Hi: 1024, Log: true},
		"imbalance_abs_count":       {Lo: 1, Hi: 128, Log: true},
		"standard_deviation_factor": {Lo: 0, Hi: 4},
	},
	"prefix-tree": {
		"match_rate_threshold": fraction,
		"imbalanced_threshold": {Lo: 1, Hi: 256, Log: true},
	},
	"cache-aware": {
		"cache_threshold":       fraction,
		"balance_abs_threshold": {Lo: 1, Hi: 256, Log: true},
		"balance_rel_threshold": {Lo: 1, Hi: 4},
	},
	"chwbl": {
		"load_factor":                 {Lo: 1.01, Hi: 3},
		"virtual_nodes_per_replica":   {Lo: 10, Hi: 1000, Log: true},
		"max_user_messages_for_cache": {Lo: 1, Hi: 8},
	},
	"vtc-basic": {
		"fairness_weight":    {Lo: 0, Hi: 4},
		"utilization_weight": {Lo: 0, Hi: 4},
		"max_pod_load":       {Lo: 1, Hi: 256, Log: true},
	},
	"lmetric": {
		"block_size": {Lo: 16, Hi: 1024, Log: true},
	},
	"token-load": {
		"affinity_threshold":      fraction,
		"exploration_probability": {Lo: 0, Hi: 0.5},
		"max_ttft_penalty_ms":     {Lo: 100, Hi: 60000, Log: true},
		"queue_threshold_tokens":  {Lo: 1e4, Hi: 1e7, Log: true},
	},
	"predicted-ttft": {
		"externality": {Lo: 0, Hi: 8},
	},
}

// Reasons a numeric parameter is not searched.
const (
	reasonEngine   = "the engines report theirs (auto-tuning); the value is a fallback"
	reasonCapacity = "an index capacity: bounds memory, not decisions, at the default traffic's size"
	reasonTimer    = "a housekeeping period or lifetime, not a decision weight"
	reasonVariant  = "used by another upstream variant than the default"
	reasonTier     = "prices a CPU tier; no effect on a fleet without one"
	reasonModel    = "a property of the hardware, not a choice"
	reasonLoRA     = "acts on LoRA requests only"
)

// fixedTable says, by policy and parameter, why a numeric parameter has no search bounds.
var fixedTable = map[string]map[string]string{
	"kv-router": {"block_size": reasonEngine},
	"prefix-score": {"block_size_tokens": reasonEngine, "lru_capacity_per_server": reasonCapacity,
		"max_prefix_tokens_to_match": "0 keeps the variant's cap; max_prefix_blocks_to_match is searched instead"},
	"precise-prefix": {"engine_block_size": reasonModel, "speculative_ttl": "only with speculative_indexing, off by default"},
	"prefix-cache":   {"block_number": reasonCapacity, "eviction_ttl": reasonTimer, "eviction_interval": reasonTimer},
	"prefix-tree": {"eviction_threshold_chars": "only with do_eviction, off by default", "eviction_target_chars": "only with do_eviction, off by default",
		"eviction_interval": reasonTimer, "multiplex_spill_threshold": reasonLoRA, "max_ongoing_requests": "a replica's admission limit, not a routing choice"},
	"cache-aware": {"eviction_interval": reasonTimer, "max_tree_size": reasonCapacity},
	"chwbl":       {"prefix_char_length": reasonVariant},
	"vtc-basic": {"window": reasonTimer, "bucket_width": reasonTimer, "min_tokens": "bounds the fairness normalisation, paired with max_tokens",
		"max_tokens": "bounds the fairness normalisation, paired with min_tokens", "input_token_weight": "charges tenants, not endpoints",
		"output_token_weight": "charges tenants, not endpoints"},
	"lmetric":    {"block_number": reasonCapacity, "eviction_ttl": reasonTimer, "eviction_interval": reasonTimer},
	"token-load": {"peak_prefill_throughput": reasonModel, "block_size_tokens": reasonEngine, "lru_capacity_per_server": reasonCapacity, "max_prefix_tokens_to_match": reasonCapacity},
	"predicted-ttft": {"block_size": reasonEngine, "fallback_tokens_per_second": reasonEngine, "index_capacity": reasonCapacity,
		"route_ttl": "how long routed blocks count before KV events take over", "kv_bytes_per_token": reasonTier, "host_bandwidth_bytes_per_second": reasonTier},
}
