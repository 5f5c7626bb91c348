package engine

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"kvroute/gpumodel"
	"kvroute/sim"
)

// Each test here pins one rule of Semantics: it runs the newest release, and the newest
// release without that one rule, and checks what the rule changes. The vLLM code each rule
// follows is cited on its Semantics field and in docs/simulator.md.

// without returns the newest release with one rule turned off by off.
func without(name string, off func(*Semantics)) Release {
	r := NewestRelease
	r.Name = "newest-without-" + name
	off(&r.Semantics)
	return r
}

func TestParseRelease(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"", NewestRelease.Name}, {"latest", NewestRelease.Name}, {"v0.33", NewestRelease.Name},
		{"0.33", NewestRelease.Name}, {" V0.33 ", NewestRelease.Name},
		{"v0.8-v0.10", LegacyRelease.Name}, {"legacy", LegacyRelease.Name},
		{"v0.6", V0Release.Name}, {"0.6", V0Release.Name}, {"v0", V0Release.Name},
	} {
		got, err := ParseRelease(tc.in)
		if err != nil || got.Name != tc.want {
			t.Errorf("ParseRelease(%q) = %q, %v; want %q", tc.in, got.Name, err, tc.want)
		}
	}
	for _, bad := range []string{"v0.5", "0.34", "vllm"} {
		if _, err := ParseRelease(bad); err == nil || !strings.Contains(err.Error(), "v0.33") {
			t.Errorf("ParseRelease(%q): error %v, want one listing the releases", bad, err)
		}
	}
}

// vLLM's scheduler_reserve_full_isl (PR #37307): a waiting request whose whole prompt does not
// fit waits, where first-chunk admission lets it in and then preempts to make room.
func TestWholePromptAdmission(t *testing.T) {
	run := func(rel Release) (*harness, Metrics) {
		h := newHarnessFor(t, rel, 24, 64, time.Millisecond)
		h.submitAt(0, &Request{ID: "a", Prompt: tokens(1, 160), OutputTokens: 60}) // 10 blocks, then 14
		h.submitAt(sim.At(2*time.Millisecond), &Request{ID: "b", Prompt: tokens(2, 200), OutputTokens: 4})
		h.run()
		return h, h.r.Metrics()
	}
	h, m := run(NewestRelease)
	if m.Preemptions != 0 || h.results["b"].FirstToken < h.results["a"].Finish {
		t.Fatalf("whole-prompt admission: %d preemptions, b's first token %v before a finished at %v",
			m.Preemptions, h.results["b"].FirstToken, h.results["a"].Finish)
	}
	_, m = run(without("full-prompt", func(s *Semantics) { s.ReserveFullPrompt = false }))
	if m.Preemptions == 0 {
		t.Fatal("first-chunk admission: b's first chunk fits, its prompt does not: want preemptions")
	}
}

// vLLM's batch queue (EngineCore.step_with_batch_queue, vllm/v1/engine/core.py @ 00080ee1: a new
// batch is scheduled while the queue is not full, and the oldest is waited on only when it is
// full or nothing more can be scheduled): the batch run after the one in flight
// is scheduled when that one starts, so a request arriving mid-step waits one more step; on an
// idle engine a request starts at once.
func TestAsyncSchedulingWaitsOneStep(t *testing.T) {
	run := func(rel Release) (first, alone sim.Time) {
		h := newHarnessFor(t, rel, 200, 0, 10*time.Millisecond)
		h.submitAt(0, &Request{ID: "long", Prompt: tokens(1, 40), OutputTokens: 10})
		h.submitAt(sim.At(15*time.Millisecond), &Request{ID: "mid", Prompt: tokens(2, 40), OutputTokens: 2})
		h.submitAt(sim.At(time.Second), &Request{ID: "alone", Prompt: tokens(3, 40), OutputTokens: 2})
		h.run()
		return h.results["mid"].FirstToken, h.results["alone"].FirstToken - sim.At(time.Second)
	}
	first, alone := run(NewestRelease)
	if first != sim.At(40*time.Millisecond) || alone != sim.At(10*time.Millisecond) {
		t.Fatalf("async: mid-step arrival's first token at %v (want 40ms), idle one after %v (want 10ms)", first, alone)
	}
	first, alone = run(without("async", func(s *Semantics) { s.AsyncScheduling = false }))
	if first != sim.At(30*time.Millisecond) || alone != sim.At(10*time.Millisecond) {
		t.Fatalf("sync: mid-step arrival's first token at %v (want 30ms), idle one after %v (want 10ms)", first, alone)
	}
}

