package gpumodel

import (
	"errors"
	"fmt"
)

// Model describes a decoder-only transformer with grouped-query attention and gated
// (SwiGLU) MLPs: dense (one MLP per layer), or a mixture of experts (Experts routed MLPs
// per layer, ExpertsPerToken of them run per token), optionally with sliding-window
// attention in some layers (moe.go).
type Model struct {
	// Name is the canonical catalog name, such as "Llama-3.1-8B".
	Name string
	// Aliases are other names LookupModel accepts (Hugging Face ids, for
	// example), compared case-insensitively.
	Aliases []string
	// Layers is the number of transformer blocks.
	Layers int
	// Hidden is the residual-stream width.
	Hidden int
	// Heads is the number of query heads.
	Heads int
	// KVHeads is the number of key/value heads (Heads for multi-head attention).
	KVHeads int
	// HeadDim is the width of one attention head.
	HeadDim int
	// Intermediate is the MLP inner width (of each expert, for a mixture of experts).
	Intermediate int
	// Experts is the number of routed MLP experts per layer (num_local_experts); 0 for a
	// dense model.
	Experts int
	// ExpertsPerToken is the number of experts each token runs (num_experts_per_tok),
	// in [1, Experts]; 0 for a dense model.
	ExpertsPerToken int
	// SlidingWindow is the attention window, in tokens, of the sliding-window layers;
	// 0 when every layer attends to the whole context.
	SlidingWindow int
	// SlidingLayers is how many of the Layers use sliding-window attention; the others
	// attend to the whole context. 0 when SlidingWindow is 0.
	SlidingLayers int
	// Vocab is the vocabulary size.
	Vocab int
	// Params is the total parameter count, embeddings included.
	Params int64
	// DTypeBytes is the size in bytes of one unquantized weight, activation and KV element
	// (2 for BF16).
	DTypeBytes int
	// Quantization is the checkpoint's weight quantization (QuantNone or QuantFP8);
	// DefaultDeployment copies it into Deployment.Quantization.
	Quantization Quantization
	// TiedEmbeddings is true when the output projection reuses the input
	// embedding table.
	TiedEmbeddings bool
}

// Validate reports every problem with m, joined, or nil when m is usable.
func (m Model) Validate() error {
	var errs []error
	if m.Name == "" {
		errs = append(errs, errors.New("gpumodel: model name is empty"))
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"layers", int64(m.Layers)}, {"hidden", int64(m.Hidden)}, {"heads", int64(m.Heads)},
		{"kv_heads", int64(m.KVHeads)}, {"head_dim", int64(m.HeadDim)},
		{"intermediate", int64(m.Intermediate)}, {"vocab", int64(m.Vocab)},
		{"params", m.Params}, {"dtype_bytes", int64(m.DTypeBytes)},
	} {
		if f.v <= 0 {
			errs = append(errs, fmt.Errorf("gpumodel: model %q: %s must be positive, got %d", m.Name, f.name, f.v))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if m.Layers > maxLayers || m.DTypeBytes > 8 || m.Params > maxParams {
		errs = append(errs, fmt.Errorf("gpumodel: model %q: layers (%d), dtype_bytes (%d) or params (%d) above the limits %d, 8, %d",
			m.Name, m.Layers, m.DTypeBytes, m.Params, maxLayers, maxParams))
	}
	if err := m.Quantization.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("gpumodel: model %q: %w", m.Name, err))
	}
	errs = append(errs, m.validateMoE()...)
	if m.KVHeads > m.Heads || m.Heads%m.KVHeads != 0 {
		errs = append(errs, fmt.Errorf("gpumodel: model %q: heads (%d) must be a multiple of kv_heads (%d)", m.Name, m.Heads, m.KVHeads))
	}
	// The shapes imply a parameter count; a Params far from it is a typo.
	// (Computed in float64: unvalidated shapes may overflow int64.)
	if d := m.shapeParamsFloat(); float64(m.Params) < d/2 || float64(m.Params) > 2*d {
		errs = append(errs, fmt.Errorf("gpumodel: model %q: params %d is not within 2x of the %0.f its shapes imply", m.Name, m.Params, d))
	}
	return errors.Join(errs...)
}

