package gpumodel

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// ErrDoesNotFit is returned (wrapped) by Deployment.Validate when the weights,
// activation reserve and non-torch memory leave no room for a single KV block.
var ErrDoesNotFit = errors.New("gpumodel: model does not fit in the memory budget")

// DefaultMemoryUtilization is vLLM's default gpu_memory_utilization, the
// fraction (0..1] of each GPU's memory a replica may use (vllm/config/cache.py
// in released versions; the newest main branch has moved to 0.92).
const DefaultMemoryUtilization = 0.9

// DefaultBlockSize is vLLM's KV block size in tokens (CacheConfig.DEFAULT_BLOCK_SIZE).
const DefaultBlockSize = 16

// Overheads are the fixed costs of a scheduler step that do not depend on the
// amount of math or memory traffic: CPU scheduling, kernel launches, sampling.
type Overheads struct {
	// PerStep is paid once per scheduler step.
	PerStep time.Duration `json:"per_step" yaml:"per_step"`
	// PerLayer is paid once per transformer layer per step.
	PerLayer time.Duration `json:"per_layer" yaml:"per_layer"`
	// PerRequest is paid once per prefill chunk or decode sequence in the step.
	PerRequest time.Duration `json:"per_request" yaml:"per_request"`
}

// DefaultOverheads returns BLIS's fitted trained-physics constants for vLLM on
// H100 (β7 ≈ 126 µs/step, β5 ≈ 32 µs/layer, β6 ≈ 4 µs/request;
// inference-sim/inference-sim, trained-physics latency model).
func DefaultOverheads() Overheads {
	return Overheads{PerStep: 126 * time.Microsecond, PerLayer: 32 * time.Microsecond, PerRequest: 4 * time.Microsecond}
}

// Validate reports every negative overhead, joined, or nil.
func (o Overheads) Validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"per_step", o.PerStep}, {"per_layer", o.PerLayer}, {"per_request", o.PerRequest}} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("gpumodel: overhead %s must not be negative, got %v", f.name, f.v))
		}
	}
	return errors.Join(errs...)
}

// Deployment is one vLLM replica: a model sharded over TP identical GPUs, with
// the engine settings that decide its KV capacity and batch limits.
type Deployment struct {
	// GPU is the accelerator each of the TP shards runs on.
	GPU GPU
	// Model is the served model.
	Model Model
	// TP is the tensor-parallel size (GPUs per replica), at least 1.
	TP int
	// Quantization is the weights' quantization (vLLM's --quantization); DefaultDeployment
	// takes the model's.
	Quantization Quantization
	// MemoryUtilization is vLLM's gpu_memory_utilization, in (0, 1].
	MemoryUtilization float64
	// BlockSize is the KV block size in tokens.
	BlockSize int
	// KVDTypeBytes is the size in bytes of one KV-cache element (1 for an FP8 cache).
	KVDTypeBytes int
	// MaxNumBatchedTokens is the per-step token budget.
	MaxNumBatchedTokens int
	// MaxNumSeqs is the most sequences one step may hold.
	MaxNumSeqs int
	// ActivationReserveBytes is the per-GPU peak activation memory vLLM's
	// profiling run reserves.
	ActivationReserveBytes int64
	// NonTorchBytes is the per-GPU memory outside PyTorch's allocator (CUDA
	// context, NCCL buffers).
	NonTorchBytes int64
	// Overheads are the fixed per-step, per-layer and per-request costs.
	Overheads Overheads
	// DisableCustomAllReduce is vLLM's --disable-custom-all-reduce: every tensor-parallel
	// all-reduce runs through NCCL (GPU.LinkLatency).
	DisableCustomAllReduce bool
}

// customAllReduceMaxBytes is the largest tensor vLLM's custom all-reduce takes, exclusive
// (CustomAllreduce's max_size, 8 MiB; see GPU.CustomAllReduceLatency).
const customAllReduceMaxBytes = 8 << 20

