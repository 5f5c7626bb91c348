package engine

// BlockHash chains a full block of token ids onto its parent's hash; the first block's parent
// is the salt (model, adapter, cache salt). Two prompts with the same salt share their first k
// block hashes exactly when they share their first k blocks (up to 64-bit collisions). The
// function is a fast multiply-xorshift mix, not vLLM's SHA-256: the simulator needs equality,
// not the same bytes.
func BlockHash(parent uint64, tokens []int32) uint64 {
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
