package gpumodel

// sparse holds a Pricer's per-GPU constants for a mixture of experts and for
// sliding-window attention (moe.go says what they model). The zero value prices a dense
// model with full attention in every layer: every method returns 0.
type sparse struct {
	experts          float64 // experts per layer; 0 when dense
	missLog          float64 // log(1 − k/E), for the experts a step touches
	bytesPerExpert   float64 // one expert in every layer, per GPU
	window           float64 // sliding window in tokens; 0 when none
	windowFLOPsPair  float64 // 4 × sliding layers × heads/TP × head dim
	windowKVPerToken float64 // sliding layers' KV bytes per token, per GPU
	expertFLOPsToken float64 // 2 × layers × active experts' params / TP, per token
	expertSlowdown   float64 // PrefillMFU / ExpertMFU − 1: the extra price of an expert FLOP
}

func newSparse(d Deployment) sparse {
	m, tp := d.Model, float64(max(d.TP, 1))
	var s sparse
	if m.Experts > 0 {
		s.experts, s.missLog = float64(m.Experts), missLog(m)
		s.bytesPerExpert = float64(m.Layers) * float64(m.ExpertParams()) * expertBytes(m, d.Quantization) / tp
		s.expertFLOPsToken = 2 * float64(m.Layers) * float64(m.ActiveExperts()) * float64(m.ExpertParams()) / tp
		if e := d.GPU.Efficiency; e.ExpertMFU > 0 {
			s.expertSlowdown = e.PrefillMFU/e.ExpertMFU - 1
		}
	}
	if m.SlidingLayers > 0 {
		s.window = float64(m.SlidingWindow)
		s.windowFLOPsPair = 4 * float64(m.SlidingLayers) * float64(m.Heads) / tp * float64(m.HeadDim)
		s.windowKVPerToken = 2 * float64(m.SlidingLayers) * float64(d.KVHeadsPerGPU()) * float64(m.HeadDim) * float64(d.KVDTypeBytes)
	}
	return s
}

// expertExtraBF16 returns the BF16-equivalent FLOPs that tokens tokens' expert multiplies
// cost beyond a dense layer's (ExpertMFU below PrefillMFU), for the step price only: the
// floors count FLOPs at peak.
func (s sparse) expertExtraBF16(tokens, linSpeedup float64) float64 {
	return s.expertFLOPsToken * tokens * s.expertSlowdown / linSpeedup
}

// allExpertBytes returns the bytes of every expert of every layer, per GPU.
func (s sparse) allExpertBytes() float64 {
	return s.bytesPerExpert * s.experts
}

// expertBytes returns the expert weights a step of tokens tokens streams, per GPU.
func (s sparse) expertBytes(tokens float64) float64 {
	if s.bytesPerExpert == 0 || tokens <= 0 {
		return 0
	}
	return s.bytesPerExpert * expertsTouched(s.experts, s.missLog, tokens)
}

// prefillWindowFLOPs returns the sliding-window layers' attention FLOPs of st's prefill
// chunks: each new token attends to at most window keys.
func (s sparse) prefillWindowFLOPs(st Step) float64 {
	if s.window == 0 {
		return 0
	}
	return s.windowFLOPsPair * min(nonneg(st.PrefillPairs), nonneg(st.PrefillTokens)*s.window)
}

// decodeWindowFLOPs returns the sliding-window layers' attention FLOPs of st's decoding
// sequences, each attending to at most window keys.
func (s sparse) decodeWindowFLOPs(st Step) float64 {
	if s.window == 0 {
		return 0
	}
	dec := nonneg(int64(st.DecodeSeqs))
	return s.windowFLOPsPair * min(nonneg(st.DecodeContext)+dec, dec*s.window)
}

// windowKVBytes returns the sliding-window layers' KV bytes a step reads and writes:
// kvTokens tokens of context and new tokens over requests chunks and sequences, each
// of which touches at most its window.
func (s sparse) windowKVBytes(kvTokens, requests float64) float64 {
	if s.window == 0 {
		return 0
	}
	return s.windowKVPerToken * min(kvTokens, requests*s.window)
}