// customAllReduceSizes are the tensor-parallel sizes vLLM's custom all-reduce supports.
var customAllReduceSizes = map[int]bool{2: true, 4: true, 6: true, 8: true}

// usesCustomAllReduce reports whether d's small all-reduces run through vLLM's custom
// kernel: TP 2, 4, 6 or 8, not disabled, on a GPU with a measured latency for it.
func (d Deployment) usesCustomAllReduce() bool {
	return customAllReduceSizes[d.TP] && !d.DisableCustomAllReduce && d.GPU.CustomAllReduceLatency > 0
}

// DefaultDeployment returns a replica of m on tp GPUs of type g with vLLM's
// defaults: the model's quantization, memory utilization 0.9, 16-token blocks,
// KV in the model's (unquantized) dtype (kv_cache_dtype=auto),
// the per-GPU batch limits of DefaultMaxNumBatchedTokens and DefaultMaxNumSeqs,
// an activation reserve from EstimateActivationReserve, non-torch memory from
// DefaultNonTorchBytes and DefaultOverheads. Call Validate before use.
func DefaultDeployment(g GPU, m Model, tp int) Deployment {
	tokens, seqs := DefaultMaxNumBatchedTokens(g), DefaultMaxNumSeqs(g)
	return Deployment{
		GPU: g, Model: m, TP: tp, Quantization: m.Quantization,
		MemoryUtilization:      DefaultMemoryUtilization,
		BlockSize:              DefaultBlockSize,
		KVDTypeBytes:           m.DTypeBytes,
		MaxNumBatchedTokens:    tokens,
		MaxNumSeqs:             seqs,
		ActivationReserveBytes: EstimateActivationReserve(m, tp, tokens, seqs),
		NonTorchBytes:          DefaultNonTorchBytes(tp),
		Overheads:              DefaultOverheads(),
	}
}

// usesLargeBatchDefaults mirrors vLLM's get_batch_defaults: GPUs with at least
// 70 GiB that are not A100s get the large defaults (PR #17885 found large
// budgets reduce A100 throughput).
func usesLargeBatchDefaults(g GPU) bool {
	return g.MemoryBytes >= 70*GiB && !strings.Contains(strings.ToLower(g.Name), "a100")
}

// DefaultMaxNumBatchedTokens returns vLLM's OpenAI-server default per-step
// token budget for g: 8192 on GPUs with ≥ 70 GiB that are not A100s
// (H100, H200), else 2048 (vllm/engine/arg_utils.py get_batch_defaults).
func DefaultMaxNumBatchedTokens(g GPU) int {
	if usesLargeBatchDefaults(g) {
		return 8192
	}
	return 2048
}

// DefaultMaxNumSeqs returns vLLM's default max_num_seqs for g: 1024 on GPUs
// with ≥ 70 GiB that are not A100s, else 256.
func DefaultMaxNumSeqs(g GPU) int {
	if usesLargeBatchDefaults(g) {
		return 1024
	}
	return 256
}

// DefaultNonTorchBytes returns the per-GPU non-torch memory llm-d's capacity
// planner assumes: 0.15 GiB at TP 1 and 0.6 GiB above (NCCL buffers).
func DefaultNonTorchBytes(tp int) int64 {
	if tp > 1 {
		return gib(0.6)
	}
	return gib(0.15)
}

// EstimateActivationReserve estimates, in bytes per GPU, the peak activation
// memory vLLM's profiling run measures: one forward pass of maxNumBatchedTokens
// tokens (the MLP's gate, up and activation outputs, 3 × intermediate/TP, plus
// about four hidden-width buffers; a mixture of experts holds them for each of the
// ActiveExperts a token runs) and the sampler's three float32 copies
// (logits, probabilities, log-probabilities) of the vocabulary for
// min(maxNumSeqs, maxNumBatchedTokens) sequences. It reproduces vLLM's logged
// "PyTorch activation peak memory" for Llama-3.1-8B (≈1.2 GiB) and the two
// published TP capacities in testdata/calibration.json to about 1%.
func EstimateActivationReserve(m Model, tp, maxNumBatchedTokens, maxNumSeqs int) int64 {
	if tp < 1 {
		tp = 1
	}
	t := int64(maxNumBatchedTokens)
	seqs := int64(min(maxNumSeqs, maxNumBatchedTokens))
	forward := t * (3*int64(m.Intermediate/tp)*int64(m.ActiveExperts()) + 4*int64(m.Hidden)) * int64(m.DTypeBytes)
	sampler := 3 * seqs * int64(m.Vocab) * 4
	return max(forward, 0) + max(sampler, 0)
}

