package prefix

import (
	"encoding/binary"
	"slices"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// ChainHash appends to dst the chained block hashes of data and returns the
// extended slice.
//
// data is cut into blocks of blockSize bytes. The hash of block i is
// h_i = xxhash64(LE8(h_{i-1}) ‖ block_i), where LE8 is the 8-byte
// little-endian encoding and h_{-1} = seed, so each hash commits to the seed
// and to every byte before it. Two inputs hashed with the same seed and block
// size therefore share their first k hashes exactly when they share their
// first k blocks (up to 64-bit hash collisions).
//
// Only full blocks are hashed unless partial is true, in which case a
// trailing partial block (1..blockSize-1 bytes) is hashed too, as GIE does.
// maxBlocks caps the number of hashes appended (the partial block counts);
// maxBlocks <= 0 means no cap. A blockSize < 1 appends nothing.
// ChainHash does not allocate beyond growing dst.
func ChainHash(dst []uint64, seed uint64, data []byte, blockSize, maxBlocks int, partial bool) []uint64 {
	// The string view is never retained, so it may alias data.
	return ChainHashString(dst, seed, unsafe.String(unsafe.SliceData(data), len(data)), blockSize, maxBlocks, partial)
}

// ChainHashString is ChainHash for a string; it hashes data in place without
// converting it to a byte slice.
func ChainHashString(dst []uint64, seed uint64, data string, blockSize, maxBlocks int, partial bool) []uint64 {
	if blockSize < 1 {
		return dst
	}
	n := len(data) / blockSize
	if partial && len(data)%blockSize != 0 {
		n++
	}
	if maxBlocks > 0 && n > maxBlocks {
		n = maxBlocks
	}
	dst = slices.Grow(dst, n)
	parent := seed
	var buf [8 + stackBlock]byte
	for i := 0; i < n; i++ {
		start := i * blockSize
		parent = chainStep(&buf, parent, data[start:min(start+blockSize, len(data))])
		dst = append(dst, parent)
	}
	return dst
}

// stackBlock is the largest block chainStep hashes in one xxhash.Sum64 call over a stack
// buffer; larger blocks go through a streaming xxhash.Digest (same XXH64, no allocation).
const stackBlock = 248

// chainStep returns XXH64 (seed 0) of LE8(parent) ‖ block, computed by
// github.com/cespare/xxhash/v2 (assembly on amd64 and arm64).
func chainStep(buf *[8 + stackBlock]byte, parent uint64, block string) uint64 {
	if len(block) <= stackBlock {
		binary.LittleEndian.PutUint64(buf[:8], parent)
		n := copy(buf[8:], block)
		return xxhash.Sum64(buf[:8+n])
	}
	var d xxhash.Digest
	d.Reset()
	binary.LittleEndian.PutUint64(buf[:8], parent)
	_, _ = d.Write(buf[:8])
	_, _ = d.WriteString(block)
	return d.Sum64()
}

// Seed returns a chain seed derived from parts, typically the model name, the
// LoRA adapter name and a cache salt, so that prompts for different models or
// adapters never share block hashes. Each part is framed by its length, so
// Seed("ab", "c") differs from Seed("a", "bc").
func Seed(parts ...string) uint64 {
	var d xxhash.Digest
	d.Reset()
	var le [8]byte
	for _, p := range parts {
		binary.LittleEndian.PutUint64(le[:], uint64(len(p)))
		_, _ = d.Write(le[:])
		_, _ = d.WriteString(p)
	}
	return d.Sum64()
}
