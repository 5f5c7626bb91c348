package workloads

import (
	"fmt"
	"time"

	"kvroute/internal/strictyaml"
)

// Kind selects a workload source.
type Kind string

// The workload kinds.
const (
	// KindSharedPrefix is groups of prompts that share a system prompt (SGLang's
	// generated-shared-prefix, inference-perf's shared_prefix).
	KindSharedPrefix Kind = "shared-prefix"
	// KindSyntheticChat is ShareGPT-like multi-turn conversations without the dataset.
	KindSyntheticChat Kind = "synthetic-chat"
	// KindShareGPT replays the ShareGPT dataset, single-turn or whole conversations.
	KindShareGPT Kind = "sharegpt"
	// KindMooncake replays a Mooncake JSONL trace.
	KindMooncake Kind = "mooncake"
	// KindAzure replays an Azure LLM inference CSV trace.
	KindAzure Kind = "azure"
	// KindMix merges several tenants, each with its own workload.
	KindMix Kind = "mix"
)

// Process selects an arrival process.
type Process string

// The arrival processes.
const (
	// ProcessPoisson has exponential inter-arrival times with mean 1/rate.
	ProcessPoisson Process = "poisson"
	// ProcessGamma has Gamma(burstiness, 1/(rate·burstiness)) inter-arrival times, as
	// `vllm bench serve --burstiness`: mean 1/rate, burstier below 1, smoother above.
	ProcessGamma Process = "gamma"
	// ProcessConstant sends one session every 1/rate seconds.
	ProcessConstant Process = "constant"
	// ProcessImmediate starts every session at time 0 (`vllm bench serve` with rate inf).
	ProcessImmediate Process = "immediate"
	// ProcessTrace uses the trace's own timestamps, multiplied by time_scale.
	ProcessTrace Process = "trace"
)

// Length distributions of synthetic-chat messages.
const (
	DistLogNormal   = "lognormal"
	DistExponential = "exponential"
	DistConstant    = "constant"
)

// Modes of the sharegpt source.
const (
	ModeSingle    = "single"
	ModeMultiTurn = "multi-turn"
)

// Presets of the shared-prefix source.
const (
	PresetSGLang        = "sglang"
	PresetInferencePerf = "inference-perf"
)

// Config is a complete workload: what requests look like and when they arrive. Its YAML
// shape is the `workload:`, `arrival:`, `requests:` and `duration:` keys of a run file; a
// caller can embed it inline. A zero field means "the default for the kind" (see Resolve and
// the package documentation for every default).
type Config struct {
	// Workload says what the requests are.
	Workload WorkloadConfig `yaml:"workload"`
	// Arrival says when sessions start.
	Arrival ArrivalConfig `yaml:"arrival"`
	// Requests caps the stream at this many requests (turns included); 0 means no cap.
	Requests int `yaml:"requests,omitempty"`
	// Duration caps the stream at requests arriving before this offset; 0 means no cap.
	Duration time.Duration `yaml:"duration,omitempty"`
}

