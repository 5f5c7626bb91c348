package router

import "time"

// Message is one chat message of a request, kept so that policies keyed on the conversation's
// structure (CHWBL's system prompt plus first user messages) can see it.
type Message struct {
	// Role is "system", "user", "assistant" or "tool".
	Role string
	// Content is the message text.
	Content string
}

// Request is what a policy knows about one inference request.
type Request struct {
	// ID identifies the request; Observer callbacks use it to pair Routed with Finished.
	ID string
	// Model is the model name the client asked for; Adapter is the LoRA adapter, if any.
	Model, Adapter string
	// Tenant is the client the request is billed to, for fairness policies; may be empty.
	Tenant string
	// SessionKey groups the turns of one conversation, for affinity policies; may be empty.
	SessionKey string
	// Prompt is what the client sent, flattened: for chat, the message contents joined by a
	// single space with no roles or template (as AIBrix and SGLang flatten them).
	Prompt string
	// Messages are the chat messages, when the request was a chat request; nil otherwise.
	Messages []Message
	// Tokens are the prompt's token ids when the caller already has them; nil otherwise.
	// Token-based policies use them instead of tokenizing Prompt.
	Tokens []int32
	// InputTokens is the prompt length in tokens (0 when unknown).
	InputTokens int
	// MaxOutputTokens is the requested output length in tokens (0 when unknown).
	MaxOutputTokens int
	// Body is the JSON body the client sent, when there is one (the proxy; nil in simulation).
	// Policies read it during Pick only and never keep it.
	Body []byte
}

// EndpointState is the router's view of one endpoint (one model server replica).
type EndpointState struct {
	// ID names the endpoint uniquely within the pool (a URL or a replica name).
	ID string
	// Ready reports whether the endpoint may receive requests.
	Ready bool
	// Models lists the models and adapters the endpoint serves; empty means it serves any model.
	Models []string
	// Running and Waiting are vllm:num_requests_running and vllm:num_requests_waiting as last
	// scraped, at UpdatedAt.
	Running, Waiting int
	// KVUsage is vllm:kv_cache_usage_perc as last scraped: the fraction of KV blocks in use, 0..1.
	KVUsage float64
	// InFlight is the router's own count of requests it sent to the endpoint that have not
	// finished; InFlightTokens is the sum of their prompt plus requested output tokens. Both are
	// updated synchronously at decision time, so they are never stale.
	InFlight, InFlightTokens int
	// NumGPUBlocks is the endpoint's KV capacity in blocks (vllm:cache_config_info
	// num_gpu_blocks); 0 when unknown.
	NumGPUBlocks int
	// BlockSize is the endpoint's KV block size in tokens (vllm:cache_config_info block_size);
	// 0 when unknown.
	BlockSize int
	// UpdatedAt is when the scraped fields were read; staleness is part of the view.
	UpdatedAt time.Time
	// Prefill predicts how long the endpoint takes to prefill a prompt, from its GPU and
	// model; nil when they are unknown. predicted-ttft reads it; the simulator fills it from
	// each replica's gpumodel.Deployment and cmd/route from each backend's gpu and model.
	Prefill PrefillPredictor
}

// PrefillPredictor predicts an endpoint's prefill time (gpumodel.PrefillPredictor implements
// it; router does not import gpumodel).
type PrefillPredictor interface {
	// PrefillTime returns how long the endpoint takes to compute tokens new prompt tokens
	// after cached cached ones while decoding sequences, of decodeContext tokens of context
	// in all, decode alongside.
	PrefillTime(tokens, cached, decoding int, decodeContext int64) time.Duration
	// BatchTime returns how long the endpoint takes to prefill tokens prompt tokens of
	// several queued requests, batched into full steps.
	BatchTime(tokens, decoding int, decodeContext int64) time.Duration
}

// Snapshot is one consistent view of the pool for one decision.
type Snapshot struct {
	// Now is the current time: virtual in the simulator, wall clock in the proxy.
	Now time.Time
	// Endpoints is the pool, in a stable order; Decision.Index points into it.
	Endpoints []EndpointState
	// Seq numbers the decision the snapshot is built for: unique and above 0 among one
	// Lifecycle's decisions, and handed back to Observer.Routed in Decision.Seq, so that a
	// policy can carry what it computed at Pick to Routed. 0 when the caller is not a
	// Lifecycle: the policy then computes afresh at Routed.
	Seq uint64
}

