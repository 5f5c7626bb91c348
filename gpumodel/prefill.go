package gpumodel

import "time"

// PrefillPredictor predicts how long a replica of one Deployment takes to prefill a prompt,
// for routers that estimate time to first token (router's predicted-ttft policy, through its
// PrefillPredictor interface). It prices the prompt as vLLM's chunked prefill schedules it:
// steps of at most MaxNumBatchedTokens, each shared with the sequences decoding alongside
// (one token each), each chunk attending to the cached prefix and the chunks before it.
type PrefillPredictor struct {
	pricer  *Pricer
	budget  int
	maxSeqs int
}

// NewPrefillPredictor validates d and returns its predictor.
func NewPrefillPredictor(d Deployment) (*PrefillPredictor, error) {
	p, err := NewPricer(d)
	if err != nil {
		return nil, err
	}
	return &PrefillPredictor{pricer: p, budget: d.MaxNumBatchedTokens, maxSeqs: d.MaxNumSeqs}, nil
}

// PrefillTime returns the duration of the steps that compute tokens new prompt tokens after
// cached cached ones while decoding sequences (of decodeContext tokens of context in all)
// decode a token in every step. Decoding sequences beyond MaxNumSeqs − 1 wait, as vLLM's
// scheduler would hold them back; the decode share of each step's budget is left to them.
func (p *PrefillPredictor) PrefillTime(tokens, cached, decoding int, decodeContext int64) time.Duration {
	decoding = max(0, min(decoding, p.maxSeqs-1))
	perSeq := int64(0)
	if decoding > 0 {
		perSeq = max(decodeContext, 0) / int64(decoding)
	}
	chunkMax := max(1, p.budget-decoding)
	var total time.Duration
	for ctx := max(cached, 0); tokens > 0; {
		chunk := min(tokens, chunkMax)
		s := Step{DecodeSeqs: decoding, DecodeContext: perSeq * int64(decoding)}
		s.AddPrefill(chunk, ctx)
		total += p.pricer.StepTime(s)
		tokens -= chunk
		ctx += chunk
	}
	return total
}

// BatchTime returns the duration of the steps that compute tokens prompt tokens of several
// queued requests, packed into full steps of MaxNumBatchedTokens (less one token per decoding
// sequence) as vLLM's scheduler packs waiting prefills, each chunk priced without cached
// context. It is O(1): every full step costs the same.
func (p *PrefillPredictor) BatchTime(tokens, decoding int, decodeContext int64) time.Duration {
	if tokens <= 0 {
		return 0
	}
	decoding = max(0, min(decoding, p.maxSeqs-1))
	perSeq := int64(0)
	if decoding > 0 {
		perSeq = max(decodeContext, 0) / int64(decoding)
	}
	chunkMax := max(1, p.budget-decoding)
	step := func(n int) time.Duration {
		s := Step{DecodeSeqs: decoding, DecodeContext: perSeq * int64(decoding)}
		s.AddPrefill(n, 0)
		return p.pricer.StepTime(s)
	}
	full, rest := tokens/chunkMax, tokens%chunkMax
	total := time.Duration(full) * step(chunkMax)
	if rest > 0 {
		total += step(rest)
	}
	return total
}
