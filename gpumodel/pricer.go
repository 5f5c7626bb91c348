package gpumodel

import (
	"math"
	"time"
)

// Pricer prices scheduler steps for one Deployment. NewPricer folds the
// deployment into a few per-GPU constants, so StepTime is a handful of
// multiply-adds: O(1), allocation-free and safe for concurrent use.
//
// The model, per GPU of the tensor-parallel group:
//
//	prefill FLOPs = 2·W·Tₚ + 4·L·(H/TP)·d·pairs + 2·h·V/TP per chunk
//	decode  FLOPs = (2·W + 2·h·V/TP)·B + 4·L·(H/TP)·d·(Σctx + B)
//	bytes         = streamed weights + KV bytes/token · (cached context read + new tokens written)
//	C = prefill FLOPs / (peak·PrefillMFU) + decode FLOPs / (peak·DecodeMFU)
//	M = bytes / (BW·Memory)
//	step time     = (C^1.5 + M^1.5)^(1/1.5) + 2·L all-reduces (TP > 1) + overheads
//
// where W is the per-layer-summed matmul weights per GPU, Tₚ the prefill
// tokens, B the decoding sequences, L layers, H heads, d head dim, h hidden,
// V vocab. The combination is a smooth roofline (see roofline): it is
// max(C, M) far from the ridge point and up to 1.59 × max(C, M) near it,
// where real kernels reach neither peak (Vidur's A100 profile: a 128-token
// layer takes 1.45× the sharp roofline). Decode rows run in the same fused GEMMs as prefill rows
// (vLLM V1 flattens a step's tokens into one batch), so their math is
// hidden behind the weight stream while the batch is small and bounds the
// step once it is large, as prefill's is; DecodeMFU is lower than PrefillMFU
// because a decode row also reads its whole KV context through attention
// kernels that reach a lower fraction of peak. Since the roofline ≥ max(C, M)
// and each efficiency is at most 1, StepTime is never below FLOPFloor or
// MemoryFloor.
//
// For an FP8 model (Deployment.Quantization) the linear FLOPs (the 2·W terms)
// run at the GPU's FP8 peak when it has one (PeakFP8FLOPS), with the same
// MFUs, and the streamed weights count one byte per linear parameter;
// attention and the LM head stay at the BF16 peak.
//
// A mixture of experts multiplies each token by its active parameters only and
// streams the experts a step's tokens touch; sliding-window layers attend to and
// read at most their window (moe.go, pricer_moe.go).
type Pricer struct {
	linFLOPsPerToken float64 // 2 × layers × matmul params / TP
	attnFLOPsPerPair float64 // 4 × layers × heads/TP × head dim
	logitFLOPs       float64 // 2 × hidden × vocab / TP, per sampled row
	weightBytes      float64 // weights streamed per step per GPU
	kvBytesPerToken  float64 // per GPU
	layerWeightBytes float64 // one layer's matmul weights per GPU
	layerFLOPs       float64 // 2 × one layer's matmul params / TP, per token
	sparse           sparse  // experts and sliding windows; zero for a dense model

	invPeak, invBW    float64 // for the floors
	secPerPrefillFLOP float64
	secPerDecodeFLOP  float64
	linSpeedup        float64 // linear-layer peak / BF16 peak: 2 for FP8 on Hopper and Ada, else 1
	secPerByte        float64
	arFixed           float64 // all-reduce latency per step, seconds
	arFixedCustom     float64 // the same through vLLM's custom all-reduce
	arCustomBelow     float64 // step tokens under which the custom all-reduce runs; 0 where it never does
	arPerToken        float64 // all-reduce transfer per token, seconds
	overheadFixed     float64 // per step + per layer, seconds
	overheadPerReq    float64 // seconds per chunk or sequence
}

