package emulate

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"kvroute/gpumodel"
	"kvroute/internal/openai"
	"kvroute/sim/engine"
)

// Config configures one emulated replica.
type Config struct {
	// GPU is the catalog name or an alias of the accelerator ("H100-SXM-80GB").
	GPU string `json:"gpu" yaml:"gpu"`
	// Model is the catalog name or an alias of the served model ("llama-3.1-8b").
	Model string `json:"model" yaml:"model"`
	// ServedModelName is the name /v1/models lists and responses carry; empty means Model as
	// given. Requests may name it, the catalog name, any catalog alias, or nothing.
	ServedModelName string `json:"served_model_name" yaml:"served_model_name"`
	// TP is the tensor-parallel size, at least 1.
	TP int `json:"tp" yaml:"tp"`
	// Speed is how much faster than real time the replica runs, > 0: 1 is real time, 10 makes
	// every step take a tenth of its simulated duration.
	Speed float64 `json:"speed" yaml:"speed"`
	// NumBlocks overrides the KV capacity in blocks when > 0 (vLLM's num_gpu_blocks_override).
	NumBlocks int `json:"num_blocks" yaml:"num_blocks"`
	// MaxNumBatchedTokens and MaxNumSeqs are vLLM's --max-num-batched-tokens and
	// --max-num-seqs (0: vLLM's default for the GPU).
	MaxNumBatchedTokens int `json:"max_num_batched_tokens" yaml:"max_num_batched_tokens"`
	MaxNumSeqs          int `json:"max_num_seqs" yaml:"max_num_seqs"`
	// VLLM names the vLLM release whose semantics the engine follows (engine.ParseRelease;
	// empty: the newest modelled).
	VLLM string `json:"vllm" yaml:"vllm"`
	// DefaultMaxTokens is the output length of a request that sends no max_tokens, at least 1.
	DefaultMaxTokens int `json:"default_max_tokens" yaml:"default_max_tokens"`
	// MaxTokensCap caps max_tokens: a request asking for more generates this many, at least
	// DefaultMaxTokens.
	MaxTokensCap int `json:"max_tokens_cap" yaml:"max_tokens_cap"`
	// MaxBodyBytes bounds request bodies, in bytes, at least 1; larger ones get 413.
	MaxBodyBytes int64 `json:"max_body_bytes" yaml:"max_body_bytes"`
	// Addr, when not empty, is the TCP address Start listens on ("127.0.0.1:8001", or port 0
	// for any free port). Empty means the replica is only an http.Handler.
	Addr string `json:"addr" yaml:"addr"`
	// KVEvents configures publishing the prefix cache's changes over ZMQ, as vLLM does.
	KVEvents KVEventsConfig `json:"kv_events" yaml:"kv_events"`
	// Offload gives the replica a CPU KV tier, as vLLM's --kv-offloading-size does
	// (cmd/emulate sets it from fleet.kv_offloading_size); the zero value: none. The tier
	// publishes its KV events with medium CPU and /metrics shows vLLM's offload metrics.
	Offload engine.OffloadConfig `json:"-" yaml:"-"`
	// PD is the replica's role in a disaggregated fleet and its KV transfer link; the zero
	// value: aggregated.
	PD PDConfig `json:"pd" yaml:"pd"`
	// StepTime, when not nil, replaces gpumodel's step pricing (tests use fixed step times).
	StepTime func(gpumodel.Step) time.Duration `json:"-" yaml:"-"`
	// Deployment, when not nil, is the resolved replica to run, and GPU, Model, TP,
	// MaxNumBatchedTokens and MaxNumSeqs are not looked up: cmd/emulate resolves a sweep
	// file's fleet section (catalog and engine arguments included) with the simulator's own
	// resolver and passes the result here. Model still names the served model.
	Deployment *gpumodel.Deployment `json:"-" yaml:"-"`
}

// DefaultConfig returns one Llama-3.1-8B replica on an H100 in real time, generating 16 tokens
// unless asked otherwise and at most 4,096, with request bodies up to
// openai.DefaultMaxBodyBytes (16 MiB, the router's default too) and no listener.
func DefaultConfig() Config {
	return Config{
		GPU: "H100-SXM-80GB", Model: "llama-3.1-8b", TP: 1, Speed: 1,
		DefaultMaxTokens: 16, MaxTokensCap: 4096, MaxBodyBytes: openai.DefaultMaxBodyBytes,
	}
}

