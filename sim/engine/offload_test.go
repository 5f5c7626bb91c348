package engine

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"kvroute/gpumodel"
	"kvroute/sim"
)

// blockBytes8B is the KV bytes of one 16-token block of Llama-3.1-8B on one GPU (2 MiB).
const blockBytes8B = 16 * 2 * 32 * 8 * 128 * 2

// perBlock returns the bandwidth at which one 16-token Llama-3.1-8B block takes d.
func perBlock(d time.Duration) float64 { return blockBytes8B / d.Seconds() }

// offHarness is one replica with a CPU tier on its own kernel, 10 ms steps, recording
// results, first tokens and KV events.
type offHarness struct {
	t       *testing.T
	k       *sim.Kernel
	r       *Replica
	results map[string]Result
	gpu     []uint64 // hashes of GPU BlockStored events, in order
	cpu     []KVEvent
}

func newOffHarness(t *testing.T, oc OffloadConfig, blocks int, mod func(*Config)) *offHarness {
	t.Helper()
	d := gpumodel.DefaultDeployment(gpumodel.H100SXM80GB(), gpumodel.Llama31x8B(), 1)
	cfg := Config{Deployment: d, NumBlocks: blocks, Offload: oc,
		StepTime: func(gpumodel.Step) time.Duration { return 10 * time.Millisecond }}
	if mod != nil {
		mod(&cfg)
	}
	h := &offHarness{t: t, k: sim.NewKernel(), results: map[string]Result{}}
	var err error
	h.r, err = New(h.k, cfg, Hooks{
		Done: func(res Result) { h.results[res.Request.ID] = res },
		KV: func(ev KVEvent) {
			switch {
			case ev.Medium == MediumCPU:
				ev.Tokens = nil
				h.cpu = append(h.cpu, ev)
			case ev.Stored:
				h.gpu = append(h.gpu, ev.Hash)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// at submits a request for prompt at time at.
func (h *offHarness) at(at time.Duration, id string, prompt []int32, out int) {
	req := &Request{ID: id, Prompt: prompt, OutputTokens: out}
	h.k.Schedule(sim.At(at), 0, func(sim.Time) { h.r.Submit(req) })
}

// probe runs fn at time at.
func (h *offHarness) probe(at time.Duration, fn func()) {
	h.k.Schedule(sim.At(at), 5, func(sim.Time) { fn() })
}

func (h *offHarness) run() {
	h.t.Helper()
	if err := h.k.Run(sim.Never); err != nil {
		h.t.Fatal(err)
	}
}

// cpuHashes returns the hashes of the CPU events with stored as given.
func (h *offHarness) cpuHashes(stored bool) []uint64 {
	var out []uint64
	for _, ev := range h.cpu {
		if ev.Stored == stored {
			out = append(out, ev.Hash)
		}
	}
	return out
}

// TestOffloadStoresCompletedBlocks checks write-through offload: the blocks a request
// completes are stored as they are computed, prompt blocks only unless Decode, each
// offloaded block under the hash of its last GPU block, announced token-less with the
// offloaded block size.
func TestOffloadStoresCompletedBlocks(t *testing.T) {
	cases := []struct {
		name      string
		blockSize int
		decode    bool
		want      []int // the GPU blocks (in store order) whose hashes the tier announces
	}{
		{"prompt only", 0, false, []int{0, 1, 2, 3}},
		{"decode too", 0, true, []int{0, 1, 2, 3, 4, 5}},
		{"32-token blocks", 32, false, []int{1, 3}},
		{"32-token blocks, decode", 32, true, []int{1, 3, 5}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newOffHarness(t, OffloadConfig{Bytes: 1 << 30, BlockSize: tc.blockSize, Decode: tc.decode,
				Bandwidth: perBlock(time.Millisecond)}, 100, nil)
			h.at(0, "a", tokens(1, 64), 40) // 64 + 39 computed tokens: 6 full blocks
			h.run()
			var want []uint64
			for _, j := range tc.want {
				want = append(want, h.gpu[j])
			}
			if diff := cmp.Diff(want, h.cpuHashes(true)); diff != "" {
				t.Errorf("CPU BlockStored hashes (-want +got):\n%s", diff)
			}
			bs := max(tc.blockSize, 16)
			for _, ev := range h.cpu {
				if ev.BlockSize != bs || ev.HasParent || len(ev.Tokens) != 0 {
					t.Errorf("CPU event %+v: want block size %d, no parent, no tokens", ev, bs)
				}
			}
			if got := h.r.Metrics().OffloadStoreBytes; got != int64(len(tc.want)*bs/16)*blockBytes8B {
				t.Errorf("store bytes %d, want %d blocks' worth", got, len(tc.want)*bs/16)
			}
		})
	}
}

// TestOffloadLookup checks the tier's lookup after the GPU hit: it starts at the offloaded
// block holding the GPU hit's end, counts consecutive ready blocks, returns nothing short of
// one offloaded block, and asks to retry when the loads are at their cap or a hit block is
// being loaded.
func TestOffloadLookup(t *testing.T) {
	cases := []struct {
		name       string
		blockSize  int
		held       []int // offloaded blocks in the tier (ready unless listed in notReady)
		notReady   []int
		pinned     []int
		loads      int
		total, hit int
		want       int
		retry      bool
	}{
		{name: "all from the start", held: []int{0, 1, 2, 3}, total: 70, want: 64},
		{name: "after the GPU hit", held: []int{0, 1, 2, 3}, total: 70, hit: 32, want: 32},
		{name: "from the GPU hit's end", held: []int{2, 3}, total: 70, hit: 32, want: 32},
		{name: "stops at a gap", held: []int{0, 1, 3}, total: 70, want: 32},
		{name: "stops at a block being stored", held: []int{0, 1, 2, 3}, notReady: []int{2}, total: 70, want: 32},
		{name: "nothing past the GPU hit", held: []int{0, 1}, total: 70, hit: 32, want: 0},
		{name: "less than a block left", held: []int{0, 1}, blockSize: 32, total: 70, hit: 48, want: 0},
		{name: "from inside an offloaded block", held: []int{0, 1}, blockSize: 32, total: 70, hit: 16, want: 48},
		{name: "less than a block loaded", held: []int{0}, blockSize: 32, total: 70, hit: 16, want: 0},
		{name: "loads at the cap", held: []int{0, 1, 2, 3}, loads: 4, total: 70, retry: true},
		{name: "a hit block is being loaded", held: []int{0, 1, 2, 3}, pinned: []int{1}, total: 70, retry: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newOffHarness(t, OffloadConfig{Bytes: 1 << 30, BlockSize: tc.blockSize, Bandwidth: 1e9}, 100,
				func(c *Config) { c.Deployment.MaxNumSeqs = 4 })
			r, o := h.r, h.r.off
			s := &seq{req: &Request{Prompt: tokens(3, tc.total)}, hashable: -1, promptLen: tc.total, knownLen: tc.total}
			r.hashUpTo(s, tc.total/16)
			cpu := o.cpuHashes(s, 0, len(s.hashes)/o.factor, nil)
			pick := func(idx []int) []uint64 {
				var out []uint64
				for _, j := range idx {
					out = append(out, cpu[j])
				}
				return out
			}
			o.tier.prepareStore(pick(tc.held), nil, nil)
			var ready []int
			for _, j := range tc.held {
				if !slices.Contains(tc.notReady, j) {
					ready = append(ready, j)
				}
			}
			o.tier.completeStore(pick(ready), nil)
			o.tier.pin(pick(tc.pinned))
			o.loads = tc.loads
			got, retry := r.matchCPU(s, tc.total, tc.hit)
			if got != tc.want || retry != tc.retry {
				t.Errorf("matchCPU = %d, %v; want %d, %v", got, retry, tc.want, tc.retry)
			}
		})
	}
}

// TestOffloadLoadsAsync checks that a request hitting the tier waits for its load with its
// GPU blocks allocated while another request runs, then counts the loaded tokens as cached,
// per tier; and that a hit becomes visible only once its store has ended.
func TestOffloadLoadsAsync(t *testing.T) {
	h := newOffHarness(t, OffloadConfig{Bytes: 1 << 30, Bandwidth: perBlock(5 * time.Millisecond)}, 200,
		func(c *Config) { c.Offload.Bytes = 64 * blockBytes8B })
	h.r.off.noGPUHits = true                              // as vLLM with prefix caching disabled
	h.at(0, "a", tokens(1, 128), 1)                       // stores 8 blocks from 10 ms to 50 ms
	h.at(20*time.Millisecond, "early", tokens(1, 128), 1) // its store is not done: no hit
	h.at(time.Second, "b", append(tokens(1, 128), tokens(9, 8)...), 2)
	h.at(time.Second+5*time.Millisecond, "c", tokens(2, 40), 2) // during b's load
	var usage float64
	h.probe(time.Second+time.Millisecond, func() { usage = h.r.Metrics().KVUsage })
	h.run()
	b, c, early := h.results["b"], h.results["c"], h.results["early"]
	if b.CPUCachedTokens != 128 || b.CachedTokens != 128 {
		t.Errorf("b cached %d, from CPU %d: want 128 both", b.CachedTokens, b.CPUCachedTokens)
	}
	if early.CPUCachedTokens != 0 {
		t.Errorf("early: %d tokens from a store still in flight", early.CPUCachedTokens)
	}
	load := 8 * 5 * time.Millisecond
	if got := b.FirstToken.Duration() - time.Second; got < load+10*time.Millisecond {
		t.Errorf("b's first token %v after arrival, want at least its load (%v) and a step", got, load)
	}
	if got := c.FirstToken.Duration() - time.Second - 5*time.Millisecond; got != 10*time.Millisecond {
		t.Errorf("c's first token %v after arrival, want one step: the load must not hold it", got)
	}
	if want := 8 / float64(h.r.pool.size()); usage != want { // b's 8 loaded blocks are allocated during the load
		t.Errorf("KV usage during the load %v, want %v", usage, want)
	}
	if m := h.r.Metrics(); m.ExternalHits != 128 || m.OffloadLoads != 1 || m.OffloadLoadTime != load {
		t.Errorf("metrics %+v: want 128 external hits, one load of %v", m, load)
	}
}

// TestOffloadLoadTimeout checks that a load slower than the timeout is abandoned: the request
// recomputes the tokens and reports no CPU hit.
func TestOffloadLoadTimeout(t *testing.T) {
	h := newOffHarness(t, OffloadConfig{Bytes: 1 << 30, Bandwidth: perBlock(time.Millisecond)}, 200, nil)
	h.r.off.noGPUHits = true
	h.at(0, "a", tokens(1, 128), 1)
	h.probe(500*time.Millisecond, func() { h.r.off.bw = perBlock(10 * time.Second) }) // 80 s for 8 blocks
	h.at(time.Second, "b", tokens(1, 128), 1)
	h.run()
	b := h.results["b"]
	if b.CPUCachedTokens != 0 || b.CachedTokens != 0 {
		t.Errorf("b cached %d, from CPU %d: want 0 after the timeout", b.CachedTokens, b.CPUCachedTokens)
	}
	if got, want := b.FirstToken.Duration()-time.Second, DefaultLoadTimeout+10*time.Millisecond; got != want {
		t.Errorf("b's first token %v after arrival, want the timeout and one step (%v)", got, want)
	}
}

// TestOffloadStoreHoldsBlocks checks that a request that finished while its store runs keeps
// its GPU blocks until the store ends.
func TestOffloadStoreHoldsBlocks(t *testing.T) {
	h := newOffHarness(t, OffloadConfig{Bytes: 1 << 30, Bandwidth: perBlock(100 * time.Millisecond)}, 100, nil)
	h.at(0, "a", tokens(1, 64), 1) // done at 10 ms; its 4-block store ends at 410 ms
	var during, after int
	h.probe(200*time.Millisecond, func() { during = h.r.pool.used() })
	h.probe(500*time.Millisecond, func() { after = h.r.pool.used() })
	h.run()
	if h.results["a"].Finish != sim.At(10*time.Millisecond) {
		t.Fatalf("a finished at %v, want 10ms: the store must not delay it", h.results["a"].Finish)
	}
	if during != 4 || after != 0 {
		t.Errorf("blocks in use during the store %d, after %d: want 4, 0", during, after)
	}
}

// TestOffloadEvictsLRU checks the tier's eviction: the least recently used blocks go first,
// a lookup refreshes a request's blocks, and each eviction is a CPU BlockRemoved event.
func TestOffloadEvictsLRU(t *testing.T) {
	h := newOffHarness(t, OffloadConfig{Bytes: 8 * blockBytes8B, Bandwidth: perBlock(time.Millisecond)}, 100, nil)
	h.at(0, "a", tokens(1, 64), 1)
	h.at(time.Second, "b", tokens(2, 64), 1)
	h.at(2*time.Second, "a again", tokens(1, 64), 1) // a GPU hit; the lookup touches a's blocks
	h.at(3*time.Second, "c", tokens(3, 64), 1)
	h.run()
	stored := h.cpuHashes(true)
	if len(stored) != 12 {
		t.Fatalf("%d blocks stored, want 12", len(stored))
	}
	// b's blocks, its last first: a touch leaves a request's first block the most recent.
	want := slices.Clone(stored[4:8])
	slices.Reverse(want)
	if diff := cmp.Diff(want, h.cpuHashes(false)); diff != "" {
		t.Errorf("evicted (-b's blocks, last first +got):\n%s", diff)
	}
}

// TestOffloadAbortWhileLoading checks that aborting a request during its load frees its GPU
// blocks and the tier's, and that the load's end then changes nothing.
func TestOffloadAbortWhileLoading(t *testing.T) {
	h := newOffHarness(t, OffloadConfig{Bytes: 1 << 30, Bandwidth: perBlock(10 * time.Millisecond)}, 100, nil)
	h.r.off.noGPUHits = true
	h.at(0, "a", tokens(1, 64), 1)
	req := &Request{ID: "b", Prompt: tokens(1, 64), OutputTokens: 1}
	h.k.Schedule(sim.At(time.Second), 0, func(sim.Time) { h.r.Submit(req) })
	h.probe(time.Second+5*time.Millisecond, func() {
		if !h.r.Abort(req) {
			t.Error("b was not waiting")
		}
	})
	h.run()
	if b := h.results["b"]; b.Status != Aborted {
		t.Errorf("b %v, want aborted", b.Status)
	}
	if used, loads := h.r.pool.used(), h.r.off.loads; used != 0 || loads != 0 {
		t.Errorf("%d blocks in use, %d loads in flight after the abort: want 0, 0", used, loads)
	}
}

// TestOffloadConfigValidate checks the tier's configuration rules.
func TestOffloadConfigValidate(t *testing.T) {
	d := gpumodel.DefaultDeployment(gpumodel.H100SXM80GB(), gpumodel.Llama31x8B(), 1)
	noHost := d
	noHost.GPU.HostBandwidth = 0
	cases := []struct {
		name string
		c    OffloadConfig
		d    gpumodel.Deployment
		ok   bool
	}{
		{"off", OffloadConfig{}, d, true},
		{"on", OffloadConfig{Bytes: 1 << 30}, d, true},
		{"negative size", OffloadConfig{Bytes: -1}, d, false},
		{"block size not a multiple", OffloadConfig{Bytes: 1 << 30, BlockSize: 24}, d, false},
		{"smaller than a block", OffloadConfig{Bytes: 1 << 20}, d, false},
		{"no bandwidth known", OffloadConfig{Bytes: 1 << 30}, noHost, false},
		{"bandwidth given", OffloadConfig{Bytes: 1 << 30, Bandwidth: 1e9}, noHost, true},
		{"arc", OffloadConfig{Bytes: 1 << 30, Eviction: EvictionARC}, d, true},
		{"unknown eviction policy", OffloadConfig{Bytes: 1 << 30, Eviction: "lfu"}, d, false},
	}
	for _, tc := range cases {
		if err := tc.c.Validate(tc.d); (err == nil) != tc.ok {
			t.Errorf("%s: Validate = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
