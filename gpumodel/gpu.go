package gpumodel

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// GiB is one gibibyte (2^30 bytes), the unit vLLM uses when it logs memory.
const GiB = 1 << 30

// GPU describes one accelerator: its peak numbers and the fraction of them a
// vLLM replica actually reaches. All quantities are per GPU and in SI units.
type GPU struct {
	// Name is the canonical catalog name, such as "H100-SXM-80GB".
	Name string
	// Aliases are other names LookupGPU accepts, compared case-insensitively.
	Aliases []string
	// PeakFLOPS is the dense (no sparsity) BF16 tensor-core peak in FLOP/s.
	PeakFLOPS float64
	// PeakFP8FLOPS is the dense FP8 tensor-core peak in FLOP/s, which the linear layers of
	// an FP8-quantized model reach; 0 when the GPU has no FP8 tensor cores (Ampere), where
	// FP8 weights are multiplied at the BF16 peak.
	PeakFP8FLOPS float64
	// MemoryBytes is the device memory CUDA reports as total, in bytes. vLLM
	// multiplies this (its logged total_gpu_memory) by gpu_memory_utilization,
	// so it is a little below the marketed capacity.
	MemoryBytes int64
	// MemoryBandwidth is the peak device-memory (HBM or GDDR) bandwidth in bytes/s.
	MemoryBandwidth float64
	// LinkBandwidth is the per-direction bandwidth in bytes/s of the link that
	// carries tensor-parallel all-reduce (NVLink, or PCIe where there is none).
	LinkBandwidth float64
	// LinkLatency is the fixed cost of one small tensor-parallel all-reduce run by NCCL.
	LinkLatency time.Duration
	// CustomAllReduceLatency is the fixed cost of one all-reduce run by vLLM's custom
	// all-reduce kernel, which vLLM uses instead of NCCL for tensors under 8 MiB at TP 2, 4, 6
	// or 8 (Pricer); 0 when unmeasured, and then NCCL's LinkLatency prices every all-reduce.
	CustomAllReduceLatency time.Duration
	// HostBandwidth is the one-way GPU↔host (PCIe) copy bandwidth in bytes/s that a KV
	// offload to CPU memory reaches, per GPU; 0 when unknown (a replica cannot then offload
	// unless its configuration gives one).
	HostBandwidth float64
	// NICGbps is the scale-out network bandwidth in Gbit/s per GPU and direction (its RDMA
	// NIC: InfiniBand or RoCE) that carries KV transfers between replicas of a
	// prefill/decode fleet; 0 when unknown.
	NICGbps float64
	// Efficiency holds the fractions of the peaks a replica reaches.
	Efficiency Efficiency
}

// Efficiency holds the fractions (each in (0, 1]) of a GPU's peak numbers that
// the step-time model assumes. They are per GPU and may be overridden.
type Efficiency struct {
	// PrefillMFU is the fraction of PeakFLOPS reached by prefill work, whose
	// matrix multiplies are compute-bound and overlap the weight stream.
	PrefillMFU float64 `json:"prefill_mfu" yaml:"prefill_mfu"`
	// DecodeMFU is the fraction of PeakFLOPS reached by the math of decode
	// tokens; it joins prefill's on the compute side of the roofline (see
	// Pricer).
	DecodeMFU float64 `json:"decode_mfu" yaml:"decode_mfu"`
	// Memory is the fraction of MemoryBandwidth reached when streaming
	// weights and KV cache.
	Memory float64 `json:"memory" yaml:"memory"`
	// Link is the fraction of LinkBandwidth reached by all-reduce transfers.
	Link float64 `json:"link" yaml:"link"`
	// ExpertMFU is the fraction of PeakFLOPS a mixture of experts' expert matrix multiplies
	// reach (grouped GEMMs of a few rows per expert, weight-only quantized); 0 means
	// PrefillMFU. Their FLOPs are priced at PrefillMFU/ExpertMFU times a dense layer's.
	ExpertMFU float64 `json:"expert_mfu,omitempty" yaml:"expert_mfu,omitempty"`
}