// Validate reports every problem with c, joined, or nil. Without a Deployment it resolves the
// GPU and model in gpumodel's built-in catalog.
func (c Config) Validate() error {
	var errs []error
	if c.Deployment == nil {
		errs = append(errs, c.validateLookup())
	} else if err := c.Deployment.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("emulate: deployment: %w", err))
	}
	if c.TP < 1 {
		errs = append(errs, fmt.Errorf("emulate: tp must be at least 1, got %d", c.TP))
	}
	if !(c.Speed > 0) || math.IsInf(c.Speed, 0) {
		errs = append(errs, fmt.Errorf("emulate: speed must be positive and finite, got %v", c.Speed))
	}
	if c.NumBlocks < 0 {
		errs = append(errs, fmt.Errorf("emulate: num_blocks must not be negative, got %d", c.NumBlocks))
	}
	if c.MaxNumBatchedTokens < 0 || c.MaxNumSeqs < 0 {
		errs = append(errs, fmt.Errorf("emulate: max_num_batched_tokens (%d) and max_num_seqs (%d) must not be negative",
			c.MaxNumBatchedTokens, c.MaxNumSeqs))
	}
	if rel, err := engine.ParseRelease(c.VLLM); err != nil {
		errs = append(errs, fmt.Errorf("emulate: vllm: %w", err))
	} else if rel.V0Scheduler {
		// The stream pacing (loop.go) hands each step's tokens out as the step ends; V0 reports
		// them a step late and in bursts, which only cmd/simulate models.
		errs = append(errs, fmt.Errorf("emulate: vllm %s: the emulator serves V1 releases only; simulate V0 with cmd/simulate", rel.Name))
	}
	if c.DefaultMaxTokens < 1 {
		errs = append(errs, fmt.Errorf("emulate: default_max_tokens must be at least 1, got %d", c.DefaultMaxTokens))
	}
	if c.MaxTokensCap < max(c.DefaultMaxTokens, 1) {
		errs = append(errs, fmt.Errorf("emulate: max_tokens_cap %d must be at least default_max_tokens %d", c.MaxTokensCap, c.DefaultMaxTokens))
	}
	if c.MaxBodyBytes < 1 {
		errs = append(errs, fmt.Errorf("emulate: max_body_bytes must be positive, got %d", c.MaxBodyBytes))
	}
	if err := c.KVEvents.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.PD.validate(); err != nil {
		errs = append(errs, err)
	}
	if strings.TrimSpace(c.ServedModelName) != c.ServedModelName {
		errs = append(errs, fmt.Errorf("emulate: served_model_name %q has surrounding spaces", c.ServedModelName))
	}
	return errors.Join(errs...)
}

// validateLookup checks that the GPU and model are in the built-in catalog.
func (c Config) validateLookup() error {
	var errs []error
	if _, err := gpumodel.LookupGPU(c.GPU); err != nil {
		errs = append(errs, fmt.Errorf("emulate: gpu: %w", err))
	}
	if _, err := gpumodel.LookupModel(c.Model); err != nil {
		errs = append(errs, fmt.Errorf("emulate: model: %w", err))
	}
	return errors.Join(errs...)
}

// deployment resolves c into a validated gpumodel deployment: Deployment when set.
func (c Config) deployment() (gpumodel.Deployment, error) {
	if c.Deployment != nil {
		return *c.Deployment, nil
	}
	g, err := gpumodel.LookupGPU(c.GPU)
	if err != nil {
		return gpumodel.Deployment{}, fmt.Errorf("emulate: gpu: %w", err)
	}
	m, err := gpumodel.LookupModel(c.Model)
	if err != nil {
		return gpumodel.Deployment{}, fmt.Errorf("emulate: model: %w", err)
	}
	d, err := gpumodel.EngineArgs{MaxNumBatchedTokens: c.MaxNumBatchedTokens, MaxNumSeqs: c.MaxNumSeqs}.Deployment(g, m, c.TP)
	if err != nil {
		return gpumodel.Deployment{}, fmt.Errorf("emulate: %w", err)
	}
	if err := d.Validate(); err != nil {
		return gpumodel.Deployment{}, fmt.Errorf("emulate: %w", err)
	}
	return d, nil
}

// servedName is the model name the replica reports.
func (c Config) servedName() string {
	if c.ServedModelName != "" {
		return c.ServedModelName
	}
	return c.Model
}
