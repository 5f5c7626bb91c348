package engine

import "kvroute/blockhash"

// BlockHash chains a full block of token ids onto its parent's hash; the first block's parent
// is the salt (model, adapter, cache salt). Two prompts with the same salt share their first k
// block hashes exactly when they share their first k blocks (up to 64-bit collisions). It is
// package blockhash's key (XXH3-64 of the token ids, seeded with the parent), which routers
// mirroring the engine's cache compute too; not vLLM's SHA-256: the simulator needs equality,
// not the same bytes.
func BlockHash(parent uint64, tokens []int32) uint64 { return blockhash.Block(parent, tokens) }

// OutputToken stands for token i of a request's sequence that the request generates beyond
// its Answer: a negative id (real ids are not), fixed by the request's nonce (its submission
// number on the replica) and i, so that its blocks hash alike only within the request.
func OutputToken(nonce uint64, i int) int32 {
	h := (nonce+1)*0x9e3779b97f4a7c15 ^ uint64(i)*0xc2b2ae3d27d4eb4f
	h ^= h >> 31
	h *= 0xff51afd7ed558ccd
	h ^= h >> 29
	return -1 - int32(h&0x3fffffff)
}
