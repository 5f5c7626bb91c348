package gpumodel

import (
	"errors"
	"fmt"
	"strings"
)

// EngineArgs are the vLLM engine arguments that change a replica's KV capacity or batching.
// A zero field keeps vLLM's default for the GPU and model (DefaultDeployment).
type EngineArgs struct {
	// GPUMemoryUtilization is --gpu-memory-utilization (vLLM's default 0.9).
	GPUMemoryUtilization float64
	// Quantization is --quantization: fp8, or none (empty: the model's own weights).
	Quantization string
	// KVCacheDType is --kv-cache-dtype: auto (empty: the model's dtype) or fp8.
	KVCacheDType string
	// MaxNumBatchedTokens and MaxNumSeqs are the per-step token budget and sequence cap.
	MaxNumBatchedTokens, MaxNumSeqs int
	// DisableCustomAllReduce is --disable-custom-all-reduce (all-reduces through NCCL).
	DisableCustomAllReduce bool
}

// Deployment returns vLLM's replica of m on tp GPUs g with a applied. The activation reserve
// follows the batch limits, as vLLM's profiling run does (EstimateActivationReserve). Each
// error names the argument, in vLLM's snake_case spelling.
func (a EngineArgs) Deployment(g GPU, m Model, tp int) (Deployment, error) {
	var errs []error
	d := DefaultDeployment(g, m, tp)
	if a.GPUMemoryUtilization > 0 {
		d.MemoryUtilization = a.GPUMemoryUtilization
	}
	if a.Quantization != "" {
		q, err := ParseQuantization(a.Quantization)
		if err != nil {
			errs = append(errs, fmt.Errorf("quantization: %w", err))
		}
		d.Quantization = q
	}
	switch strings.ToLower(strings.TrimSpace(a.KVCacheDType)) {
	case "", "auto":
	case "fp8", "fp8_e4m3", "fp8_e5m2":
		d.KVDTypeBytes = 1
	default:
		errs = append(errs, fmt.Errorf("kv_cache_dtype %q: want auto or fp8", a.KVCacheDType))
	}
	if a.MaxNumBatchedTokens < 0 || a.MaxNumSeqs < 0 {
		errs = append(errs, fmt.Errorf("max_num_batched_tokens (%d) and max_num_seqs (%d) must be >= 0",
			a.MaxNumBatchedTokens, a.MaxNumSeqs))
	}
	if a.MaxNumBatchedTokens > 0 {
		d.MaxNumBatchedTokens = a.MaxNumBatchedTokens
	}
	if a.MaxNumSeqs > 0 {
		d.MaxNumSeqs = a.MaxNumSeqs
	}
	d.DisableCustomAllReduce = a.DisableCustomAllReduce
	d.ActivationReserveBytes = EstimateActivationReserve(m, tp, d.MaxNumBatchedTokens, d.MaxNumSeqs)
	return d, errors.Join(errs...)
}
