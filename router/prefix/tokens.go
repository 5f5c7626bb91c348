package prefix

// TokenBlockHash chains a full block of token ids onto its parent's hash, the way the
// simulated engine (sim/engine.BlockHash) hashes its KV blocks, so a router fed by the
// engine's KV events can compute the same keys from a request's tokens; the first block's
// parent is the salt (ModelSalt). A test in sim/cluster keeps the two functions equal.
func TokenBlockHash(parent uint64, tokens []int32) uint64 {
	h := parent ^ 0x9e3779b97f4a7c15
	for _, t := range tokens {
		h ^= uint64(uint32(t))
		h *= 0xff51afd7ed558ccd
		h ^= h >> 32
	}
	h ^= h >> 29
	h *= 0xc4ceb9fe1a85ec53
	return h ^ h>>32
}

// ModelSalt is the first block's parent hash for a model: the model name's bytes hashed as
// tokens.
func ModelSalt(model string) uint64 {
	var buf [64]int32
	toks := buf[:0]
	for i := 0; i < len(model); i++ {
		toks = append(toks, int32(model[i]))
	}
	return TokenBlockHash(0, toks)
}

// AppendTokenBlockHashes appends the chained hashes of tokens' full blocks of blockSize.
func AppendTokenBlockHashes(dst []uint64, salt uint64, tokens []int32, blockSize int) []uint64 {
	parent := salt
	for i := 0; i+blockSize <= len(tokens); i += blockSize {
		parent = TokenBlockHash(parent, tokens[i:i+blockSize])
		dst = append(dst, parent)
	}
	return dst
}