// LayerMatmulParams returns the linear weights one transformer block holds: the Q, K,
// V and output projections and the three matrices of each MLP (every expert's, and the
// router, for a mixture of experts). A dense model multiplies each token by all of them;
// LayerActiveParams is what one token of a mixture of experts is multiplied by.
func (m Model) LayerMatmulParams() int64 {
	return m.LayerAttentionParams() + int64(max(m.Experts, 1))*m.ExpertParams() + m.RouterParams()
}

// LayerAttentionParams returns one block's Q, K, V and output projection weights.
func (m Model) LayerAttentionParams() int64 {
	h, hd := int64(m.Hidden), int64(m.HeadDim)
	return 2*h*int64(m.Heads)*hd + 2*h*int64(m.KVHeads)*hd
}

// ExpertParams returns the weights of one MLP (gate, up and down projections): the
// dense model's MLP, or one expert.
func (m Model) ExpertParams() int64 {
	return 3 * int64(m.Hidden) * int64(m.Intermediate)
}

// Limits that keep every derived count of a valid Model within int64.
const (
	maxLayers = 1 << 16
	maxParams = 1 << 50
)

func (m Model) shapeParamsFloat() float64 {
	h, hd := float64(m.Hidden), float64(m.HeadDim)
	experts := float64(max(m.Experts, 1))
	layer := 2*h*float64(m.Heads)*hd + 2*h*float64(m.KVHeads)*hd + experts*3*h*float64(m.Intermediate) + h*float64(m.Experts)
	emb := float64(m.Vocab) * h
	if !m.TiedEmbeddings {
		emb *= 2
	}
	return float64(m.Layers)*layer + emb
}

// ShapeParams returns the parameter count implied by the shapes (matrices and
// embeddings; norms and biases are ignored), for checking Params. It is exact
// for a Model that passes Validate.
func (m Model) ShapeParams() int64 {
	emb := int64(m.Vocab) * int64(m.Hidden)
	if !m.TiedEmbeddings {
		emb *= 2
	}
	return int64(m.Layers)*m.LayerMatmulParams() + emb
}

// KVBytesPerToken returns the KV-cache bytes one token occupies across all GPUs in the
// layers that attend to the whole context: 2 (K and V) × full-attention layers × KV heads
// × head dim × dtype bytes. Sliding-window layers hold at most their window per request
// whatever its length, so they add nothing per token (see moe.go).
func (m Model) KVBytesPerToken() int64 {
	return 2 * int64(m.FullAttentionLayers()) * int64(m.KVHeads) * int64(m.HeadDim) * int64(m.DTypeBytes)
}

// WeightBytes returns the bytes all of the model's parameters occupy: DTypeBytes each, except
// the linear weights of an FP8 model (Quantization), which take one byte.
func (m Model) WeightBytes() int64 {
	return quantizedWeightBytes(m, m.Quantization)
}

// Sources for the presets below: the Hugging Face config.json of each model (the same
// values BLIS ships in model_configs/*/config.json); KV bytes per token and BF16 weight
// sizes follow from them (2 × layers × KV heads × head dim × bytes). Qwen3-32B's shapes are
// those of Qwen/Qwen3-32B's config.json; Qwen3-14B's those of Qwen/Qwen3-14B's (a copy is in
// citsjtu2020/LLM-Prof sglang/Model_Config.md): untied embeddings, 14.8B parameters of which
// 13.2B outside the embeddings, as its model card gives. Params are the
// exact counts of the released checkpoints (embeddings included).

// Llama31x8B returns Llama-3.1-8B (same shapes as Llama-3-8B): 32 layers, GQA 32/8.
func Llama31x8B() Model {
	return Model{
		Name: "Llama-3.1-8B",
		Aliases: []string{"meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-8B-Instruct",
			"meta-llama/Meta-Llama-3.1-8B-Instruct", "meta-llama/Meta-Llama-3-8B", "llama-3-8b"},
		Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128,
		Intermediate: 14336, Vocab: 128256, Params: 8_030_261_248, DTypeBytes: 2,
	}
}

