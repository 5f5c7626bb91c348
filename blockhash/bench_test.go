package blockhash

import (
	"encoding/binary"
	"testing"

	"github.com/zeebo/xxh3"
)

// mixChain is the hand-written multiply–xorshift chain that router/prefix.TokenBlockHash and
// sim/engine.BlockHash each carried before this package; kept here only as the baseline of
// the benchmarks below.
func mixChain(parent uint64, tokens []int32) uint64 {
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

// prefixed hashes parent ‖ tokens unseeded: the alternative to seeding with the parent.
func prefixed(parent uint64, tokens []int32) uint64 {
	var buf [8 + 4*64]byte
	binary.LittleEndian.PutUint64(buf[:], parent)
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(buf[8+4*i:], uint32(t))
	}
	return xxh3.Hash(buf[:8+4*len(tokens)])
}

func benchTokens(n int) []int32 {
	toks := make([]int32, n)
	for i := range toks {
		toks[i] = int32(i*7919%128000 + 1)
	}
	return toks
}

// BenchmarkBlock chains 512 blocks (an 8k-token prompt) with each candidate function: the
// chain is serial, so this measures latency per block, as a router hashing a prompt pays it.
func BenchmarkBlock(b *testing.B) {
	for _, bs := range []int{16, 64} {
		toks := benchTokens(512 * bs)
		for _, c := range []struct {
			name string
			fn   func(uint64, []int32) uint64
		}{{"mix", mixChain}, {"xxh3seed", Block}, {"xxh3prefixed", prefixed}} {
			b.Run(c.name+"/block="+itoa(bs), func(b *testing.B) {
				b.ReportAllocs()
				var h uint64
				for b.Loop() {
					h = 1
					for i := 0; i < len(toks); i += bs {
						h = c.fn(h, toks[i:i+bs])
					}
				}
				sink = h
			})
		}
	}
}

// BenchmarkAppendChain hashes an 8k-token prompt into its 512 16-token block keys.
func BenchmarkAppendChain(b *testing.B) {
	toks := benchTokens(8192)
	dst := make([]uint64, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendChain(dst[:0], 7, toks, 16)
	}
	sink = dst[len(dst)-1]
}

var sink uint64

func itoa(n int) string {
	if n == 16 {
		return "16"
	}
	return "64"
}