// Validate reports every problem with e, joined, or nil when each fraction
// lies in (0, 1].
func (e Efficiency) Validate() error {
	var errs []error
	check := func(name string, v float64) {
		if !(v > 0 && v <= 1) { // also rejects NaN
			errs = append(errs, fmt.Errorf("gpumodel: efficiency %s must be in (0, 1], got %v", name, v))
		}
	}
	check("prefill_mfu", e.PrefillMFU)
	check("decode_mfu", e.DecodeMFU)
	check("memory", e.Memory)
	check("link", e.Link)
	if e.ExpertMFU != 0 {
		check("expert_mfu", e.ExpertMFU)
	}
	return errors.Join(errs...)
}

// Validate reports every problem with g, joined, or nil when g is usable.
func (g GPU) Validate() error {
	var errs []error
	if g.Name == "" {
		errs = append(errs, errors.New("gpumodel: gpu name is empty"))
	}
	pos := func(name string, v float64) {
		if !(v > 0) || math.IsInf(v, 0) {
			errs = append(errs, fmt.Errorf("gpumodel: gpu %q: %s must be positive and finite, got %v", g.Name, name, v))
		}
	}
	pos("peak FLOP/s", g.PeakFLOPS)
	if !(g.PeakFP8FLOPS >= 0) || math.IsInf(g.PeakFP8FLOPS, 0) {
		errs = append(errs, fmt.Errorf("gpumodel: gpu %q: peak FP8 FLOP/s must be zero (none) or positive and finite, got %v", g.Name, g.PeakFP8FLOPS))
	}
	pos("memory bytes", float64(g.MemoryBytes))
	pos("memory bandwidth", g.MemoryBandwidth)
	pos("link bandwidth", g.LinkBandwidth)
	if !(g.HostBandwidth >= 0 && !math.IsInf(g.HostBandwidth, 1)) {
		errs = append(errs, fmt.Errorf("gpumodel: gpu %q: host bandwidth must be finite and not negative, got %v", g.Name, g.HostBandwidth))
	}
	if !(g.NICGbps >= 0 && !math.IsInf(g.NICGbps, 1)) {
		errs = append(errs, fmt.Errorf("gpumodel: gpu %q: nic Gbit/s must be finite and not negative, got %v", g.Name, g.NICGbps))
	}
	if g.LinkLatency < 0 || g.CustomAllReduceLatency < 0 {
		errs = append(errs, fmt.Errorf("gpumodel: gpu %q: all-reduce latencies must not be negative, got %v and %v (custom)",
			g.Name, g.LinkLatency, g.CustomAllReduceLatency))
	}
	if err := g.Efficiency.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("gpumodel: gpu %q: %w", g.Name, err))
	}
	return errors.Join(errs...)
}