// Llama31x70B returns Llama-3.1-70B: 80 layers, GQA 64/8.
func Llama31x70B() Model {
	return Model{
		Name: "Llama-3.1-70B",
		Aliases: []string{"meta-llama/Llama-3.1-70B", "meta-llama/Llama-3.1-70B-Instruct",
			"meta-llama/Meta-Llama-3.1-70B-Instruct"},
		Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, HeadDim: 128,
		Intermediate: 28672, Vocab: 128256, Params: 70_553_706_496, DTypeBytes: 2,
	}
}

// Qwen25x7B returns Qwen2.5-7B: 28 layers, GQA 28/4.
func Qwen25x7B() Model {
	return Model{
		Name:    "Qwen2.5-7B",
		Aliases: []string{"Qwen/Qwen2.5-7B", "Qwen/Qwen2.5-7B-Instruct"},
		Layers:  28, Hidden: 3584, Heads: 28, KVHeads: 4, HeadDim: 128,
		Intermediate: 18944, Vocab: 152064, Params: 7_615_616_512, DTypeBytes: 2,
	}
}

// Mistral7B returns Mistral-7B v0.3 (v0.1 differs only in its 32,000-token vocabulary).
func Mistral7B() Model {
	return Model{
		Name: "Mistral-7B",
		Aliases: []string{"mistralai/Mistral-7B-v0.3", "mistralai/Mistral-7B-Instruct-v0.3",
			"mistral-7b-v0.3"},
		Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128,
		Intermediate: 14336, Vocab: 32768, Params: 7_248_023_552, DTypeBytes: 2,
	}
}

// Llama2x7B returns Llama-2-7B: 32 layers, multi-head attention (32 KV heads).
func Llama2x7B() Model {
	return Model{
		Name:    "Llama-2-7B",
		Aliases: []string{"meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-7b-chat-hf"},
		Layers:  32, Hidden: 4096, Heads: 32, KVHeads: 32, HeadDim: 128,
		Intermediate: 11008, Vocab: 32000, Params: 6_738_415_616, DTypeBytes: 2,
	}
}

// Llama2x13B returns Llama-2-13B: 40 layers, multi-head attention (40 KV heads), hidden 5120
// (meta-llama/Llama-2-13b-hf config.json). It has OPT-13B's layers, width, heads and KV bytes
// per token, and MLP weights within 1.3% of OPT-13B's, so it stands in for the "13B LLM" of
// DistServe's experiments (examples/published/distserve-2p1d.yaml).
func Llama2x13B() Model {
	return Model{
		Name:    "Llama-2-13B",
		Aliases: []string{"meta-llama/Llama-2-13b-hf", "meta-llama/Llama-2-13b-chat-hf"},
		Layers:  40, Hidden: 5120, Heads: 40, KVHeads: 40, HeadDim: 128,
		Intermediate: 13824, Vocab: 32000, Params: 13_015_864_320, DTypeBytes: 2,
	}
}

// Llama2x70B returns Llama-2-70B: 80 layers, GQA 64/8.
func Llama2x70B() Model {
	return Model{
		Name:    "Llama-2-70B",
		Aliases: []string{"meta-llama/Llama-2-70b-hf", "meta-llama/Llama-2-70b-chat-hf"},
		Layers:  80, Hidden: 8192, Heads: 64, KVHeads: 8, HeadDim: 128,
		Intermediate: 28672, Vocab: 32000, Params: 68_976_648_192, DTypeBytes: 2,
	}
}

// Qwen3x14B returns Qwen3-14B: 40 layers, GQA 40/8, head dim 128, untied embeddings.
func Qwen3x14B() Model {
	return Model{
		Name:    "Qwen3-14B",
		Aliases: []string{"Qwen/Qwen3-14B"},
		Layers:  40, Hidden: 5120, Heads: 40, KVHeads: 8, HeadDim: 128,
		Intermediate: 17408, Vocab: 151936, Params: 14_768_307_200, DTypeBytes: 2,
	}
}

// Qwen3x32B returns Qwen3-32B: 64 layers, GQA 64/8, head dim 128 (wider than hidden/heads).
func Qwen3x32B() Model {
	return Model{
		Name:    "Qwen3-32B",
		Aliases: []string{"Qwen/Qwen3-32B"},
		Layers:  64, Hidden: 5120, Heads: 64, KVHeads: 8, HeadDim: 128,
		Intermediate: 25600, Vocab: 151936, Params: 32_762_123_264, DTypeBytes: 2,
	}
}
