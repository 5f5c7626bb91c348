package gpumodel

import (
	"fmt"
	"math"
)

// How this package prices a mixture of experts and sliding-window attention.
//
// Memory holds every weight: all Experts of every layer (MXFP4 experts at 4.25 bits a
// weight, QuantMXFP4), so the KV budget is what all of them leave. Each token is
// multiplied by LayerActiveParams only (attention, the router and ExpertsPerToken
// experts), so FLOPs follow the active parameters. A step streams the attention and
// router weights once and, per layer, each expert at least one of its tokens was routed
// to: with T tokens routed uniformly and independently, E·(1 − (1 − k/E)^T) experts in
// expectation (ExpectedExpertsTouched). Real routers are not uniform, and a batch's
// tokens are not independent; uniform routing is the simplification, and it streams
// more experts at small batches than a skewed router would.
//
// Sliding-window layers follow vLLM's hybrid KV cache manager
// (vllm/v1/core/kv_cache_utils.py, vllm/v1/core/single_type_kv_cache_manager.py
// SlidingWindowManager): the full-attention and the sliding-window layers form KV cache
// groups of equal page size that share one block pool, a block in the pool holding one
// page of each layer of a group, so the pool has memory / (page × layers per group)
// blocks. A request holds a block per BlockSize tokens in the full-attention group, and
// in the sliding-window group only the blocks its last SlidingWindow tokens touch (the
// rest are freed as it advances: vllm-project/vllm PR #14097; PR #30166 allocates only the
// window's blocks in the first place). KV bytes per token (Model.KVBytesPerToken,
// Deployment.KVBytesPerTokenPerGPU) therefore count the full-attention layers only,
// which is vLLM's capacity when the two groups have as many layers each (gpt-oss: 18
// and 18). Simplification: the sliding-window group's blocks (at most
// ⌈(SlidingWindow−1)/BlockSize⌉+1 a running request) are not charged to the request, so
// capacity is overstated by about (SlidingWindow + BlockSize) tokens per running request
// — 2.5% of a 10,000-token prompt at 128-token blocks. Prefix caching with sliding
// windows is modelled as for full attention.
//
// Attention work in the sliding-window layers reads at most SlidingWindow keys per new
// token; the step prices them at min(pairs, tokens × window), exact for a step of one
// prefill chunk and an upper bound otherwise.

// RouterParams returns the weights of one layer's expert router (hidden × experts);
// 0 for a dense model.
func (m Model) RouterParams() int64 {
	return int64(m.Hidden) * int64(m.Experts)
}

// ActiveExperts returns the MLPs each token runs per layer: ExpertsPerToken for a
// mixture of experts, 1 for a dense model.
func (m Model) ActiveExperts() int {
	if m.Experts > 0 {
		return m.ExpertsPerToken
	}
	return 1
}

// LayerActiveParams returns the linear weights one token is multiplied by in one layer:
// attention, the router and ActiveExperts MLPs. It equals LayerMatmulParams for a dense
// model.
func (m Model) LayerActiveParams() int64 {
	return m.LayerAttentionParams() + int64(m.ActiveExperts())*m.ExpertParams() + m.RouterParams()
}

// ActiveParams returns the parameters one token uses: LayerActiveParams in every layer
// plus the LM head (the figure model cards give as "active parameters").
func (m Model) ActiveParams() int64 {
	return int64(m.Layers)*m.LayerActiveParams() + int64(m.Vocab)*int64(m.Hidden)
}

// FullAttentionLayers returns the layers that attend to the whole context.
func (m Model) FullAttentionLayers() int {
	return m.Layers - m.SlidingLayers
}

// ExpectedExpertsTouched returns how many of a layer's experts a step of tokens tokens
// runs, in expectation, when each token picks ExpertsPerToken of Experts uniformly:
// E·(1 − (1 − k/E)^tokens). A dense model always runs its one MLP (1), and no tokens run
// none (0).
func (m Model) ExpectedExpertsTouched(tokens float64) float64 {
	if tokens <= 0 {
		return 0
	}
	if m.Experts <= 0 {
		return 1
	}
	return expertsTouched(float64(m.Experts), missLog(m), tokens)
}

