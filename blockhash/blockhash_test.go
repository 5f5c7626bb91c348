package blockhash

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/zeebo/xxh3"
)

// plainKey is the definition of a block key written the obvious way: one 4-byte
// little-endian word per token, then XXH3-64 seeded with the parent.
func plainKey(parent uint64, tokens []int32) uint64 {
	b := make([]byte, 0, 4*len(tokens))
	for _, t := range tokens {
		b = binary.LittleEndian.AppendUint32(b, uint32(t))
	}
	return xxh3.HashSeed(b, parent)
}

func testTokens(n int) []int32 {
	toks := make([]int32, n)
	for i := range toks {
		toks[i] = int32(i*2654435761) ^ int32(i) // negative ids too: the engine's output tokens are
	}
	return toks
}

// bothByteOrders runs f as on this machine and as on a machine of the other byte order,
// where tokens are converted to little-endian words before hashing instead of hashed in place.
func bothByteOrders(t *testing.T, f func(t *testing.T)) {
	native := littleEndian
	defer func() { littleEndian = native }()
	for _, le := range []bool{native, !native} {
		littleEndian = le
		t.Run(fmt.Sprintf("littleEndian=%v", le), f)
	}
}

func TestBlockIsXXH3OfLittleEndianWords(t *testing.T) {
	bothByteOrders(t, testBlockIsXXH3OfLittleEndianWords)
}

func testBlockIsXXH3OfLittleEndianWords(t *testing.T) {
	toks := testTokens(300)
	for n := 0; n <= len(toks); n++ {
		for _, parent := range []uint64{0, 1, 0x9e3779b97f4a7c15} {
			if got, want := Block(parent, toks[:n]), plainKey(parent, toks[:n]); got != want {
				t.Fatalf("Block(%#x, %d tokens) = %#x, want %#x", parent, n, got, want)
			}
		}
	}
}

func TestAppendChainChainsBlocks(t *testing.T) { bothByteOrders(t, testAppendChainChainsBlocks) }

func testAppendChainChainsBlocks(t *testing.T) {
	toks := testTokens(5000)
	for _, bs := range []int{1, 3, 16, 17, 64, 65, 1024, 1025, 6000} {
		for _, n := range []int{0, bs - 1, bs, 4096, 4097, len(toks)} {
			if n < 0 || n > len(toks) {
				continue
			}
			var want []uint64
			parent := uint64(42)
			for i := 0; i+bs <= n; i += bs {
				parent = plainKey(parent, toks[i:i+bs])
				want = append(want, parent)
			}
			got := AppendChain([]uint64{7}, 42, toks[:n], bs)
			if len(got) != 1+len(want) || got[0] != 7 {
				t.Fatalf("block %d, %d tokens: %d keys after the kept one, want %d", bs, n, len(got)-1, len(want))
			}
			for i := range want {
				if got[1+i] != want[i] {
					t.Fatalf("block %d, %d tokens: key %d = %#x, want %#x", bs, n, i, got[1+i], want[i])
				}
			}
		}
	}
}

// TestKnownKeys pins keys as computed on amd64 (little-endian): the same values on every
// platform is what lets a router and an engine on different machines agree.
func TestKnownKeys(t *testing.T) {
	cases := []struct {
		name string
		got  uint64
		want uint64
	}{
		{"Salt(llama)", Salt("llama"), 0x3dab8abe7070521b},
		{"Block(1, 1..16)", Block(1, []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}), 0x653f4f3294f0a54d},
		{"Block(0, -1)", Block(0, []int32{-1}), 0xcd6b1c920d3f662c},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
}

func TestSaltIsKeyOfNameBytes(t *testing.T) {
	name := "meta-llama/Llama-3.1-8B-Instruct\x00sql-lora"
	toks := make([]int32, len(name))
	for i := range name {
		toks[i] = int32(name[i])
	}
	if Salt(name) != plainKey(0, toks) {
		t.Fatal("Salt differs from the key of the name's bytes as tokens")
	}
	if Salt("a") == Salt("b") {
		t.Fatal("two names share a salt")
	}
}

// FuzzAppendChain checks the chunked chain against the plain definition for any tokens and
// block size.
func FuzzAppendChain(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9}, uint8(2), uint64(3))
	f.Fuzz(func(t *testing.T, raw []byte, bs uint8, salt uint64) {
		toks := make([]int32, len(raw)/4)
		for i := range toks {
			toks[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		got := AppendChain(nil, salt, toks, int(bs))
		parent, n := salt, 0
		for i := 0; bs > 0 && i+int(bs) <= len(toks); i += int(bs) {
			parent = plainKey(parent, toks[i:i+int(bs)])
			if n >= len(got) || got[n] != parent {
				t.Fatalf("key %d differs (block %d, %d tokens)", n, bs, len(toks))
			}
			n++
		}
		if n != len(got) {
			t.Fatalf("%d keys, want %d", len(got), n)
		}
	})
}

// TestNoAllocations keeps hashing off the heap for blocks of up to 256 tokens, and for chains.
func TestNoAllocations(t *testing.T) {
	toks := testTokens(8192)
	dst := make([]uint64, 0, 8192)
	for _, n := range []int{1, 16, 64, 65, 256} {
		if a := testing.AllocsPerRun(20, func() { sink = Block(1, toks[:n]) }); a != 0 {
			t.Errorf("Block of %d tokens: %v allocations", n, a)
		}
	}
	for _, bs := range []int{16, 64, 1024} {
		if a := testing.AllocsPerRun(20, func() { dst = AppendChain(dst[:0], 1, toks, bs) }); a != 0 {
			t.Errorf("AppendChain of %d-token blocks: %v allocations", bs, a)
		}
	}
}
