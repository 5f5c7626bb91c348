package gpumodel

import (
	"fmt"
	"math"
	"strings"
)

// Quantization names how a model's linear weights are stored and multiplied, as vLLM's
// --quantization flag or a checkpoint's quantization_config says. The zero value is no
// quantization: weights in the model's DTypeBytes.
type Quantization string

// The quantizations the step-time and capacity model knows.
const (
	// QuantNone keeps every weight in the model's dtype (BF16 for the built-in models).
	QuantNone Quantization = ""
	// QuantFP8 stores the transformer blocks' linear weights (Q, K, V, output and the three
	// MLP matrices) in FP8, one byte per parameter, as vLLM's `--quantization fp8` and FP8
	// checkpoints such as neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8 do. Embeddings, the LM
	// head and norms stay in the model's dtype, and so does the KV cache unless the deployment
	// sets KVDTypeBytes (vLLM's kv_cache_dtype=auto). On a GPU with FP8 tensor cores
	// (GPU.PeakFP8FLOPS > 0) those matrix multiplies run at the FP8 peak (W8A8); elsewhere
	// (A100) vLLM runs weight-only FP8 Marlin kernels (W8A16): the weight bytes halve, the math
	// stays at the BF16 peak. Attention and the LM head always run at the BF16 peak.
	QuantFP8 Quantization = "fp8"
	// QuantMXFP4 stores a mixture of experts' expert weights in MXFP4 (OCP microscaling:
	// 4-bit values with one 8-bit scale per 32, 4.25 bits a weight), as openai/gpt-oss
	// checkpoints do (quantization_config quant_method "mxfp4"); attention, the router,
	// embeddings and the LM head stay in the model's dtype. On Hopper and older GPUs vLLM
	// multiplies MXFP4 experts with BF16 activations (weight-only, W4A16), so the math runs
	// at the BF16 peak; only the weight bytes shrink.
	QuantMXFP4 Quantization = "mxfp4"
)

// ParseQuantization reads a quantization name, ignoring case: "fp8", "mxfp4", or "",
// "none" or "auto" for none. Anything else is an error.
func ParseQuantization(s string) (Quantization, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "none", "auto":
		return QuantNone, nil
	case "fp8":
		return QuantFP8, nil
	case "mxfp4":
		return QuantMXFP4, nil
	}
	return QuantNone, fmt.Errorf("gpumodel: unknown quantization %q (want fp8, mxfp4 or none)", s)
}

// Validate reports whether q is a quantization this package models.
func (q Quantization) Validate() error {
	if q != QuantNone && q != QuantFP8 && q != QuantMXFP4 {
		return fmt.Errorf("gpumodel: unknown quantization %q (want fp8, mxfp4 or none)", string(q))
	}
	return nil
}

// linearBytes returns the bytes of one non-expert linear-layer weight of m under q
// (attention projections, the router, a dense MLP).
func linearBytes(m Model, q Quantization) float64 {
	if q == QuantFP8 {
		return 1
	}
	return float64(m.DTypeBytes)
}

// mxfp4Bytes is the size of one MXFP4 weight: 4 bits plus an 8-bit scale per 32.
const mxfp4Bytes = 17.0 / 32

// expertBytes returns the bytes of one expert weight of m under q (a dense MLP's weight
// for a dense model).
func expertBytes(m Model, q Quantization) float64 {
	if q == QuantMXFP4 && m.Experts > 0 {
		return mxfp4Bytes
	}
	return linearBytes(m, q)
}

// quantizedWeightBytes returns the bytes all of m's parameters occupy under q: the
// transformer blocks' linear weights at linearBytes (experts at expertBytes), everything
// else at DTypeBytes.
func quantizedWeightBytes(m Model, q Quantization) int64 {
	if q == QuantNone {
		return m.Params * int64(m.DTypeBytes)
	}
	layers := int64(m.Layers)
	experts := layers * int64(max(m.Experts, 1)) * m.ExpertParams()
	other := layers * (m.LayerAttentionParams() + m.RouterParams())
	rest := max(m.Params-experts-other, 0)
	b := float64(experts)*expertBytes(m, q) + float64(other)*linearBytes(m, q)
	return int64(math.Round(b)) + rest*int64(m.DTypeBytes)
}

// linearPeakFLOPS returns the peak FLOP/s the linear layers of a model quantized with q run
// at on g: the FP8 peak for FP8 weights on a GPU with FP8 tensor cores, else the BF16 peak.
func linearPeakFLOPS(g GPU, q Quantization) float64 {
	if q == QuantFP8 && g.PeakFP8FLOPS > 0 {
		return g.PeakFP8FLOPS
	}
	return g.PeakFLOPS
}

// Llama31x8BFP8 returns Llama-3.1-8B with FP8 linear weights (neuralmagic's W8A8 checkpoint,
// also published as RedHatAI/Llama-3.1-8B-Instruct-FP8): 6.98 GB of FP8 block weights plus
// 2.10 GB of BF16 embeddings, LM head and norms, 9.08 GB in all.
func Llama31x8BFP8() Model {
	m := Llama31x8B()
	m.Name = "Llama-3.1-8B-FP8"
	m.Aliases = []string{"neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", "RedHatAI/Llama-3.1-8B-Instruct-FP8",
		"RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8", "llama-3.1-8b-instruct-fp8"}
	m.Quantization = QuantFP8
	return m
}
