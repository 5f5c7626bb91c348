package engine

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"kvroute/gpumodel"
	"kvroute/sim"
)

// harness is one replica on its own kernel with a fixed step time, recording results.
type harness struct {
	t       *testing.T
	k       *sim.Kernel
	r       *Replica
	results map[string]Result
	order   []string
	maxUsed int
}

func newHarness(t *testing.T, blocks, maxBatch int, step time.Duration) *harness {
	t.Helper()
	return newHarnessFor(t, NewestRelease, blocks, maxBatch, step)
}

// newHarnessFor is newHarness on release rel.
func newHarnessFor(t *testing.T, rel Release, blocks, maxBatch int, step time.Duration) *harness {
	t.Helper()
	d := gpumodel.DefaultDeployment(gpumodel.H100SXM80GB(), gpumodel.Llama31x8B(), 1)
	if maxBatch > 0 {
		d.MaxNumBatchedTokens = maxBatch
	}
	h := &harness{t: t, k: sim.NewKernel(), results: map[string]Result{}}
	cfg := Config{Deployment: d, NumBlocks: blocks, Release: rel}
	if step > 0 {
		cfg.StepTime = func(gpumodel.Step) time.Duration { return step }
	}
	var err error
	h.r, err = New(h.k, cfg, Hooks{
		Done: func(res Result) {
			if _, dup := h.results[res.Request.ID]; dup {
				t.Errorf("request %s ended twice", res.Request.ID)
			}
			h.results[res.Request.ID] = res
			h.order = append(h.order, res.Request.ID)
		},
		Step: func(sim.Time, time.Duration, gpumodel.Step) {
			h.maxUsed = max(h.maxUsed, h.r.pool.used())
			h.checkRefs()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// checkRefs verifies that each block's ref count equals the number of block tables holding it.
func (h *harness) checkRefs() {
	h.t.Helper()
	want := make([]int32, h.r.pool.size())
	for _, list := range [][]*seq{h.r.running, h.r.waiting} {
		for _, s := range list {
			for _, b := range s.blocks {
				want[b]++
			}
		}
	}
	for _, held := range h.r.held { // prefill legs' blocks waiting for their readers
		for _, b := range held.blocks {
			want[b]++
		}
	}
	free := 0
	for b := range int32(h.r.pool.size()) {
		if n := h.r.pool.refCount(b); n != want[b] {
			h.t.Fatalf("block %d: ref %d, held by %d block tables", b, n, want[b])
		}
		if h.r.pool.refCount(b) == 0 {
			free++
		}
	}
	if free != h.r.pool.numFree {
		h.t.Fatalf("free queue has %d blocks, %d have no reference", h.r.pool.numFree, free)
	}
}

func (h *harness) submitAt(at sim.Time, req *Request) {
	h.k.Schedule(at, 1, func(sim.Time) { h.r.Submit(req) })
}

func (h *harness) run() {
	h.t.Helper()
	if err := h.k.Run(sim.Never); err != nil {
		h.t.Fatal(err)
	}
}

func tokens(seed uint64, n int) []int32 {
	rng := rand.New(rand.NewPCG(seed, 9))
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(rng.IntN(32000))
	}
	return out
}

func TestSecondSendHitsFullBlocksBelowLastToken(t *testing.T) {
	for _, n := range []int{1, 15, 16, 17, 32, 33, 100, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			h := newHarness(t, 1000, 0, time.Millisecond)
			p := tokens(uint64(n), n)
			h.submitAt(0, &Request{ID: "a", Prompt: p, OutputTokens: 4})
			h.submitAt(sim.At(time.Second), &Request{ID: "b", Prompt: p, OutputTokens: 4})
			h.run()
			if got, want := h.results["b"].CachedTokens, (n-1)/16*16; got != want {
				t.Fatalf("prompt of %d: second send hit %d tokens, want %d", n, got, want)
			}
			if h.results["a"].CachedTokens != 0 {
				t.Fatalf("first send hit %d tokens", h.results["a"].CachedTokens)
			}
			m := h.r.Metrics()
			if m.PrefixQueries != int64(2*n) || m.PrefixHits != int64((n-1)/16*16) {
				t.Fatalf("counters: queries %d hits %d", m.PrefixQueries, m.PrefixHits)
			}
		})
	}
}

func TestTimingFirstTokenAndFinish(t *testing.T) {
	h := newHarness(t, 1000, 2048, 10*time.Millisecond)
	var first sim.Time
	h.r.hooks.FirstToken = func(_ *Request, at sim.Time) { first = at }
	// 5,000 prompt tokens with a 2,048-token budget: 3 prefill steps, the last emits token 1.
	h.submitAt(0, &Request{ID: "a", Prompt: tokens(1, 5000), OutputTokens: 4})
	h.run()
	res := h.results["a"]
	if first != sim.At(30*time.Millisecond) || res.FirstToken != first {
		t.Fatalf("first token at %v (result %v), want 30ms", first, res.FirstToken)
	}
	if res.Finish != sim.At(60*time.Millisecond) || res.OutputTokens != 4 || res.Status != Completed {
		t.Fatalf("result %+v, want 4 tokens finished at 60ms", res)
	}
}

// Freed blocks join the free queue's tail in reverse order, and eviction takes the head: the
// least recently freed request loses its blocks first, and a request loses its tail first.
// On the newest release block 0 is the null block: 13 blocks hold the same 12.
func TestLRUEvictionOrder(t *testing.T) {
	t.Run(LegacyRelease.Name, func(t *testing.T) { testLRUEvictionOrder(t, newHarnessFor(t, LegacyRelease, 12, 0, time.Millisecond)) })
	t.Run(NewestRelease.Name, func(t *testing.T) { testLRUEvictionOrder(t, newHarnessFor(t, NewestRelease, 13, 0, time.Millisecond)) })
}

func testLRUEvictionOrder(t *testing.T, h *harness) {
	a, b := tokens(1, 64), tokens(2, 64) // 4 blocks each; one output token needs no KV
	// The queue starts as blocks 0..11. a takes 0-3 and frees them reversed: [4..11 3 2 1 0].
	h.submitAt(0, &Request{ID: "a", Prompt: a, OutputTokens: 1})
	// b takes 4-7: [8 9 10 11 3 2 1 0 7 6 5 4].
	h.submitAt(sim.At(time.Second), &Request{ID: "b", Prompt: b, OutputTokens: 1})
	// c needs 6 blocks: 8-11, then a's tail blocks 3 and 2 are evicted; b is untouched.
	// c frees reversed: [1 0 7 6 5 4 2 3 11 10 9 8].
	h.submitAt(sim.At(2*time.Second), &Request{ID: "c", Prompt: tokens(3, 96), OutputTokens: 1})
	h.submitAt(sim.At(3*time.Second), &Request{ID: "b2", Prompt: b, OutputTokens: 1})
	h.submitAt(sim.At(4*time.Second), &Request{ID: "a2", Prompt: a, OutputTokens: 1})
	h.run()
	// b, freed later, kept its blocks: a full hit is capped at 63 tokens, so it hits 4, 5, 6
	// and recomputes its last block in a new one, popping the head: a's block 1.
	if got := h.results["b2"].CachedTokens; got != 48 {
		t.Fatalf("b re-sent hit %d tokens, want 48", got)
	}
	// a lost its tail first (3, 2), then block 1: only block 0 is left.
	if got := h.results["a2"].CachedTokens; got != 16 {
		t.Fatalf("a re-sent hit %d tokens, want 16 (tail evicted first)", got)
	}
}

func TestCacheTooSmallThrashes(t *testing.T) {
	run := func(blocks int) float64 {
		h := newHarness(t, blocks, 0, time.Millisecond)
		prompts := make([][]int32, 8)
		for i := range prompts {
			prompts[i] = tokens(uint64(i), 256) // 16 blocks each, 128 blocks for all 8
		}
		for round := range 5 {
			for i, p := range prompts {
				at := sim.At(time.Duration(round*len(prompts)+i) * time.Second)
				h.submitAt(at, &Request{ID: fmt.Sprint(round, i), Prompt: p, OutputTokens: 1})
			}
		}
		h.run()
		m := h.r.Metrics()
		return float64(m.PrefixHits) / float64(m.PrefixQueries)
	}
	big, small := run(200), run(64)
	if big < 0.7 || small > 0.05 {
		t.Fatalf("hit rate with room for the working set %.2f (want > 0.7), with half of it %.2f (want ~0: LRU thrashes)", big, small)
	}
}

func TestPreemptionUnderMemoryPressure(t *testing.T) {
	h := newHarness(t, 64, 0, time.Millisecond) // 1,024 tokens of KV
	for i := range 12 {
		h.submitAt(0, &Request{ID: fmt.Sprint(i), Prompt: tokens(uint64(i), 100), OutputTokens: 300})
	}
	h.run()
	m := h.r.Metrics()
	if m.Preemptions == 0 {
		t.Fatal("12 requests of 400 tokens in 1,024 tokens of KV: want preemptions")
	}
	if len(h.results) != 12 || m.Completed != 12 || h.maxUsed > 64 {
		t.Fatalf("results %d completed %d max blocks used %d/64", len(h.results), m.Completed, h.maxUsed)
	}
	for id, res := range h.results {
		if res.Status != Completed || res.OutputTokens != 300 {
			t.Fatalf("request %s: %+v", id, res)
		}
	}
	if m.Running != 0 || m.Waiting != 0 || m.KVUsage != 0 {
		t.Fatalf("after the run: %+v", m)
	}
}

func TestRejectsWhatCanNeverFitAndAbortsOnFailure(t *testing.T) {
	h := newHarness(t, 10, 0, time.Millisecond)
	h.submitAt(0, &Request{ID: "huge", Prompt: tokens(1, 200), OutputTokens: 1})
	h.submitAt(0, &Request{ID: "ok", Prompt: tokens(2, 50), OutputTokens: 50})
	h.k.Schedule(sim.At(10*time.Millisecond), 0, func(sim.Time) { h.r.Fail() })
	h.submitAt(sim.At(20*time.Millisecond), &Request{ID: "late", Prompt: tokens(3, 20), OutputTokens: 1})
	h.k.Schedule(sim.At(30*time.Millisecond), 0, func(sim.Time) { h.r.Recover() })
	h.submitAt(sim.At(40*time.Millisecond), &Request{ID: "after", Prompt: tokens(4, 20), OutputTokens: 1})
	h.run()
	want := map[string]Status{"huge": Rejected, "ok": Aborted, "late": Aborted, "after": Completed}
	for id, st := range want {
		if h.results[id].Status != st {
			t.Errorf("%s: %v, want %v", id, h.results[id].Status, st)
		}
	}
}

// TestConservationAndDeterminism drives a random open-loop load with shared prefixes, a fifth
// of it aborted by its client at random times, through a tight cache twice: every request ends exactly once, blocks in use never exceed capacity,
// ref counts stay consistent (checked every step), and the two runs agree exactly.
func TestConservationAndDeterminism(t *testing.T) {
	runOnce := func() []string {
		h := newHarness(t, 400, 512, 0)
		rng := rand.New(rand.NewPCG(5, 5))
		systems := [][]int32{tokens(100, 700), tokens(101, 900), tokens(102, 300)}
		at := sim.Time(0)
		for i := range 300 {
			at += sim.Time(rng.ExpFloat64() * 20e6)
			p := append(append([]int32(nil), systems[rng.IntN(3)]...), tokens(uint64(i), 50+rng.IntN(400))...)
			req := &Request{ID: fmt.Sprint(i), Prompt: p, OutputTokens: 1 + rng.IntN(200)}
			h.submitAt(at, req)
			if rng.IntN(5) == 0 { // a client that leaves while queued, prefilling or decoding
				h.k.Schedule(at+sim.Time(rng.ExpFloat64()*200e6), 0, func(sim.Time) { h.r.Abort(req) })
			}
		}
		h.run()
		aborted := 0
		for _, r := range h.results {
			if r.Status == Aborted {
				aborted++
			}
		}
		if aborted < 20 {
			t.Fatalf("only %d aborted requests: the test does not exercise Abort", aborted)
		}
		if h.r.pool.used() != 0 {
			t.Fatalf("%d blocks in use after the run", h.r.pool.used())
		}
		if len(h.results) != 300 {
			t.Fatalf("%d of 300 requests ended", len(h.results))
		}
		if h.maxUsed > 400 {
			t.Fatalf("used %d blocks of 400", h.maxUsed)
		}
		var out []string
		for _, id := range h.order {
			r := h.results[id]
			out = append(out, fmt.Sprintf("%s %v %d %d %d %d", id, r.Status, r.FirstToken, r.Finish, r.CachedTokens, r.Preemptions))
		}
		return out
	}
	a, b := runOnce(), runOnce()
	if diff := cmp.Diff(a, b); diff != "" {
		t.Fatalf("two identical runs differ:\n%s", diff)
	}
}

// The next turn of a conversation re-sends the previous answer; with Answer tokens the
// replica caches those blocks, so the hit covers the history.
func TestMultiTurnReusesAnswerBlocks(t *testing.T) {
	h := newHarness(t, 1000, 0, time.Millisecond)
	prompt, answer := tokens(1, 200), tokens(2, 100)
	h.submitAt(0, &Request{ID: "t0", Prompt: prompt, OutputTokens: 100, Answer: answer})
	next := append(append(append([]int32(nil), prompt...), answer...), tokens(3, 50)...)
	h.submitAt(sim.At(time.Second), &Request{ID: "t1", Prompt: next, OutputTokens: 10})
	h.run()
	// The last answer token's KV is never computed: full blocks below token 299 are cached.
	if got, want := h.results["t1"].CachedTokens, 299/16*16; got != want {
		t.Fatalf("turn 1 hit %d tokens, want %d", got, want)
	}
}

// TestKVEventsMirrorTheCache replays the KV events into a set and checks it equals the blocks
// the cache holds, through eviction pressure and a failure.
func TestKVEventsMirrorTheCache(t *testing.T) {
	h := newHarness(t, 40, 0, time.Millisecond)
	held := map[uint64]bool{}
	h.r.hooks.KV = func(ev KVEvent) {
		switch {
		case ev.Cleared:
			clear(held)
		case ev.Stored:
			if held[ev.Hash] {
				t.Errorf("hash %x stored twice", ev.Hash)
			}
			held[ev.Hash] = true
		default:
			if !held[ev.Hash] {
				t.Errorf("hash %x removed but not stored", ev.Hash)
			}
			delete(held, ev.Hash)
		}
	}
	h.r.pool.events = func(stored bool, hash uint64) { h.r.hooks.KV(KVEvent{Stored: stored, Hash: hash}) }
	for i := range 12 {
		h.submitAt(sim.At(time.Duration(i)*time.Second), &Request{ID: fmt.Sprint(i), Prompt: tokens(uint64(i%5), 200), OutputTokens: 4})
	}
	h.run()
	cached := 0
	for b := range int32(h.r.pool.size()) {
		if h.r.pool.hashed(b) {
			cached++
			if !held[h.r.pool.hashOf(b)] {
				t.Fatalf("cached hash %x missing from the events", h.r.pool.hashOf(b))
			}
		}
	}
	if cached != len(held) || cached == 0 {
		t.Fatalf("events hold %d hashes, the cache %d", len(held), cached)
	}
	h.r.Fail()
	if len(held) != 0 {
		t.Fatalf("after a failure the events still hold %d hashes", len(held))
	}
}

// TestAbort aborts a waiting request, a running one mid-decode (a lazy decoder), and one
// mid-prefill: each ends Aborted at the right time with the tokens it got, the others are
// unaffected, every block is free afterwards, and what the aborted requests computed stays
// cached. Aborting an ended request reports false.
func TestAbort(t *testing.T) {
	h := newHarness(t, 400, 512, time.Millisecond)
	h.r.maxSeqs = 2
	decode := &Request{ID: "decode", Prompt: tokens(1, 64), OutputTokens: 500}
	prefill := &Request{ID: "prefill", Prompt: tokens(2, 2048), OutputTokens: 10}
	queued := &Request{ID: "queued", Prompt: tokens(3, 32), OutputTokens: 5}
	h.submitAt(0, decode)
	h.submitAt(sim.At(20*time.Millisecond), prefill) // 4 chunks of 512 tokens (less decode's 1)
	h.submitAt(sim.At(21*time.Millisecond), queued)  // max_num_seqs 2: it waits
	var aborted []bool
	abortAt := func(at time.Duration, req *Request) {
		h.k.Schedule(sim.At(at), 0, func(sim.Time) { aborted = append(aborted, h.r.Abort(req)) })
	}
	abortAt(22*time.Millisecond+time.Microsecond, queued)
	abortAt(22*time.Millisecond+time.Microsecond, prefill)
	abortAt(30*time.Millisecond+time.Microsecond, decode)
	abortAt(40*time.Millisecond, decode) // already ended
	h.run()
	if want := []bool{true, true, true, false}; !cmp.Equal(aborted, want) {
		t.Fatalf("Abort returned %v, want %v", aborted, want)
	}
	for _, c := range []struct {
		id     string
		finish time.Duration
		output int
	}{
		{"queued", 22*time.Millisecond + time.Microsecond, 0},
		{"prefill", 23 * time.Millisecond, 0},
		{"decode", 31 * time.Millisecond, 31},
	} {
		res := h.results[c.id]
		if res.Status != Aborted || res.Finish != sim.At(c.finish) || res.OutputTokens != c.output {
			t.Errorf("%s: %v at %v with %d tokens, want aborted at %v with %d",
				c.id, res.Status, res.Finish.Duration(), res.OutputTokens, c.finish, c.output)
		}
	}
	if used := h.r.pool.used(); used != 0 {
		t.Errorf("%d blocks still in use after every request ended", used)
	}
	// The prefill's first two chunks (1,023 tokens: 63 full blocks) stayed cached.
	again := &Request{ID: "again", Prompt: tokens(2, 2048), OutputTokens: 1}
	h.submitAt(sim.At(50*time.Millisecond), again)
	h.run()
	if got := h.results["again"].CachedTokens; got != 63*16 {
		t.Errorf("resent prompt hit %d tokens, want %d", got, 63*16)
	}
}

// TestNewRejectsTooManyBlocks checks that a pool too large for the tables' positions is an
// error, found before the pool's tables (gigabytes at this size) are allocated.
func TestNewRejectsTooManyBlocks(t *testing.T) {
	d := gpumodel.DefaultDeployment(gpumodel.H100SXM80GB(), gpumodel.Llama31x8B(), 1)
	for _, c := range []struct {
		blocks int
		rel    Release
	}{{maxBlocks + 2, NewestRelease}, {maxBlocks + 1, V0Release}} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := New(sim.NewKernel(), Config{Deployment: d, NumBlocks: c.blocks, Release: c.rel}, Hooks{})
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), "KV blocks") {
			t.Fatalf("%d blocks on %s: err = %v, want too many KV blocks", c.blocks, c.rel.Name, err)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
			t.Errorf("%d blocks on %s: %d bytes allocated before the error", c.blocks, c.rel.Name, n)
		}
	}
}