// With the batch queue the engine's CPU work for a step (scheduling, output processing)
// overlaps the GPU's work on the previous one: a step that follows another takes the longer
// of the two, not their sum. The first step on an idle engine pays both.
func TestAsyncSchedulingOverlapsCPU(t *testing.T) {
	d := gpumodel.DefaultDeployment(gpumodel.H100SXM80GB(), gpumodel.Llama31x8B(), 1)
	durations := func(rel Release) []time.Duration {
		var out []time.Duration
		k := sim.NewKernel()
		r, err := New(k, Config{Deployment: d, Release: rel}, Hooks{
			Step: func(_ sim.Time, d time.Duration, _ gpumodel.Step) { out = append(out, d) },
		})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 8 {
			r.Submit(&Request{ID: fmt.Sprint(i), Prompt: tokens(uint64(i), 100), OutputTokens: 5})
		}
		if err := k.Run(sim.Never); err != nil {
			t.Fatal(err)
		}
		return out
	}
	async := durations(NewestRelease)
	sync := durations(without("async", func(s *Semantics) { s.AsyncScheduling = false }))
	if len(async) != len(sync) || len(sync) < 3 {
		t.Fatalf("steps: async %d, sync %d", len(async), len(sync))
	}
	if async[0] != sync[0] {
		t.Fatalf("first step on an idle engine: async %v, sync %v; want equal", async[0], sync[0])
	}
	cpu := d.Overheads.PerStep + 8*d.Overheads.PerRequest // 8 decoding sequences
	for i := 1; i < len(sync)-1; i++ {
		if diff := sync[i] - async[i]; diff < cpu-2 || diff > cpu+2 {
			t.Fatalf("step %d: sync %v − async %v = %v, want the CPU time %v hidden", i, sync[i], async[i], diff, cpu)
		}
	}
}

// vLLM hashes full blocks of generated tokens too (BlockPool.cache_full_blocks caches them:
// vllm/v1/core/block_pool.py @ 002f3491 lines 153–183, a full block of generated tokens is
// hashed and appended to the request's block_hashes "in case it will be preempted in the
// future"; @ c59cb794 lines 209–309 the Request computes the hashes as tokens are appended,
// docstring lines 223–224, and cache_full_blocks caches them): a request preempted after decoding
// hits its own output when it is recomputed. Here b is preempted after about 150 tokens of
// output, when a needs its 17th block; a then finishes and b resumes.
func TestPreemptedRequestHitsItsOutput(t *testing.T) {
	run := func(rel Release) Metrics {
		h := newHarnessFor(t, rel, 32, 0, time.Millisecond)
		h.submitAt(0, &Request{ID: "a", Prompt: tokens(1, 100), OutputTokens: 160})
		h.submitAt(sim.At(time.Millisecond/2), &Request{ID: "b", Prompt: tokens(2, 100), OutputTokens: 300})
		h.run()
		return h.r.Metrics()
	}
	count := func(s *Semantics) { s.SkipPreemptedStats = false } // so the resumed lookups show
	with := run(without("preempted-stats", count))
	none := run(without("output-hashes", func(s *Semantics) { count(s); s.HashOutput = false }))
	t.Logf("with output hashes: %d preemptions, %d tokens hit; without: %d, %d", with.Preemptions, with.PrefixHits, none.Preemptions, none.PrefixHits)
	if with.Preemptions == 0 || none.Preemptions == 0 {
		t.Fatalf("want preemptions: %d with output hashes, %d without", with.Preemptions, none.Preemptions)
	}
	// Without output hashes a resumed request hits at most its prompt's 6 full blocks.
	if maxHit := none.Preemptions * 96; none.PrefixHits > maxHit {
		t.Fatalf("without output hashes: %d tokens hit over %d resumptions, more than their prompts", none.PrefixHits, none.Preemptions)
	}
	if with.PrefixHits <= with.Preemptions*96 {
		t.Fatalf("with output hashes: %d tokens hit over %d resumptions: no output block was hit", with.PrefixHits, with.Preemptions)
	}
}