// Decision is a policy's choice.
type Decision struct {
	// Index is the chosen endpoint's position in Snapshot.Endpoints.
	Index int
	// Reason names the branch of the algorithm that made the choice (see the Reason constants),
	// for metrics and reports.
	Reason string
	// Seq is the Snapshot.Seq of the decision, set by the Lifecycle (policies leave it 0).
	Seq uint64
}

// Usage is what a finished request consumed, as the model server reported it.
type Usage struct {
	// PromptTokens is the prompt length in tokens.
	PromptTokens int
	// CachedTokens is the part of the prompt served from the prefix cache.
	CachedTokens int
	// CompletionTokens is the number of generated tokens.
	CompletionTokens int
}

// Policy chooses an endpoint for a request. Implementations are safe for concurrent use and,
// for a given seed and the same sequence of calls, deterministic. Pick does not modify the
// snapshot and does not record the decision: the caller reports it through Observer.Routed.
type Policy interface {
	// Name returns the registry name of the policy.
	Name() string
	// Pick returns the chosen endpoint, or an error wrapping ErrNoEndpoint when no endpoint
	// of the snapshot is ready and serves the request's model.
	Pick(req *Request, s *Snapshot) (Decision, error)
}

// Observer is implemented by policies that learn from their own decisions. A Lifecycle makes
// every call: Routed right after the Pick that returned d, with no other call of the policy
// in between.
type Observer interface {
	// Routed reports that req was sent to endpoint at now by decision d. When d.Seq is not 0
	// it is the Snapshot.Seq of the Pick that returned d, so what that Pick computed for req
	// is still valid.
	Routed(req *Request, d Decision, endpoint string, now time.Time)
	// Finished reports that req ended on endpoint with usage u. It is idempotent: a second
	// call for the same request ID, or one for a request never routed, has no effect.
	Finished(req *Request, endpoint string, u Usage, now time.Time)
	// Removed reports that endpoint left the pool; state kept for it is dropped.
	Removed(endpoint string)
}

// KVEventObserver is implemented by policies that read the replicas' real prefix caches, fed
// by their KV events (vLLM publishes BlockStored, BlockRemoved and AllBlocksCleared; the
// simulator reports the same from its engines). Hashes are chained token-block hashes
// (router/prefix.TokenBlockHash). Each store and removal names the tier it happened in, as
// vLLM's events carry a medium: a replica with a CPU offload tier reports the same block
// stored on "GPU" and on "CPU", and evicted from each separately, so an observer that counts
// lower tiers keeps one entry per (endpoint, tier) and one that does not ignores all but
// MediumGPU.
type KVEventObserver interface {
	// BlockStored reports that endpoint now caches the block with hash in tier medium.
	BlockStored(endpoint string, hash uint64, medium string)
	// BlockRemoved reports that endpoint evicted it from tier medium.
	BlockRemoved(endpoint string, hash uint64, medium string)
	// AllBlocksCleared reports that endpoint's cache was emptied, every tier.
	AllBlocksCleared(endpoint string)
}

// The KV event media (vLLM's kv_events.py medium, uppercase as vLLM publishes it): the
// GPU's KV cache, and the CPU tier of vLLM's native offloading. vLLM leaves medium unset in
// events from engines without a tier; drivers report those as MediumGPU.
const (
	MediumGPU = "GPU"
	MediumCPU = "CPU"
)

// FirstTokenObserver is implemented by policies that track a request's prompt-side load only
// until its first token comes back, as NVIDIA Dynamo's KV router releases a request's prefill
// tokens when the first response reaches the frontend (ai-dynamo/dynamo
// lib/kv-router/src/sequences: release_prompt_load). The Lifecycle reports each attempt's
// first token once, before its Finished.
type FirstTokenObserver interface {
	// FirstToken reports that req's first token came back from endpoint at now.
	FirstToken(req *Request, endpoint string, now time.Time)
}