// Validate reports every problem with d, joined, or nil. A deployment whose
// weights leave no room for a KV block fails with an error wrapping ErrDoesNotFit.
func (d Deployment) Validate() error {
	errs := []error{d.GPU.Validate(), d.Model.Validate(), d.Overheads.Validate(), d.Quantization.Validate()}
	if d.TP < 1 {
		errs = append(errs, fmt.Errorf("gpumodel: tp must be at least 1, got %d", d.TP))
	} else if d.Model.Heads > 0 && d.Model.KVHeads > 0 {
		if d.Model.Heads%d.TP != 0 {
			errs = append(errs, fmt.Errorf("gpumodel: tp %d must divide the %d attention heads of %q", d.TP, d.Model.Heads, d.Model.Name))
		}
		if d.Model.KVHeads%d.TP != 0 && d.TP%d.Model.KVHeads != 0 {
			errs = append(errs, fmt.Errorf("gpumodel: tp %d and the %d kv heads of %q must divide one another", d.TP, d.Model.KVHeads, d.Model.Name))
		}
	}
	if d.Quantization == QuantMXFP4 && d.Model.Experts == 0 {
		errs = append(errs, fmt.Errorf("gpumodel: quantization mxfp4 quantizes experts; %q has none", d.Model.Name))
	}
	if !(d.MemoryUtilization > 0 && d.MemoryUtilization <= 1) {
		errs = append(errs, fmt.Errorf("gpumodel: memory utilization must be in (0, 1], got %v", d.MemoryUtilization))
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"block size", int64(d.BlockSize)}, {"kv dtype bytes", int64(d.KVDTypeBytes)},
		{"max_num_batched_tokens", int64(d.MaxNumBatchedTokens)}, {"max_num_seqs", int64(d.MaxNumSeqs)},
	} {
		if f.v <= 0 {
			errs = append(errs, fmt.Errorf("gpumodel: %s must be positive, got %d", f.name, f.v))
		}
	}
	if d.ActivationReserveBytes < 0 || d.NonTorchBytes < 0 {
		errs = append(errs, fmt.Errorf("gpumodel: activation reserve (%d) and non-torch bytes (%d) must not be negative",
			d.ActivationReserveBytes, d.NonTorchBytes))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if d.KVBlocks() < 1 {
		return fmt.Errorf("%w: %s on %d x %s needs %.2f GiB per GPU before any KV cache, budget %.2f GiB",
			ErrDoesNotFit, d.Model.Name, d.TP, d.GPU.Name,
			float64(d.WeightBytesPerGPU()+d.ActivationReserveBytes+d.NonTorchBytes)/GiB,
			d.MemoryUtilization*float64(d.GPU.MemoryBytes)/GiB)
	}
	return nil
}

// WeightBytesPerGPU returns the bytes of weights each GPU holds: all
// parameters, embeddings included, split evenly over TP; the linear weights
// take one byte each under QuantFP8.
func (d Deployment) WeightBytesPerGPU() int64 {
	return quantizedWeightBytes(d.Model, d.Quantization) / int64(max(d.TP, 1))
}

// KVHeadsPerGPU returns the KV heads each GPU stores: KVHeads/TP, or one
// replicated head when TP exceeds KVHeads (as vLLM does).
func (d Deployment) KVHeadsPerGPU() int {
	return max(1, d.Model.KVHeads/max(d.TP, 1))
}