// vLLM's prefix-cache counters leave preempted requests' lookups out (PR #25787:
// PrefixCacheStats.record(..., preempted=True) counts them in preempted_* instead).
func TestPreemptedLookupsNotCounted(t *testing.T) {
	run := func(rel Release) Metrics {
		h := newHarnessFor(t, rel, 65, 0, time.Millisecond)
		for i := range 12 {
			h.submitAt(0, &Request{ID: fmt.Sprint(i), Prompt: tokens(uint64(i), 100), OutputTokens: 300})
		}
		h.run()
		return h.r.Metrics()
	}
	m := run(NewestRelease)
	if m.Preemptions == 0 || m.PrefixQueries != m.PromptTokens {
		t.Fatalf("newest: %d preemptions, %d tokens queried, want only the %d prompt tokens of first admissions",
			m.Preemptions, m.PrefixQueries, m.PromptTokens)
	}
	m = run(without("preempted-stats", func(s *Semantics) { s.SkipPreemptedStats = false }))
	if m.Preemptions == 0 || m.PrefixQueries <= m.PromptTokens {
		t.Fatalf("counting preempted lookups: %d preemptions, %d tokens queried, %d prompt tokens", m.Preemptions, m.PrefixQueries, m.PromptTokens)
	}
}

// vLLM reserves block 0 as the null block (BlockPool.__init__, vllm/v1/core/block_pool.py
// @ 002f3491 line 77, @ c59cb794 line 174: null_block =
// free_block_queue.popleft()): a request needing every block of the pool never fits.
func TestNullBlock(t *testing.T) {
	for _, tc := range []struct {
		rel  Release
		want Status
	}{{NewestRelease, Rejected}, {without("null-block", func(s *Semantics) { s.NullBlock = false }), Completed}} {
		h := newHarnessFor(t, tc.rel, 10, 0, time.Millisecond)
		h.submitAt(0, &Request{ID: "all", Prompt: tokens(1, 159), OutputTokens: 1}) // 160 tokens: 10 blocks
		h.run()
		if got := h.results["all"].Status; got != tc.want || h.r.Metrics().NumGPUBlocks != 10 {
			t.Errorf("%s: %v, want %v; num_gpu_blocks %d, want 10", tc.rel.Name, got, tc.want, h.r.Metrics().NumGPUBlocks)
		}
	}
}

// vLLM keeps every block cached under a hash (vllm/v1/core/block_pool.py @ c59cb794:
// BlockHashToBlockMap lines 32–125, no de-duplication (NOTE #1, lines 46–50), get_one_block
// lines 60–71, insert lines 73–89; @ 002f3491 a dict of blocks per hash, lines 65–73; get_cached_block returns
// the first): when the first is evicted, its duplicate still hits. Without, a duplicate is
// never cached.
func TestDuplicateBlocksHittable(t *testing.T) {
	for _, dup := range []bool{true, false} {
		p := newBlockPool(4, Semantics{DuplicateHits: dup})
		var events []string
		p.events = func(stored bool, h uint64) { events = append(events, fmt.Sprint(stored, h)) }
		a, b := p.popFree(), p.popFree()
		p.cache(a, blockKey{hash: 7})
		p.cache(b, blockKey{hash: 7})
		p.release([]int32{a})
		p.popFree() // blocks 2 and 3, never used, go first
		p.popFree()
		if got := p.popFree(); got != a {
			t.Fatalf("popped %d, want a (%d)", got, a)
		}
		got, ok := p.lookup(blockKey{hash: 7})
		if ok != dup || (ok && got != b) {
			t.Fatalf("dupHits %v: after the first block is evicted, lookup = %d, %v", dup, got, ok)
		}
		want := []string{"true 7", "false 7"}
		if dup {
			want = want[:1] // the hash is still cached, in b
		}
		if fmt.Sprint(events) != fmt.Sprint(want) {
			t.Fatalf("dupHits %v: events %v, want %v", dup, events, want)
		}
	}
}