// NewPricer validates d and returns its Pricer.
func NewPricer(d Deployment) (*Pricer, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	m, g, e := d.Model, d.GPU, d.GPU.Efficiency
	tp := float64(d.TP)
	layers := float64(m.Layers)
	matmul := float64(m.LayerActiveParams()) / tp
	streamed := quantizedWeightBytes(m, d.Quantization) // the input embedding is gathered, not streamed, unless tied
	if !m.TiedEmbeddings {
		streamed -= int64(m.Vocab) * int64(m.Hidden) * int64(m.DTypeBytes)
	}
	linPeak := linearPeakFLOPS(g, d.Quantization)
	p := &Pricer{
		linFLOPsPerToken: 2 * layers * matmul,
		attnFLOPsPerPair: 4 * float64(m.FullAttentionLayers()) * float64(m.Heads) / tp * float64(m.HeadDim),
		logitFLOPs:       2 * float64(m.Hidden) * float64(m.Vocab) / tp,
		weightBytes:      float64(streamed) / tp,
		kvBytesPerToken:  float64(d.KVBytesPerTokenPerGPU()),
		layerWeightBytes: float64(m.LayerMatmulParams()) / tp * linearBytes(m, d.Quantization),
		layerFLOPs:       2 * matmul,

		invPeak:           1 / g.PeakFLOPS,
		invBW:             1 / g.MemoryBandwidth,
		secPerPrefillFLOP: 1 / (g.PeakFLOPS * e.PrefillMFU),
		secPerDecodeFLOP:  1 / (g.PeakFLOPS * e.DecodeMFU),
		linSpeedup:        linPeak / g.PeakFLOPS,
		secPerByte:        1 / (g.MemoryBandwidth * e.Memory),
		overheadFixed:     d.Overheads.PerStep.Seconds() + layers*d.Overheads.PerLayer.Seconds(),
		overheadPerReq:    d.Overheads.PerRequest.Seconds(),
	}
	p.sparse = newSparse(d)
	p.weightBytes -= p.sparse.allExpertBytes()
	if d.TP > 1 {
		// Two all-reduces per layer (after attention and after the MLP). A ring
		// all-reduce moves 2·(TP−1)/TP of the tensor through each GPU's link.
		allReduces := 2 * layers
		p.arFixed = allReduces * g.LinkLatency.Seconds()
		if d.usesCustomAllReduce() {
			// vLLM's kernel takes an all-reduce whose tensor (tokens × hidden in the
			// activations' dtype) is under customAllReduceMaxBytes; NCCL the rest.
			p.arFixedCustom = allReduces * g.CustomAllReduceLatency.Seconds()
			p.arCustomBelow = customAllReduceMaxBytes / float64(m.Hidden*m.DTypeBytes)
		}
		bytesPerToken := float64(m.Hidden*m.DTypeBytes) * 2 * (tp - 1) / tp
		p.arPerToken = allReduces * bytesPerToken / (g.LinkBandwidth * e.Link)
	}
	return p, nil
}

// StepTime returns the wall-clock duration of one scheduler step of d holding s.
// It builds a Pricer each call; hot loops should build one with NewPricer.
func StepTime(d Deployment, s Step) (time.Duration, error) {
	p, err := NewPricer(d)
	if err != nil {
		return 0, err
	}
	return p.StepTime(s), nil
}

// work holds the FLOPs and bytes of one step, per GPU. The *FLOPs fields count
// every FLOP; the *BF16 fields are the same work in BF16-peak equivalents, the
// linear layers' FLOPs divided by their speed-up (FP8), so that dividing them
// by a BF16 rate prices each part at its own peak.
type work struct {
	prefillFLOPs, decodeFLOPs float64
	prefillBF16, decodeBF16   float64
	prefillExtra, decodeExtra float64 // expert multiplies' price beyond a dense layer's, BF16 FLOPs
	bytes, tokens, requests   float64
}

func nonneg(v int64) float64 { return float64(max(v, 0)) }

func (p *Pricer) work(s Step) work {
	pf, dec := nonneg(s.PrefillTokens), nonneg(int64(s.DecodeSeqs))
	chunks := nonneg(int64(s.PrefillChunks))
	kvTokens := nonneg(s.PrefillContext) + nonneg(s.DecodeContext) + pf + dec // read + written
	pfLin, decLin := p.linFLOPsPerToken*pf, p.linFLOPsPerToken*dec
	pfRest := p.attnFLOPsPerPair*nonneg(s.PrefillPairs) + p.logitFLOPs*chunks + p.sparse.prefillWindowFLOPs(s)
	decRest := p.logitFLOPs*dec + p.attnFLOPsPerPair*(nonneg(s.DecodeContext)+dec) + p.sparse.decodeWindowFLOPs(s)
	return work{
		prefillFLOPs: pfLin + pfRest,
		decodeFLOPs:  decLin + decRest,
		prefillBF16:  pfLin/p.linSpeedup + pfRest,
		decodeBF16:   decLin/p.linSpeedup + decRest,
		prefillExtra: p.sparse.expertExtraBF16(pf, p.linSpeedup),
		decodeExtra:  p.sparse.expertExtraBF16(dec, p.linSpeedup),
		bytes: p.weightBytes + p.kvBytesPerToken*kvTokens +
			p.sparse.expertBytes(pf+dec) + p.sparse.windowKVBytes(kvTokens, chunks+dec),
		tokens:   pf + dec,
		requests: chunks + dec,
	}
}

// parts returns, in seconds, the prefill and decode compute and memory times
// (the roofline's inputs: compute is prefill + decode), the all-reduce time
// and the fixed overheads of s.
func (p *Pricer) parts(w work) (prefill, memory, decode, comm, overhead float64) {
	prefill = (w.prefillBF16 + w.prefillExtra) * p.secPerPrefillFLOP
	memory = w.bytes * p.secPerByte
	decode = (w.decodeBF16 + w.decodeExtra) * p.secPerDecodeFLOP
	fixed := p.arFixed
	if w.tokens < p.arCustomBelow {
		fixed = p.arFixedCustom
	}
	comm = fixed + p.arPerToken*w.tokens
	overhead = p.overheadFixed + p.overheadPerReq*w.requests
	return prefill, memory, decode, comm, overhead
}