// KVBytesPerTokenPerGPU returns the KV-cache bytes one token occupies on each
// GPU: 2 × full-attention layers × KV heads per GPU × head dim × KV dtype bytes
// (sliding-window layers hold a bounded window per request instead; see moe.go).
func (d Deployment) KVBytesPerTokenPerGPU() int64 {
	return 2 * int64(d.Model.FullAttentionLayers()) * int64(d.KVHeadsPerGPU()) * int64(d.Model.HeadDim) * int64(d.KVDTypeBytes)
}

// KVBytesPerToken returns the KV-cache bytes one token occupies in the whole replica,
// counting each KV head once (not its replicas when TP exceeds KVHeads): 2 ×
// full-attention layers × KV heads × head dim × KV dtype bytes. It is what a KV transfer
// moves per prompt token beyond the sliding window (KVTransferBytes).
func (d Deployment) KVBytesPerToken() int64 {
	return 2 * int64(d.Model.FullAttentionLayers()) * int64(d.Model.KVHeads) * int64(d.Model.HeadDim) * int64(d.KVDTypeBytes)
}

// KVTransferBytes returns the bytes a KV transfer of tokens prompt tokens moves from one
// replica to another: KVBytesPerToken per token for the full-attention layers, and the
// sliding-window layers' last min(tokens, SlidingWindow) tokens: with the hybrid KV cache
// manager on (llm-d's P/D pods pass --no-disable-hybrid-kv-cache-manager), vLLM's NIXL
// connector reads only the blocks each KV cache group holds (vllm-project/vllm PR #35758,
// "Support HMA+NixlConnector"). Block rounding is left out. 0 for tokens ≤ 0.
func (d Deployment) KVTransferBytes(tokens int) int64 {
	if tokens <= 0 {
		return 0
	}
	m := d.Model
	window := 2 * int64(m.SlidingLayers) * int64(m.KVHeads) * int64(m.HeadDim) * int64(d.KVDTypeBytes) * int64(min(tokens, m.SlidingWindow))
	return int64(tokens)*d.KVBytesPerToken() + window
}

// KVCacheBytesPerGPU returns the bytes each GPU has left for KV cache:
// utilization × memory − weights/TP − activation reserve − non-torch memory.
// It may be negative when the model does not fit.
func (d Deployment) KVCacheBytesPerGPU() int64 {
	budget := math.Floor(d.MemoryUtilization * float64(d.GPU.MemoryBytes))
	return int64(budget) - d.WeightBytesPerGPU() - d.ActivationReserveBytes - d.NonTorchBytes
}

// KVBlocks returns the number of KV blocks the replica has (the minimum over
// its identical GPUs), or 0 when the model does not fit.
func (d Deployment) KVBlocks() int {
	per := d.KVBytesPerTokenPerGPU() * int64(d.BlockSize)
	avail := d.KVCacheBytesPerGPU()
	if per <= 0 || avail <= 0 {
		return 0
	}
	return int(avail / per)
}

// KVCapacityTokens returns KVBlocks × BlockSize, the "GPU KV cache size" in
// tokens that vLLM logs at start-up.
func (d Deployment) KVCapacityTokens() int {
	return d.KVBlocks() * d.BlockSize
}

// DefaultNICGbps is the KV transfer link per GPU, in Gbit/s, of a GPU whose catalog entry
// gives none: one 400 Gb/s RDMA NIC per GPU, as HGX H100/H200 systems carry.
const DefaultNICGbps = 400

// TransferBandwidth returns the bytes per second a replica moves KV at over its TP GPUs'
// NICs together (each TP rank moves its shard of the heads): gbps per GPU when above 0,
// else the GPU's NICGbps, else DefaultNICGbps.
func (d Deployment) TransferBandwidth(gbps float64) float64 {
	if !(gbps > 0) {
		gbps = d.GPU.NICGbps
	}
	if !(gbps > 0) {
		gbps = DefaultNICGbps
	}
	return gbps * 1e9 / 8 * float64(max(d.TP, 1))
}
