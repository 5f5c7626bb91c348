package prefix

import "kvroute/blockhash"

// TokenBlockHash chains a full block of token ids onto its parent's hash: the KV block key
// of package blockhash, the one the simulated engine (sim/engine) gives its blocks, so a
// router fed by the engine's KV events computes the same keys from a request's tokens; the
// first block's parent is the salt (ModelSalt).
func TokenBlockHash(parent uint64, tokens []int32) uint64 { return blockhash.Block(parent, tokens) }

// ModelSalt is the first block's parent hash for a model (blockhash.Salt: the model name's
// bytes hashed as tokens).
func ModelSalt(model string) uint64 { return blockhash.Salt(model) }

// AppendTokenBlockHashes appends the chained hashes of tokens' full blocks of blockSize.
func AppendTokenBlockHashes(dst []uint64, salt uint64, tokens []int32, blockSize int) []uint64 {
	return blockhash.AppendChain(dst, salt, tokens, blockSize)
}