// Sources for the presets below:
//   - Peak BF16 dense FLOP/s, HBM size and bandwidth: NVIDIA datasheets as collected at
//     https://glennklockwood.com/garden/processors/A100 and .../h100, BLIS (inference-sim)
//     hardware_config.json, and https://itkb.uw.cz/2026/06/nvidia-h200-vs-b300-precisions-cores.html
//     for H200. L40S: BLIS hardware_config.json (362.05 TFLOPS, 0.864 TB/s). L4: NVIDIA
//     L4 datasheet (121 TFLOPS, 0.30 TB/s).
//   - Peak FP8 dense FLOP/s: twice the BF16 peak on Hopper and Ada, as NVIDIA's datasheets give
//     it (with sparsity: H100/H200 SXM 3,958, L40S 1,466, L4 485 TFLOPS; dense is half;
//     BLIS's TFlopsFP8 1979 for H100).
//     Ampere has no FP8 tensor cores.
//   - MemoryBytes: CUDA-visible totals as vLLM logs them ("total_gpu_memory (79.15GiB)",
//     "(39.49GiB)", "(139.81GiB)", "(44.39GiB)", "(22.06GiB)" in public vLLM logs; 80 GB
//     parts log 79.1–79.2 GiB, e.g. 79.22 GiB in vllm-project/vllm PR #10511).
//   - Links: NVLink 3 (A100) 600 GB/s and NVLink 4 (H100/H200) 900 GB/s total, i.e. 300 and
//     450 GB/s per direction; L40S and L4 have no NVLink and use PCIe Gen4 x16 (32 GB/s per
//     direction). LinkLatency is the cost of one small (≤ 256 KB) all-reduce within a node,
//     as Vidur measured it (microsoft/vidur data/profiling/network/{h100_dgx,a100_dgx}/
//     all_reduce.csv @ 7d47513, NCCL all-reduce of FP16 buffers replayed in a CUDA graph by
//     vidur/profiling/collectives/collectives_impl.py): the median over the 96 rows of 2, 4
//     and 8 GPUs on one node is 37 µs on H100 DGX (quartiles 25–40) and 51 µs on A100 DGX
//     (34–61). H200 takes H100's (same NVLink 4 switch). A decode step of a 70B model at TP 4
//     runs 160 of them. L40S and L4 keep an unmeasured 30 µs prior (Vidur has no PCIe
//     all-reduce profile); an all-reduce over PCIe is likely slower than over NVLink.
//   - CustomAllReduceLatency: vLLM runs its own one-kernel all-reduce, not NCCL, on tensors
//     under 8 MiB when TP is 2, 4, 6 or 8 and the GPUs are NVLink-connected (or TP is 2),
//     unless --disable-custom-all-reduce (vllm-project/vllm@00d618aa vllm/distributed/
//     device_communicators/custom_all_reduce.py: CustomAllreduce's _SUPPORTED_WORLD_SIZES,
//     max_size=8192*1024 and should_custom_ar; introduced by PR #2192, January 2024). A
//     decode step's all-reduces are that small. vLLM's own benchmark
//     (benchmarks/kernels/benchmark_device_communicators.py, CUDA-graph replay, in PR #24111)
//     times it on H100 at 7 µs for a 0.5 MB tensor at TP 2 and 10 µs at TP 4 (PR #24532: 10
//     µs at TP 4); less the transfer this model adds (1.5 and 2.2 µs) that is 5.5 and 7.8 µs,
//     so 7 µs. H200 takes H100's. A100, L40S and L4 have no measurement here and keep NCCL's
//     figure for every all-reduce (0).
//   - HostBandwidth: measured on H100 only, in vLLM's offloading blog (vllm-project/
//     vllm-project.github.io@c3a01c4a5807 _posts/2026-01-08-kv-offloading-connector.md):
//     its copy microbenchmark moves 1000 blocks GPU→CPU or CPU→GPU at about 50 GB/s one way
//     at large blocks (Figures 3-4; 83.4 GB/s both ways at once), and vLLM's own loads of
//     Llama-3.1-8B's 2 MB blocks take 3.0 ms more per 1,000 prompt tokens (131 MB) in its
//     single-request TTFT runs (Figure 1, 10K to 100K tokens): 44 GB/s end to end, the
//     figure kept, since it is what a load costs (internal/calibrate checks it). H100 PCIe
//     and H200 have the same PCIe Gen5 x16 host link and take it, assumed. A100, L40S and
//     L4 have PCIe Gen4 x16, half Gen5's 64 GB/s per direction by the specification: 22
//     GB/s, the same fraction of the link, is assumed, not measured.
//   - NICGbps: one 400 Gb/s ConnectX-7 (InfiniBand NDR or 400 GbE RoCE) per GPU on HGX/DGX
//     H100 and H200 systems (NVIDIA DGX H100/H200 datasheet: 8 single-port ConnectX-7 VPI,
//     up to 400 Gb/s; MLCommons inference v4.1 closed/NVIDIA/systems/H200-SXM-141GBx8
//     lists 400 Gb/s InfiniBand cards; GKE's A3 Ultra, where llm-d's P/D guide ran, gives
//     each of its 8 H200 a dedicated CX-7 with RDMA over RoCE, GoogleCloudPlatform/
//     cluster-toolkit release v1.44.1); 400 Gb/s = 50 GB/s. A100 SXM: one 200 Gb/s
//     ConnectX-6 HDR per GPU (DGX A100 datasheet). H100 PCIe, L40S and L4 servers carry
//     no standard NIC per GPU: 200, 100 and 100 Gb/s are assumed, not sourced. Measured
//     NIXL throughput is below line rate (42.6 GB/s over 400G RoCE at 16 MB blocks,
//     ai-dynamo/nixl PR #1647); a fleet's kv_transfer section may set its own.
//   - Efficiency: calibrated in calibration_test.go against testdata/calibration.json
//     (A100, H100). H200 reuses H100's (same compute die); L40S and L4 are uncalibrated
//     Ada priors. See README.md.

