package router

// TokenReader is implemented by policies (and pipeline plugins) that read a request's token
// ids or exact token count: without them they decide otherwise. kv-router, predicted-ttft
// and precise-prefix hash token blocks (with no ids they see no cached prefix); token-load
// and the llm-d prefix scorer hash token ids when they have them and text otherwise; VTC
// charges the exact prompt length, else an estimate from its characters. The simulator
// always gives policies token ids; cmd/route fills them from a backend's /tokenize for every
// policy that reads them.
type TokenReader interface {
	// ReadsTokens reports whether the policy reads Request.Tokens or relies on an exact
	// Request.InputTokens.
	ReadsTokens() bool
}

// ReadsTokens reports whether p reads token ids (TokenReader). A Pipeline reads them when any
// of its plugins does.
func ReadsTokens(p any) bool {
	t, ok := p.(TokenReader)
	return ok && t.ReadsTokens()
}

// ReadsTokens is true: kv-router hashes token blocks and counts tokens.
func (*KVRouter) ReadsTokens() bool { return true }

// ReadsTokens is true: predicted-ttft hashes token blocks and counts tokens.
func (*PredictedTTFT) ReadsTokens() bool { return true }

// ReadsTokens is true: the precise scorer hashes token blocks, as the engines do.
func (*PreciseScorer) ReadsTokens() bool { return true }

// ReadsTokens is true for llm-d-router's variant, which hashes token ids.
func (p *PrefixScorer) ReadsTokens() bool { return p.cfg.Variant == PrefixScoreLLMD }

// ReadsTokens is true: token-load counts tokens and hashes token ids when it has them.
func (*TokenLoad) ReadsTokens() bool { return true }

// ReadsTokens is true: the scorer counts tokens and hashes token ids when it has them.
func (*TokenLoadScorer) ReadsTokens() bool { return true }

// ReadsTokens is true: VTC charges a prompt's exact token count when it has one.
func (*VTC) ReadsTokens() bool { return true }

// ReadsTokens reports whether any filter, scorer or the picker of the pipeline reads tokens.
func (p *Pipeline) ReadsTokens() bool {
	for _, f := range p.filters {
		if ReadsTokens(f) {
			return true
		}
	}
	for _, s := range p.scorers {
		if ReadsTokens(s.Scorer) {
			return true
		}
	}
	return ReadsTokens(p.picker)
}