// missLog is log(1 − k/E): the log-probability that one token routes past a given expert.
func missLog(m Model) float64 { return math.Log1p(-float64(m.ExpertsPerToken) / float64(m.Experts)) }

// expertsTouched is E × (1 − (1 − k/E)^tokens), from missLog's value, for tokens > 0.
func expertsTouched(experts, missLog, tokens float64) float64 {
	return -experts * math.Expm1(tokens*missLog)
}

func (m Model) validateMoE() []error {
	var errs []error
	switch {
	case m.Experts < 0 || m.Experts > 1<<16:
		errs = append(errs, fmt.Errorf("gpumodel: model %q: experts must be in [0, 65536], got %d", m.Name, m.Experts))
	case m.Experts == 0 && m.ExpertsPerToken != 0:
		errs = append(errs, fmt.Errorf("gpumodel: model %q: experts_per_token %d needs experts", m.Name, m.ExpertsPerToken))
	case m.Experts > 0 && (m.ExpertsPerToken < 1 || m.ExpertsPerToken > m.Experts):
		errs = append(errs, fmt.Errorf("gpumodel: model %q: experts_per_token must be in [1, %d], got %d", m.Name, m.Experts, m.ExpertsPerToken))
	}
	if m.SlidingLayers < 0 || m.SlidingLayers >= m.Layers || m.SlidingWindow < 0 || (m.SlidingLayers > 0) != (m.SlidingWindow > 0) {
		errs = append(errs, fmt.Errorf("gpumodel: model %q: sliding_layers (%d) must be in [0, layers) and set with a positive sliding_window (%d)",
			m.Name, m.SlidingLayers, m.SlidingWindow))
	}
	if m.Quantization == QuantMXFP4 && m.Experts == 0 {
		errs = append(errs, fmt.Errorf("gpumodel: model %q: quantization mxfp4 quantizes experts; the model has none", m.Name))
	}
	return errs
}

// Sources for the gpt-oss presets: huggingface/transformers@02b8f42b
// src/transformers/models/gpt_oss/configuration_gpt_oss.py, whose defaults are
// openai/gpt-oss-120b's config.json (36 layers, 128 local experts, 4 per token, hidden
// and expert intermediate 2880, 64 query and 8 KV heads of 64, vocabulary 201,088,
// untied embeddings, sliding window 128 in every other layer starting with the first,
// MXFP4 experts; attention sinks are one scalar per head, left out). gpt-oss-20b has 24
// layers and 32 experts with the same widths (openai/gpt-oss-20b config.json). Params
// are the model card's totals (116.83B and 20.91B; active 5.13B and 3.61B); the
// checkpoints are 60.8 and 12.8 GiB, which QuantMXFP4's 4.25 bits per expert weight
// and BF16 elsewhere reproduce to 0.1 GiB.

// GptOss120B returns openai/gpt-oss-120b: 36 layers (18 with a 128-token sliding
// window), 128 experts of which 4 run per token, MXFP4 experts.
func GptOss120B() Model {
	return Model{
		Name:    "gpt-oss-120b",
		Aliases: []string{"openai/gpt-oss-120b", "gpt-oss-120B"},
		Layers:  36, Hidden: 2880, Heads: 64, KVHeads: 8, HeadDim: 64,
		Intermediate: 2880, Vocab: 201088, Params: 116_830_000_000, DTypeBytes: 2,
		Experts: 128, ExpertsPerToken: 4, SlidingWindow: 128, SlidingLayers: 18,
		Quantization: QuantMXFP4,
	}
}

// GptOss20B returns openai/gpt-oss-20b: 24 layers (12 with a 128-token sliding window),
// 32 experts of which 4 run per token, MXFP4 experts.
func GptOss20B() Model {
	m := GptOss120B()
	m.Name, m.Aliases = "gpt-oss-20b", []string{"openai/gpt-oss-20b", "gpt-oss-20B"}
	m.Layers, m.SlidingLayers, m.Experts, m.Params = 24, 12, 32, 20_910_000_000
	return m
}