// ampereEfficiency is calibrated on A100 (Splitwise, Vidur and vLLM measurements). DecodeMFU
// is fitted to the saturated and moderate-load vLLM 0.6.0 runs simulated as V0 runs them
// (docs/fidelity.md).
func ampereEfficiency() Efficiency {
	return Efficiency{PrefillMFU: 0.63, DecodeMFU: 0.45, Memory: 0.80, Link: 0.80}
}

// hopperEfficiency is calibrated on H100 (Splitwise and vLLM measurements); DecodeMFU as
// ampereEfficiency's, and consistent with cuBLAS's 0.6–0.7 of peak on decode-sized GEMMs
// (README.md, "Kernel measurements"). ExpertMFU is fitted to the one published MoE prefill
// figure: llm-d's calibrated peak prefill throughput of gpt-oss-120b on one H200 (33,821
// tokens/s at 8,192-token chunks through the whole P/D path, transfer and sidecar hop
// included; llm-d/llm-d@83bb7c18 guides/pd-disaggregation/router/pd-disaggregation.values.yaml),
// i.e. an 8,192-token prompt's first token 242 ms after it arrives on an idle fleet.
func hopperEfficiency() Efficiency {
	return Efficiency{PrefillMFU: 0.50, DecodeMFU: 0.45, Memory: 0.85, Link: 0.80, ExpertMFU: 0.35}
}

// adaEfficiency is an uncalibrated prior for Ada (L40S, L4) parts: 0.9 of Hopper's compute
// efficiencies, rounded down.
func adaEfficiency() Efficiency {
	return Efficiency{PrefillMFU: 0.45, DecodeMFU: 0.40, Memory: 0.80, Link: 0.70}
}

// A100SXM40GB returns the NVIDIA A100 SXM4 40 GB: 312 TFLOP/s BF16, 40 GB HBM2 at
// 1.555 TB/s, NVLink 3.
func A100SXM40GB() GPU {
	return GPU{
		Name:            "A100-40GB-SXM",
		Aliases:         []string{"a100-40gb", "a100-sxm4-40gb", "a100-40"},
		PeakFLOPS:       312e12,
		MemoryBytes:     gib(39.49),
		MemoryBandwidth: 1.555e12,
		LinkBandwidth:   300e9,
		LinkLatency:     51 * time.Microsecond,
		HostBandwidth:   22e9,
		NICGbps:         200,
		Efficiency:      ampereEfficiency(),
	}
}

// A100SXM80GB returns the NVIDIA A100 SXM4 80 GB: 312 TFLOP/s BF16, 80 GB HBM2e at
// 2.039 TB/s, NVLink 3.
func A100SXM80GB() GPU {
	return GPU{
		Name:            "A100-80GB-SXM",
		Aliases:         []string{"a100-80gb", "a100", "a100-sxm4-80gb", "a100-80"},
		PeakFLOPS:       312e12,
		MemoryBytes:     gib(79.15),
		MemoryBandwidth: 2.039e12,
		LinkBandwidth:   300e9,
		LinkLatency:     51 * time.Microsecond,
		HostBandwidth:   22e9,
		NICGbps:         200,
		Efficiency:      ampereEfficiency(),
	}
}