// vLLM's BlockPool.free_blocks puts freed blocks without a hash at the head of the free
// queue, so they are reused before any cached block is evicted; hashed ones go to the tail
// (vllm/v1/core/block_pool.py @ c59cb794 lines 400–423: prepend_n for the fresh blocks, line
// 421, append_n for the cached ones, line 423; @ 002f3491 every freed block went to the tail).
func TestUnhashedFreedBlocksFirst(t *testing.T) {
	for _, head := range []bool{true, false} {
		p := newBlockPool(3, Semantics{UnhashedToHead: head})
		x, y, z := p.popFree(), p.popFree(), p.popFree()
		p.cache(y, blockKey{hash: 1})
		p.cache(z, blockKey{hash: 2})
		p.release([]int32{x, y, z}) // last block first: z, y, then x, which has no hash
		want := z                   // the tail order: z, y, x
		if head {
			want = x
		}
		if got := p.popFree(); got != want {
			t.Fatalf("unhashedToHead %v: popped %d, want %d", head, got, want)
		}
		if _, ok := p.lookup(blockKey{hash: 2}); ok != head {
			t.Fatalf("unhashedToHead %v: z's hash still cached = %v", head, ok)
		}
	}
}

// TestHitBlockManyTimes hits free cached blocks and frees them again, hundreds of times each
// with no pop in between, then hits hash 2's block and hash 1's once more, so that the order
// of the last entries matters: stale free-queue entries fill the ring (compaction), or, in a
// pool large enough that the ring does not fill first, a block's count of them would wrap a
// byte. Every pop agrees with the reference pool's.
func TestHitBlockManyTimes(t *testing.T) {
	for _, c := range []struct {
		n, hashes, rounds int
		sem               Semantics
	}{
		{6, 3, 700, Semantics{}},
		{6, 3, 700, Semantics{DuplicateHits: true, UnhashedToHead: true}},
		{200, 1, 300, Semantics{DuplicateHits: true, UnhashedToHead: true}},
	} {
		p, ref := newBlockPool(c.n, c.sem), newRefPool(c.n, c.sem)
		var all []int32
		for range c.n {
			all = append(all, p.popFree())
			ref.popFree()
		}
		for i, b := range all[:4] { // four cached blocks, the others without a hash
			p.cache(b, testKey(uint64(i+1)))
			ref.cache(b, uint64(i+1))
		}
		p.release(all)
		ref.release(all)
		hit := func(h uint64) {
			b, ok := p.lookup(testKey(h))
			rb, rok := ref.lookup(h)
			if !ok || !rok || b != rb {
				t.Fatalf("%+v: lookup %d = %d %v, reference %d %v", c, h, b, ok, rb, rok)
			}
			p.touch(b)
			ref.touch(b)
			p.release([]int32{b})
			ref.release([]int32{b})
		}
		for round := range c.rounds {
			hit(uint64(1 + round%c.hashes))
		}
		hit(2)
		hit(1)
		for range c.n {
			if b, rb := p.popFree(), ref.popFree(); b != rb {
				t.Fatalf("%+v: popped %d, reference %d", c, b, rb)
			}
		}
	}
}

