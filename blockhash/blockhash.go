// Package blockhash computes the keys of KV-cache blocks: each full block of token ids is
// hashed together with the key of the block before it, so two prompts with the same first
// key (the salt: model, adapter, cache salt) share their first k keys exactly when they share
// their first k blocks, up to 64-bit collisions. It is the one definition that the simulated
// engine (sim/engine) and the routers that mirror its cache (router/prefix) both use.
//
// A block's key is XXH3-64 (github.com/zeebo/xxh3, the reference algorithm of
// github.com/Cyan4973/xxHash) of its token ids as 4-byte little-endian words, seeded with the
// parent key. The bytes are fixed whatever the machine's byte order, so keys are the same on
// every platform. vLLM hashes a block with SHA-256 of the parent hash, the token ids and the
// extra keys (vllm/v1/core/kv_cache_utils.py, hash_block_tokens); kvroute keeps vLLM's chaining
// but not its bytes: routers and engine need equal keys for equal prefixes, not vLLM's values.
package blockhash

import (
	"encoding/binary"
	"unsafe"

	"github.com/zeebo/xxh3"
)

// littleEndian reports whether the machine stores an int32 as its 4 little-endian bytes: then
// a block's bytes are its tokens' memory, hashed in place.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// inPlace returns the memory of tokens as bytes; only on a little-endian machine are they the
// words Block hashes.
func inPlace(tokens []int32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(tokens))), 4*len(tokens))
}

// Block returns the key of a block of tokens whose parent block has key parent. The first
// block's parent is the salt. Blocks of up to 256 tokens are hashed from a buffer on the
// stack, longer ones from one on the heap.
func Block(parent uint64, tokens []int32) uint64 {
	if littleEndian {
		return xxh3.HashSeed(inPlace(tokens), parent)
	}
	// Buffers sized to the block: Go zeroes a stack buffer on every call, and 16 tokens (vLLM's
	// default block) need a quarter of the 64-token buffer.
	switch {
	case len(tokens) <= 16:
		var buf [4 * 16]byte
		return xxh3.HashSeed(putTokens(buf[:], tokens), parent)
	case len(tokens) <= 64:
		var buf [4 * 64]byte
		return xxh3.HashSeed(putTokens(buf[:], tokens), parent)
	case len(tokens) <= 256:
		var buf [4 * 256]byte
		return xxh3.HashSeed(putTokens(buf[:], tokens), parent)
	}
	return xxh3.HashSeed(putTokens(make([]byte, 4*len(tokens)), tokens), parent)
}

// Salt returns the first block's parent key for a name (a model, or a model and an adapter):
// the block key, with parent 0, of the name's bytes taken as token ids.
func Salt(name string) uint64 {
	var buf [64]int32
	toks := buf[:0]
	for i := 0; i < len(name); i++ {
		toks = append(toks, int32(name[i]))
	}
	return Block(0, toks)
}

// AppendChain appends to dst the keys of tokens' full blocks of blockSize tokens, the first
// chained onto salt; a trailing partial block has no key.
func AppendChain(dst []uint64, salt uint64, tokens []int32, blockSize int) []uint64 {
	if blockSize <= 0 {
		return dst
	}
	full := len(tokens) / blockSize * blockSize
	tokens = tokens[:full]
	if littleEndian {
		for b := inPlace(tokens); len(b) > 0; b = b[4*blockSize:] {
			salt = xxh3.HashSeed(b[:4*blockSize], salt)
			dst = append(dst, salt)
		}
		return dst
	}
	perChunk := chunkBytes / 4 / blockSize * blockSize // tokens converted at a time
	if perChunk == 0 {
		for i := 0; i < full; i += blockSize {
			salt = Block(salt, tokens[i:i+blockSize])
			dst = append(dst, salt)
		}
		return dst
	}
	// The keys form a serial chain; converting many blocks' bytes before hashing them keeps
	// that work off the chain's critical path.
	var buf [chunkBytes]byte
	for len(tokens) > 0 {
		n := min(perChunk, len(tokens))
		b := putTokens(buf[:], tokens[:n])
		for ; len(b) > 0; b = b[4*blockSize:] {
			salt = xxh3.HashSeed(b[:4*blockSize], salt)
			dst = append(dst, salt)
		}
		tokens = tokens[n:]
	}
	return dst
}

// chunkBytes is the size of AppendChain's conversion buffer: 64 blocks of 16 tokens.
const chunkBytes = 4096

// putTokens writes tokens into the front of b as 4-byte little-endian words and returns that
// part of b. Two tokens go to one 8-byte store, eight to a step whose indexes the compiler can
// check once: xxh3 reads 8 bytes at a time, a load spanning two 4-byte stores cannot be
// forwarded from them, and per-token bounds checks cost more than the hash itself.
func putTokens(b []byte, tokens []int32) []byte {
	out := b[:4*len(tokens)]
	for len(tokens) >= 8 {
		t, d := (*[8]int32)(tokens), (*[32]byte)(b)
		binary.LittleEndian.PutUint64(d[0:], pair(t[0], t[1]))
		binary.LittleEndian.PutUint64(d[8:], pair(t[2], t[3]))
		binary.LittleEndian.PutUint64(d[16:], pair(t[4], t[5]))
		binary.LittleEndian.PutUint64(d[24:], pair(t[6], t[7]))
		tokens, b = tokens[8:], b[32:]
	}
	for len(tokens) >= 2 {
		binary.LittleEndian.PutUint64(b, pair(tokens[0], tokens[1]))
		tokens, b = tokens[2:], b[8:]
	}
	if len(tokens) == 1 {
		binary.LittleEndian.PutUint32(b, uint32(tokens[0]))
	}
	return out
}

// pair packs two token ids as the 8 little-endian bytes of their two 4-byte words.
func pair(a, b int32) uint64 { return uint64(uint32(a)) | uint64(uint32(b))<<32 }