// WorkloadConfig describes the requests. Which fields apply depends on Kind; Validate rejects
// a field set for a kind that does not use it.
type WorkloadConfig struct {
	// Kind selects the source; default shared-prefix.
	Kind Kind `yaml:"kind,omitempty"`

	// Preset picks shared-prefix defaults: sglang (default) or inference-perf.
	Preset string `yaml:"preset,omitempty"`
	// Groups is the number of shared-prefix groups (sglang 64, inference-perf 10).
	Groups int `yaml:"groups,omitempty"`
	// PromptsPerGroup is the number of distinct questions per group (sglang 16, inference-perf 10).
	PromptsPerGroup int `yaml:"prompts_per_group,omitempty"`
	// SystemPromptTokens is the shared system prompt length: shared-prefix (sglang 2048,
	// inference-perf 100) and synthetic-chat when SystemPrompts > 0 (default 1024).
	SystemPromptTokens int `yaml:"system_prompt_tokens,omitempty"`
	// QuestionTokens is the shared-prefix question length (sglang 128, inference-perf 50).
	QuestionTokens int `yaml:"question_tokens,omitempty"`
	// Repeat draws shared-prefix prompts at random forever (inference-perf, default there)
	// instead of sending each once in shuffled order (sglang, default there).
	Repeat *bool `yaml:"repeat,omitempty"`
	// Cycle, with Repeat, sends the shuffled prompt list in order, over and over, instead of
	// drawing each prompt at random, and starts again at the head of the list with every
	// arrival stage: inference-perf's shared_prefix data generator, which shuffles its
	// prompts once and numbers each stage's requests from 0 (default false).
	Cycle bool `yaml:"cycle,omitempty"`
	// Turns is the number of questions per shared-prefix session (default 1); each further
	// question carries the history, closed-loop.
	Turns int `yaml:"turns,omitempty"`

	// MeanTurns is the synthetic-chat mean turns per conversation, geometric on 1, 2, …
	// (default 3.51, ShareGPT's).
	MeanTurns float64 `yaml:"mean_turns,omitempty"`
	// MaxTurns caps the turns of a conversation: synthetic-chat (default 32) and sharegpt
	// multi-turn (default 0 = all turns).
	MaxTurns int `yaml:"max_turns,omitempty"`
	// PromptTokens is the synthetic-chat mean user message length (default 161).
	PromptTokens int `yaml:"prompt_tokens,omitempty"`
	// LengthDist is the synthetic-chat length distribution: lognormal (default), exponential
	// or constant.
	LengthDist string `yaml:"length_dist,omitempty"`
	// PromptSigma is the log-normal shape of user message lengths (default 1.0).
	PromptSigma float64 `yaml:"prompt_sigma,omitempty"`
	// OutputSigma is the log-normal shape of answer lengths (default 0.8).
	OutputSigma float64 `yaml:"output_sigma,omitempty"`
	// MaxMessageTokens clamps every sampled synthetic-chat length (default 4096).
	MaxMessageTokens int `yaml:"max_message_tokens,omitempty"`
	// SystemPrompts is the number of distinct synthetic-chat system prompts conversations
	// pick from uniformly (default 0 = none).
	SystemPrompts int `yaml:"system_prompts,omitempty"`

	// OutputTokens is the answer length: fixed for shared-prefix (sglang 256, inference-perf
	// 50), the mean for synthetic-chat (default 338), and for sharegpt single mode an override
	// of the dataset's lengths (default 0 = the dataset's, like --sharegpt-output-len).
	OutputTokens int `yaml:"output_tokens,omitempty"`
	// ThinkTime is the pause between an answer and the session's next turn (default 0).
	ThinkTime time.Duration `yaml:"think_time,omitempty"`
	// ThinkDist is constant (default) or exponential with mean ThinkTime.
	ThinkDist string `yaml:"think_dist,omitempty"`

	// Path is the dataset or trace file of sharegpt, mooncake and azure (required).
	Path string `yaml:"path,omitempty"`
	// Mode is the sharegpt mode: single (default, as vllm bench serve) or multi-turn.
	Mode string `yaml:"mode,omitempty"`
	// Shuffle reads sharegpt conversations in a seeded random order, as vllm does (default
	// true); false streams the file in order.
	Shuffle *bool `yaml:"shuffle,omitempty"`
	// MinTokens drops sharegpt prompts and answers shorter than this (default 4).
	MinTokens int `yaml:"min_tokens,omitempty"`
	// MaxPromptTokens drops longer sharegpt prompts (default 1024 single, 6144 multi-turn).
	MaxPromptTokens int `yaml:"max_prompt_tokens,omitempty"`
	// MaxTotalTokens drops sharegpt requests whose prompt plus answer is longer (default 2048
	// single, 8192 multi-turn).
	MaxTotalTokens int `yaml:"max_total_tokens,omitempty"`
	// BlockTokens is the token count of one Mooncake hash id (default 512).
	BlockTokens int `yaml:"block_tokens,omitempty"`

	// Prompts is the number of distinct chat-prefixes prompts (default 800; see
	// chatprefix.go); prompt_tokens there is the mean user message (50).
	Prompts int `yaml:"prompts,omitempty"`
	// Rounds is how many times chat-prefixes sends its prompt list (default 10).
	Rounds int `yaml:"rounds,omitempty"`
	// Concurrency is the number of closed-loop clients, each sending its next request as
	// soon as its previous one finishes, so that this many are in flight once all have
	// started; the arrival process says when each client starts (immediate: all at 0).
	// chat-prefixes (default 800) and shared-prefix with turns 1 (default 0: open loop,
	// one request per arrival).
	Concurrency int `yaml:"concurrency,omitempty"`
	// MinTurns is the fewest turns of a chat-prefixes conversation (default 8).
	MinTurns int `yaml:"min_turns,omitempty"`
	// AnswerTokens is the mean length of the answers in a chat-prefixes history (default 106).
	AnswerTokens int `yaml:"answer_tokens,omitempty"`

	// Tenants lists the tenants of a mix (at least one).
	Tenants []TenantConfig `yaml:"tenants,omitempty"`
}