// H100SXM80GB returns the NVIDIA H100 SXM5 80 GB: 989.4 TFLOP/s BF16 (1,978.9 FP8), 80 GB HBM3 at
// 3.35 TB/s, NVLink 4.
func H100SXM80GB() GPU {
	return GPU{
		Name:                   "H100-SXM-80GB",
		Aliases:                []string{"h100", "h100-80gb", "h100-sxm", "h100-sxm5-80gb"},
		PeakFLOPS:              989.4e12,
		PeakFP8FLOPS:           1978.9e12,
		MemoryBytes:            gib(79.22),
		MemoryBandwidth:        3.35e12,
		LinkBandwidth:          450e9,
		LinkLatency:            37 * time.Microsecond,
		CustomAllReduceLatency: 7 * time.Microsecond,
		HostBandwidth:          44e9,
		NICGbps:                400,
		Efficiency:             hopperEfficiency(),
	}
}

// H100PCIe80GB returns the NVIDIA H100 PCIe 80 GB: 114 SMs and a 300–350 W card, so 756
// TFLOP/s BF16 (1,513 FP8) dense, with 80 GB HBM2e at 2.0 TB/s, PCIe Gen5 (NVIDIA's H100
// datasheet, whose table gives these with sparsity, twice as much; product brief
// PB-11133-001_v02). The CUDA-visible memory is taken as the SXM part's; TP runs over PCIe
// Gen5 (64 GB/s each way), not over the optional two-card NVLink bridge.
func H100PCIe80GB() GPU {
	return GPU{
		Name:            "H100-PCIe-80GB",
		Aliases:         []string{"h100-pcie", "h100-pcie-80gb"},
		PeakFLOPS:       756e12,
		PeakFP8FLOPS:    1513e12,
		MemoryBytes:     gib(79.22),
		MemoryBandwidth: 2.0e12,
		LinkBandwidth:   64e9,
		LinkLatency:     30 * time.Microsecond,
		HostBandwidth:   44e9,
		NICGbps:         200,
		Efficiency:      hopperEfficiency(),
	}
}

// H200SXM141GB returns the NVIDIA H200 SXM 141 GB: the H100 compute die (≈989 TFLOP/s
// BF16, 1,979 FP8) with 141 GB HBM3e at 4.8 TB/s, NVLink 4.
func H200SXM141GB() GPU {
	return GPU{
		Name:                   "H200-SXM-141GB",
		Aliases:                []string{"h200", "h200-sxm", "h200-141gb"},
		PeakFLOPS:              989.4e12,
		PeakFP8FLOPS:           1978.9e12,
		MemoryBytes:            gib(139.81),
		MemoryBandwidth:        4.8e12,
		LinkBandwidth:          450e9,
		LinkLatency:            37 * time.Microsecond,
		CustomAllReduceLatency: 7 * time.Microsecond,
		HostBandwidth:          44e9,
		NICGbps:                400,
		Efficiency:             hopperEfficiency(),
	}
}

// L40S returns the NVIDIA L40S: 362 TFLOP/s BF16 (733 FP8), 48 GB GDDR6 at 0.864 TB/s, PCIe Gen4.
func L40S() GPU {
	return GPU{
		Name:            "L40S",
		Aliases:         []string{"l40s-48gb"},
		PeakFLOPS:       362.05e12,
		PeakFP8FLOPS:    733e12,
		MemoryBytes:     gib(44.39),
		MemoryBandwidth: 0.864e12,
		LinkBandwidth:   32e9,
		LinkLatency:     30 * time.Microsecond,
		HostBandwidth:   22e9,
		NICGbps:         100,
		Efficiency:      adaEfficiency(),
	}
}

// L4 returns the NVIDIA L4: 121 TFLOP/s BF16 (242.5 FP8), 24 GB GDDR6 at 0.30 TB/s, PCIe Gen4.
func L4() GPU {
	return GPU{
		Name:            "L4",
		Aliases:         []string{"l4-24gb"},
		PeakFLOPS:       121e12,
		PeakFP8FLOPS:    242.5e12,
		MemoryBytes:     gib(22.06),
		MemoryBandwidth: 0.300e12,
		LinkBandwidth:   32e9,
		LinkLatency:     30 * time.Microsecond,
		HostBandwidth:   22e9,
		NICGbps:         100,
		Efficiency:      adaEfficiency(),
	}
}

// gib converts a size in GiB (as vLLM logs it) to bytes, rounded to the nearest MiB.
func gib(v float64) int64 {
	return int64(math.Round(v*1024)) << 20
}
