package prefix

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
)

// promptChars is an 8k-token prompt at about 4 characters per token.
const promptChars = 32 * 1024

// similarTexts returns n prompts of promptChars characters in groups of
// eight that share their first half (a system prompt), like chat traffic.
func similarTexts(n int, seed uint64) []string {
	r := rand.New(rand.NewPCG(seed, 1))
	words := strings.Fields("the of and to in is you that it he was for on are as with his they at be this have from or one had by word but not what all were we when your can said there use an each which she do how their if will up other about out many then them these so some her would make like him into time has look two more write go see number no way could people my than first water been call who oil its now find long down day did get come made may part")
	chunk := func() string {
		var b strings.Builder
		for b.Len() < promptChars/2 {
			b.WriteString(words[r.IntN(len(words))])
			b.WriteByte(' ')
		}
		return b.String()[:promptChars/2]
	}
	systems := make([]string, (n+7)/8)
	for i := range systems {
		systems[i] = chunk()
	}
	out := make([]string, n)
	for i := range out {
		out[i] = systems[i/8] + chunk()
	}
	return out
}

func BenchmarkChainHashString(b *testing.B) {
	text := similarTexts(1, 1)[0]
	for _, bs := range []int{64, 128} {
		b.Run("32KB/block="+strconv.Itoa(bs), func(b *testing.B) {
			dst := make([]uint64, 0, promptChars/bs+1)
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				dst = ChainHashString(dst[:0], 7, text, bs, 0, true)
			}
		})
	}
}

// benchHashes returns the block hashes of n similar prompts.
func benchHashes(n, blockSize, maxBlocks int) [][]uint64 {
	texts := similarTexts(n, 2)
	out := make([][]uint64, n)
	for i, t := range texts {
		out[i] = ChainHashString(nil, 3, t, blockSize, maxBlocks, false)
	}
	return out
}

// BenchmarkBlockStore measures one prompt of 250 blocks (32k characters in
// AIBrix's shipped 128-character blocks) against a store already holding
// 400 prompts (100,000 blocks) across 64 endpoints.
func BenchmarkBlockStore(b *testing.B) {
	const endpoints = 64
	prompts := benchHashes(400, 128, 0)
	s, err := NewBlockStore(DefaultBlockStoreCapacity)
	if err != nil {
		b.Fatal(err)
	}
	for i, h := range prompts {
		s.Add(h, int32(i%endpoints), t0)
	}
	out := make([]int, endpoints)
	b.Run("Add/blocks=250", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			s.Add(prompts[i%len(prompts)], int32(i%endpoints), t0.Add(time.Duration(i)))
			i++
		}
	})
	b.Run("Match/blocks=250", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			s.Match(prompts[i%len(prompts)], nil, out)
			i++
		}
	})
	b.Run("Match/blocks=250/held-by-all", func(b *testing.B) {
		for ep := range int32(endpoints) {
			s.Add(prompts[0], ep, t0)
		}
		b.ReportAllocs()
		for b.Loop() {
			s.Match(prompts[0], nil, out)
		}
	})
}

// BenchmarkIndex measures one prompt of 256 blocks (GIE's maxPrefixBlocks)
// against an index already holding 400 prompts across 64 endpoints.
func BenchmarkIndex(b *testing.B) {
	const endpoints = 64
	prompts := benchHashes(400, 64, 256)
	x, err := NewIndex(DefaultIndexCapacity)
	if err != nil {
		b.Fatal(err)
	}
	for i, h := range prompts {
		x.Add(h, int32(i%endpoints))
	}
	out := make([]int, endpoints)
	b.Run("Add/blocks=256", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			x.Add(prompts[i%len(prompts)], int32(i%endpoints))
			i++
		}
	})
	b.Run("Match/blocks=256", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			x.Match(prompts[i%len(prompts)], out)
			i++
		}
	})
	b.Run("Match/blocks=256/held-by-all", func(b *testing.B) {
		for ep := range int32(endpoints) {
			x.Add(prompts[0], ep)
		}
		b.ReportAllocs()
		for b.Loop() {
			x.Match(prompts[0], out)
		}
	})
}

// BenchmarkTree measures 32k-character prompts against a tree holding 64
// similar prompts (8 shared system prompts) across 64 tenants.
func BenchmarkTree(b *testing.B) {
	const tenants = 64
	texts := similarTexts(tenants+64, 4)
	newTree := func() *Tree {
		tr := NewTree()
		for i, t := range texts[:tenants] {
			tr.Insert(t, int32(i), int64(i))
		}
		return tr
	}
	b.Run("Match/chars=32k", func(b *testing.B) {
		tr := newTree()
		dst := make([]int32, 0, tenants)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			// Alternate between a held prompt and an unseen one of the same
			// group (which matches only the 16k shared half).
			_, dst = tr.Match(texts[i%len(texts)], nil, dst[:0])
			i++
		}
	})
	b.Run("Insert/held/chars=32k", func(b *testing.B) {
		tr := newTree()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			tr.Insert(texts[i%tenants], int32(i%tenants), int64(tenants+i))
			i++
		}
	})
	b.Run("Insert/new+evict/chars=32k", func(b *testing.B) {
		// One tenant keeps receiving prompts it does not hold and is
		// evicted Ray-style (above 400k characters, down to 360k).
		tr := newTree()
		const tenant = tenants
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			tr.Insert(texts[i%len(texts)], tenant, int64(tenants+i))
			if tr.TenantSize(tenant) > 400_000 {
				tr.EvictTenant(tenant, 360_000)
			}
			i++
		}
	})
}

// BenchmarkAppendTokenBlockHashes measures hashing an 8k-token prompt into its 512 16-token
// blocks: the floor of every KV-event policy's decision, which must hash the request.
func BenchmarkAppendTokenBlockHashes(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	toks := make([]int32, 8192)
	for i := range toks {
		toks[i] = int32(r.IntN(128000))
	}
	dst := make([]uint64, 0, len(toks)/16)
	b.SetBytes(int64(4 * len(toks)))
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendTokenBlockHashes(dst[:0], 7, toks, 16)
	}
}

// BenchmarkHolders measures the KV-event index at the decision benchmark's scale: 64
// 8k-token prompts in 8 groups sharing three quarters of their 512 16-token blocks, each
// stored on one of 64 endpoints; LeadingRun walks one prompt's 512 blocks.
func BenchmarkHolders(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	prompts := make([][]uint64, 64)
	var system []int32
	for i := range prompts {
		if i%8 == 0 {
			system = make([]int32, 6144)
			for k := range system {
				system[k] = int32(r.IntN(128000))
			}
		}
		toks := append([]int32(nil), system...)
		for range 2048 {
			toks = append(toks, int32(r.IntN(128000)))
		}
		prompts[i] = AppendTokenBlockHashes(nil, 1, toks, 16)
	}
	x := NewHolders(0)
	for i, p := range prompts {
		for _, h := range p {
			x.Store(h, Holder{Endpoint: int32(i % 64)})
		}
	}
	run := make([]int, 64)
	b.Run("LeadingRun/blocks=512", func(b *testing.B) {
		b.ReportAllocs()
		k := 0
		for b.Loop() {
			x.LeadingRun(prompts[k%len(prompts)], run)
			k++
		}
	})
	b.Run("Store/blocks=512", func(b *testing.B) {
		b.ReportAllocs()
		k := 0
		for b.Loop() {
			for _, h := range prompts[k%len(prompts)] {
				x.Store(h, Holder{Endpoint: int32(k % 64)})
			}
			k++
		}
	})
}