// TenantConfig is one tenant of a mix.
type TenantConfig struct {
	// Name labels the tenant's requests and prefixes their IDs; letters, digits, '.', '_'
	// and '-' only. Required and unique.
	Name string `yaml:"name"`
	// Weight is the tenant's share of the mix's arrivals when it has no Arrival of its own
	// (default 1).
	Weight float64 `yaml:"weight,omitempty"`
	// Workload is the tenant's source; it cannot itself be a mix.
	Workload WorkloadConfig `yaml:"workload"`
	// Arrival, when set, gives the tenant its own arrival process (its own rate), independent
	// of the mix's; a tenant flooding the fleet is one with a high rate here.
	Arrival *ArrivalConfig `yaml:"arrival,omitempty"`
}

// ArrivalConfig says when sessions start. Rates count sessions: for single-turn sources
// that is requests per second; later turns of a session follow closed-loop.
type ArrivalConfig struct {
	// Process is poisson, gamma, constant, immediate or trace; default trace for mooncake and
	// azure, poisson otherwise.
	Process Process `yaml:"process,omitempty"`
	// Rate is sessions per second for poisson, gamma and constant (default 10).
	Rate float64 `yaml:"rate,omitempty"`
	// Burstiness is the gamma shape (default 1, which is Poisson).
	Burstiness float64 `yaml:"burstiness,omitempty"`
	// TimeScale multiplies trace timestamps: 0.5 replays twice as fast (default 1).
	TimeScale float64 `yaml:"time_scale,omitempty"`
	// Normalize rescales the first Requests arrival times so the last lands exactly on
	// Requests/Rate, as vllm bench serve does (default false; needs Requests > 0).
	Normalize bool `yaml:"normalize,omitempty"`
	// Stages, when set, replaces Rate with a ladder of load stages run one after another in
	// one run, as inference-perf's `load.stages`; see Drain for how one stage follows the
	// previous. Only the top-level arrival may have stages.
	Stages []StageConfig `yaml:"stages,omitempty"`
	// Drain makes each stage inference-perf's (default true with stages): stage k sends
	// floor(rate·duration) requests starting 1 s after it begins, ends at the first whole
	// second after its duration at which every one of them has finished, and the next stage
	// begins StageInterval later, so no backlog is carried. false runs the stages back to back
	// on the clock, each for its duration, carrying the backlog (a continuous ladder).
	Drain *bool `yaml:"drain,omitempty"`
	// StageInterval is the pause between a drained stage's end and the next stage's start
	// (inference-perf's `load.interval`; default 1 s with Drain).
	StageInterval time.Duration `yaml:"stage_interval,omitempty"`
}

// StageConfig is one load stage of a staged arrival process.
type StageConfig struct {
	// Rate is the stage's sessions per second (required, > 0).
	Rate float64 `yaml:"rate"`
	// Duration is how long the stage offers Rate (required, > 0).
	Duration time.Duration `yaml:"duration"`
	// Warmup marks a stage that results leave out of their mean over stages.
	Warmup bool `yaml:"warmup,omitempty"`
}

// DefaultConfig returns SGLang's generated-shared-prefix workload (64 groups × 16 prompts,
// 2048-token system prompt, 128-token question, 256 output tokens) at 10 Poisson arrivals
// per second, fully resolved.
func DefaultConfig() Config {
	return Config{Workload: WorkloadConfig{Kind: KindSharedPrefix}}.Resolve()
}

// ParseConfig decodes YAML strictly (unknown fields are errors) into a Config. Missing
// fields stay zero, meaning their defaults; call Validate before use. Name labels errors.
func ParseConfig(name string, data []byte) (Config, error) {
	var c Config
	if err := strictyaml.Decode(data, &c); err != nil {
		return Config{}, fmt.Errorf("workloads: config %s: %w: %v", name, ErrMalformed, err)
	}
	return c, nil
}
