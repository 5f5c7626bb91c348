package prefix

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// naiveChain is the textbook definition ChainHash must match: it builds each
// LE8(parent) ‖ block buffer and hashes it in one call.
func naiveChain(seed uint64, data []byte, blockSize, maxBlocks int, partial bool) []uint64 {
	var out []uint64
	parent := seed
	for start := 0; start < len(data); start += blockSize {
		end := start + blockSize
		if end > len(data) {
			if !partial {
				break
			}
			end = len(data)
		}
		if maxBlocks > 0 && len(out) == maxBlocks {
			break
		}
		buf := binary.LittleEndian.AppendUint64(nil, parent)
		parent = xxhash.Sum64(append(buf, data[start:end]...))
		out = append(out, parent)
	}
	return out
}

func TestChainHash(t *testing.T) {
	data := []byte("The quick brown fox jumps over the lazy dog") // 43 bytes
	tests := []struct {
		name      string
		data      []byte
		blockSize int
		maxBlocks int
		partial   bool
		wantLen   int
	}{
		{name: "empty", data: nil, blockSize: 4, wantLen: 0},
		{name: "empty partial", data: nil, blockSize: 4, partial: true, wantLen: 0},
		{name: "shorter than a block", data: data[:3], blockSize: 4, wantLen: 0},
		{name: "shorter than a block partial", data: data[:3], blockSize: 4, partial: true, wantLen: 1},
		{name: "exact blocks", data: data[:40], blockSize: 8, wantLen: 5},
		{name: "exact blocks partial adds nothing", data: data[:40], blockSize: 8, partial: true, wantLen: 5},
		{name: "trailing bytes dropped", data: data, blockSize: 8, wantLen: 5},
		{name: "trailing bytes hashed", data: data, blockSize: 8, partial: true, wantLen: 6},
		{name: "capped", data: data, blockSize: 4, maxBlocks: 3, wantLen: 3},
		{name: "cap counts partial", data: data, blockSize: 8, maxBlocks: 6, partial: true, wantLen: 6},
		{name: "cap above count", data: data, blockSize: 8, maxBlocks: 100, wantLen: 5},
		{name: "block of one byte", data: data[:5], blockSize: 1, wantLen: 5},
		{name: "zero block size", data: data, blockSize: 0, wantLen: 0},
		{name: "negative block size", data: data, blockSize: -3, partial: true, wantLen: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const seed = 42
			prior := []uint64{7, 8}
			got := ChainHash(prior[:2:2], seed, tc.data, tc.blockSize, tc.maxBlocks, tc.partial)
			if len(got) != 2+tc.wantLen {
				t.Fatalf("len = %d, want %d", len(got)-2, tc.wantLen)
			}
			if diff := cmp.Diff([]uint64{7, 8}, got[:2]); diff != "" {
				t.Errorf("dst prefix changed (-want +got):\n%s", diff)
			}
			if tc.blockSize > 0 {
				want := naiveChain(seed, tc.data, tc.blockSize, tc.maxBlocks, tc.partial)
				if diff := cmp.Diff(want, got[2:], cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("hashes differ from the definition (-want +got):\n%s", diff)
				}
			}
			gotS := ChainHashString(nil, seed, string(tc.data), tc.blockSize, tc.maxBlocks, tc.partial)
			if !slices.Equal(gotS, got[2:]) {
				t.Errorf("ChainHashString = %x, ChainHash = %x", gotS, got[2:])
			}
		})
	}
}

// TestChainStepVectors pins chainStep to published XXH64 values (seed 0) and to
// xxhash.Sum64 of the materialised LE8(parent) ‖ block on both of its paths (stack buffer up
// to stackBlock bytes, streaming digest above), so a change of hash primitive cannot change
// a single block hash.
func TestChainStepVectors(t *testing.T) {
	var buf [8 + stackBlock]byte
	// XXH64("", 0) = ef46db3751d8e999 and XXH64("a", 0) = d24ec4f1a98c6e5b are the
	// reference values of the xxHash test suite (Cyan4973/xxHash, tests/sanity_test_vectors.h)
	// and of cespare/xxhash's xxhash_test.go. With a zero parent the input is 8 zero bytes
	// plus the block, so check Sum64 itself against the vectors and chainStep against Sum64.
	for _, v := range []struct {
		in   string
		want uint64
	}{{"", 0xef46db3751d8e999}, {"a", 0xd24ec4f1a98c6e5b}, {"abc", 0x44bc2cf5ad770999}} {
		if got := xxhash.Sum64String(v.in); got != v.want {
			t.Fatalf("XXH64(%q) = %x, want %x", v.in, got, v.want)
		}
	}
	data := make([]byte, 3*stackBlock)
	for i := range data {
		data[i] = byte(i*7 + 3)
	}
	for _, parent := range []uint64{0, 1, 0xdeadbeefcafef00d} {
		for n := range len(data) + 1 {
			want := xxhash.Sum64(append(binary.LittleEndian.AppendUint64(nil, parent), data[:n]...))
			if got := chainStep(&buf, parent, string(data[:n])); got != want {
				t.Fatalf("parent %x, %d bytes: got %x, want %x", parent, n, got, want)
			}
		}
	}
}