// StepTime returns the duration of one step holding s, rounded up to the
// nanosecond; an empty step (no tokens) takes 0.
func (p *Pricer) StepTime(s Step) time.Duration {
	w := p.work(s)
	if w.tokens == 0 {
		return 0
	}
	prefill, memory, decode, comm, overhead := p.parts(w)
	return ceilDuration(roofline(prefill+decode, memory) + comm + overhead)
}

// Breakdown is a priced step split into its terms, for reports and tests.
type Breakdown struct {
	// PrefillCompute is prefill FLOPs / (peak × PrefillMFU).
	PrefillCompute time.Duration
	// Memory is streamed bytes / (bandwidth × Memory efficiency).
	Memory time.Duration
	// DecodeCompute is decode FLOPs / (peak × DecodeMFU); the roofline's compute
	// side is PrefillCompute + DecodeCompute.
	DecodeCompute time.Duration
	// Comm is the tensor-parallel all-reduce time (0 at TP 1).
	Comm time.Duration
	// Overhead is the fixed per-step, per-layer and per-request cost.
	Overhead time.Duration
	// Total equals StepTime.
	Total time.Duration
	// FLOPs is the step's floating-point work per GPU.
	FLOPs float64
	// Bytes is the step's device-memory traffic per GPU.
	Bytes float64
}

// Breakdown returns the terms StepTime adds up for s.
func (p *Pricer) Breakdown(s Step) Breakdown {
	w := p.work(s)
	if w.tokens == 0 {
		return Breakdown{}
	}
	prefill, memory, decode, comm, overhead := p.parts(w)
	return Breakdown{
		PrefillCompute: ceilDuration(prefill),
		Memory:         ceilDuration(memory),
		DecodeCompute:  ceilDuration(decode),
		Comm:           ceilDuration(comm),
		Overhead:       ceilDuration(overhead),
		Total:          ceilDuration(roofline(prefill+decode, memory) + comm + overhead),
		FLOPs:          w.prefillFLOPs + w.decodeFLOPs,
		Bytes:          w.bytes,
	}
}

// FLOPFloor returns the time s would take if every FLOP ran at the GPU's peak
// for its precision (the FP8 peak for an FP8 model's linear layers): no step
// can be faster. It is rounded down to the nanosecond.
func (p *Pricer) FLOPFloor(s Step) time.Duration {
	w := p.work(s)
	if w.tokens == 0 {
		return 0
	}
	return floorDuration((w.prefillBF16 + w.decodeBF16) * p.invPeak)
}

// MemoryFloor returns the time s would take to move its weights and KV cache
// (read and written) at the GPU's peak bandwidth: no step can be faster. It
// is rounded down to the nanosecond.
func (p *Pricer) MemoryFloor(s Step) time.Duration {
	w := p.work(s)
	if w.tokens == 0 {
		return 0
	}
	return floorDuration(w.bytes * p.invBW)
}

// layerLinearSeconds returns the roofline time of one layer's matrix
// multiplies over tokens prefill tokens, without attention, all-reduce or
// overheads: the quantity per-operator profilers such as Vidur report.
func (p *Pricer) layerLinearSeconds(tokens int) float64 {
	compute := p.layerFLOPs * float64(tokens) / p.linSpeedup * p.secPerPrefillFLOP
	return roofline(compute, p.layerWeightBytes*p.secPerByte)
}

// roofline combines compute and memory time into a smooth roofline,
// (cᵖ + mᵖ)^(1/p) for p = 1.5, which is never below max(c, m) and is 2^(1/p)
// = 1.59 × it at the ridge. Both are finite and non-negative. The sharpness
// is fitted to testdata/calibration.json: with p = 2 the decode rows of a
// small batch hid almost entirely behind the weight stream, pricing vLLM
// 0.6.0's TPOT at 8 req/s (sglang's benchmark_vllm_060, A100) 25% fast and
// Splitwise's H100 batch-16 decode 26% fast; with p = 1.3 Vidur's 128- and
// 512-token A100 layers came out 14% and 17% slow.
//
// With h = max(c, m) and u = (min/h)^1.5 ∈ [0, 1] it is h·∛(1+u)², and ∛x on
// [1, 2] is three Newton steps from a linear guess: they approach the root
// from above (so the result stays ≥ h) and reach float64 precision, at a
// fraction of math.Cbrt's cost on the step-pricing hot path.
func roofline(c, m float64) float64 {
	h, l := max(c, m), min(c, m)
	if l <= 0 {
		return h
	}
	r := l / h
	x := 1 + r*math.Sqrt(r)
	z := 1 + 0.26*(x-1) // ∛x within 2% on [1, 2]
	for range 3 {
		z = (2*z + x/(z*z)) / 3
	}
	return h * z * z
}

// maxDuration is a number of seconds (about 285 years) safely below the
// largest a time.Duration holds; longer results saturate.
const maxDuration = 9e9

func ceilDuration(sec float64) time.Duration {
	if !(sec < maxDuration) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(math.Ceil(sec * 1e9))
}

func floorDuration(sec float64) time.Duration {
	if !(sec < maxDuration) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(math.Floor(sec * 1e9))
}