// TestPoolMatchesReferencePool drives the block pool and the reference pool with the same
// random operations, on every combination of the free-queue and duplicate rules: every pop
// and lookup agrees, and the KV events published leave exactly the reference's hashes cached.
//
// Half the seeds draw from 5 hashes, half from 40, sixteen to an anchor, so that lines
// overflow and entries share probe runs and move when one is removed; after every operation
// each cached block's record of its table position must lead back to it.
func TestPoolMatchesReferencePool(t *testing.T) {
	for seed := range uint64(400) {
		rng := rand.New(rand.NewPCG(seed, 5))
		keys := 5
		if seed >= 200 {
			keys = 40
		}
		sem := Semantics{DuplicateHits: seed%2 == 0, UnhashedToHead: seed%4 < 2}
		n := 4 + rng.IntN(12)
		p, ref := newBlockPool(n, sem), newRefPool(n, sem)
		stored := map[uint64]bool{}
		p.events = func(s bool, h uint64) {
			if stored[h] == s {
				t.Fatalf("seed %d: event stored=%v for hash %d, already so", seed, s, h)
			}
			stored[h] = s
		}
		var held []int32
		for step := range 400 {
			switch op := rng.IntN(4); {
			case op == 0 && p.numFree > 0:
				b, rb := p.popFree(), ref.popFree()
				if b != rb {
					t.Fatalf("seed %d step %d: popped %d, reference %d", seed, step, b, rb)
				}
				held = append(held, b)
			case op == 1 && len(held) > 0:
				i := rng.IntN(len(held))
				b := held[i]
				if !p.hashed(b) && !ref.hashed[b] {
					h := uint64(1 + rng.IntN(keys))
					p.cache(b, testKey(h))
					ref.cache(b, h)
				}
			case op == 2 && len(held) > 0:
				i := rng.IntN(len(held))
				b := held[i]
				held = append(held[:i], held[i+1:]...)
				p.release([]int32{b})
				ref.release([]int32{b})
			default:
				h := uint64(1 + rng.IntN(keys))
				b, ok := p.lookup(testKey(h))
				rb, rok := ref.lookup(h)
				if ok != rok || b != rb {
					t.Fatalf("seed %d step %d: lookup %d = %d %v, reference %d %v", seed, step, h, b, ok, rb, rok)
				}
				if ok && p.blocks[b].ref == 0 {
					p.touch(b)
					ref.touch(b)
					held = append(held, b)
				}
			}
			for h := uint64(1); h <= uint64(keys); h++ {
				if _, want := ref.cached[h]; stored[h] != want {
					t.Fatalf("seed %d step %d: hash %d published cached=%v, reference %v", seed, step, h, stored[h], want)
				}
			}
			if err := checkSlots(p); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
		}
	}
}

// testKey is the key of test hash h: sixteen hashes share an anchor, four a lane, so that
// lines overflow.
func testKey(h uint64) blockKey {
	return blockKey{hash: h, anchor: (h - 1) / 16, lane: uint32(h-1) % 4}
}

// checkSlots checks that the table holds exactly the hashes of the pool's table blocks, each
// at the position its block records under its hash's tag, that every duplicate is on its
// hash's chain, and that each lane says whether its second slot is taken and counts its
// entries in the overflow table.
func checkSlots(p *blockPool) error {
	t := &p.cached
	heads := 0
	for b := range int32(p.size()) {
		switch s := p.blocks[b].slot; {
		case s == slotSecond:
			c, ok := t.get(testKey(p.hashOf(b)))
			for ok && c != b {
				c, ok = p.dupNext[c]-1, p.dupNext[c] != 0
			}
			if !ok {
				return fmt.Errorf("duplicate block %d is not on its hash's chain", b)
			}
		case s != 0 && s != slotParked:
			heads++
			next := int32(-1)
			if p.dupHits {
				next = p.dupNext[b] - 1
			}
			if chained := s&slotChained != 0; chained != (next >= 0) {
				return fmt.Errorf("block %d: chained flag %v, next duplicate %d", b, chained, next)
			}
			pos := slotPos(s)
			if got := t.block(pos); got != b {
				return fmt.Errorf("block %d records position %d, which holds block %d", b, pos, got)
			}
			if int(pos) < len(t.lines) && t.lines[pos].tag&^metaMask != tagOf(p.hashOf(b)) {
				return fmt.Errorf("block %d's slot %d has tag %x, its hash %x", b, pos, t.lines[pos].tag, p.hashOf(b))
			}
			if c, ok := t.get(testKey(p.hashOf(b))); !ok || c != b {
				return fmt.Errorf("lookup of block %d's hash finds %d, %v", b, c, ok)
			}
		}
	}
	if heads != t.n {
		return fmt.Errorf("%d table entries, %d blocks in the table", t.n, heads)
	}
	return checkLanes(t)
}

// popFree takes the head of p's free queue, as popRun does for one block.
func (p *blockPool) popFree() int32 {
	var one [1]int32
	return p.popRun(one[:0], 1)[0]
}