// TestChainHashGolden pins the chained hashes of a fixed text: they were produced by the
// hand-written XXH64 this package used before it switched to cespare/xxhash, so the switch
// provably kept every hash (and with it every routing decision) the same.
func TestChainHashGolden(t *testing.T) {
	got := ChainHashString(nil, 42, "The quick brown fox jumps over the lazy dog", 8, 0, true)
	want := []uint64{0x11d5da24668df186, 0x8976b541a37b3f8b, 0x9b1e95f161f9a9e5, 0x68f91156f5bd1a5c, 0xcd75b4e330c6b31d, 0x9fdc86b83c58f0cc}
	if !slices.Equal(got, want) {
		t.Errorf("ChainHashString = %#x, want %#x", got, want)
	}
}

func TestChainHashSeedMatters(t *testing.T) {
	data := []byte("0123456789abcdef")
	a := ChainHash(nil, Seed("llama"), data, 4, 0, false)
	b := ChainHash(nil, Seed("llama", "lora-a"), data, 4, 0, false)
	for i := range a {
		if a[i] == b[i] {
			t.Errorf("block %d hashes equal under different seeds", i)
		}
	}
}

func TestSeed(t *testing.T) {
	tests := []struct {
		name string
		a, b []string
		same bool
	}{
		{name: "deterministic", a: []string{"m", "lora"}, b: []string{"m", "lora"}, same: true},
		{name: "boundaries matter", a: []string{"ab", "c"}, b: []string{"a", "bc"}},
		{name: "empty part matters", a: []string{"m"}, b: []string{"m", ""}},
		{name: "order matters", a: []string{"m", "x"}, b: []string{"x", "m"}},
		{name: "no parts vs one empty part", a: nil, b: []string{""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Seed(tc.a...) == Seed(tc.b...); got != tc.same {
				t.Errorf("Seed(%q) == Seed(%q) is %v, want %v", tc.a, tc.b, got, tc.same)
			}
		})
	}
}

func TestChainHashDoesNotAllocate(t *testing.T) {
	text := string(bytes.Repeat([]byte("abcdefgh"), 4096))
	dst := make([]uint64, 0, 512)
	allocs := testing.AllocsPerRun(100, func() {
		dst = ChainHashString(dst[:0], 1, text, 128, 0, true)
		dst = ChainHash(dst[:0], 1, []byte(text[:1024]), 64, 0, true)
	})
	// The []byte conversion above may allocate; ChainHash itself must not.
	if allocs > 1 {
		t.Errorf("allocs per run = %v, want at most 1", allocs)
	}
}

// FuzzChainHashPrefix checks the defining property: two inputs share their
// first k hashes exactly when they share their first k full blocks, and a
// trailing partial block never collides with a full one.
func FuzzChainHashPrefix(f *testing.F) {
	f.Add([]byte("hello world, hello"), []byte("hello world! hello"), uint8(4))
	f.Add([]byte("abcdabcdabcd"), []byte("abcdabcdabcd"), uint8(3))
	f.Add([]byte("abc"), []byte("abcd"), uint8(2))
	f.Add([]byte{}, []byte("x"), uint8(0))
	f.Fuzz(func(t *testing.T, a, b []byte, bs uint8) {
		blockSize := 1 + int(bs%16)
		ha := ChainHash(nil, 9, a, blockSize, 0, true)
		hb := ChainHash(nil, 9, b, blockSize, 0, true)
		full := func(data []byte) int { return len(data) / blockSize }
		for k := 0; k < len(ha) && k < len(hb); k++ {
			endA := min((k+1)*blockSize, len(a))
			endB := min((k+1)*blockSize, len(b))
			sameBlocks := bytes.Equal(a[:endA], b[:endB])
			if (ha[k] == hb[k]) != sameBlocks {
				t.Fatalf("block %d: hashes equal = %v, prefixes equal = %v", k, ha[k] == hb[k], sameBlocks)
			}
		}
		if n := full(a); len(ChainHash(nil, 9, a, blockSize, 0, false)) != n {
			t.Fatalf("full-block count wrong for %d bytes, block %d", len(a), blockSize)
		}
		if !slices.Equal(ha, naiveChain(9, a, blockSize, 0, true)) {
			t.Fatal("ChainHash differs from the definition")
		}
	})
}
