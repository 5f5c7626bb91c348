package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"kvroute/gpumodel"
	"kvroute/sim"
)

// submitter is what the differential test drives: the replica and its reference.
type submitter interface {
	Submit(*Request)
	Metrics() Metrics
	Fail()
	Recover()
	// cachedHashes counts the block hashes the prefix cache holds.
	cachedHashes() int
	RemoteKVDone(*Request, bool)
	ReleaseHeld(*Request) bool
}

func (r *Replica) cachedHashes() int    { return r.pool.cached.n }
func (r *refReplica) cachedHashes() int { return len(r.pool.cached) }

// script is a random run: requests at times, failures and recoveries.
type script struct {
	cfg Config
	// noGPUHits runs a CPU tier with the GPU prefix cache ignored at admission.
	noGPUHits bool
	reqs      []scriptReq
	fails     []sim.Time
	recover   []sim.Time
}

type scriptReq struct {
	at  sim.Time
	req Request
	// For a P/D leg: how long a decode leg's read takes and whether it succeeds; how long
	// after a prefill leg completes its blocks are released (< 0: never, the abort timeout
	// frees them).
	read    sim.Time
	readOK  bool
	release sim.Time
}

// randomScript builds requests from a few shared prefixes (so they hit each other's blocks),
// with answers that are absent, complete or short, on a replica that is sometimes tiny
// (preemptions, rejections) or has a small token budget (chunked prefill, starved decodes).
func randomScript(rng *rand.Rand) script {
	d := gpumodel.DefaultDeployment(gpumodel.H100SXM80GB(), gpumodel.Llama31x8B(), 1)
	v1 := slices.DeleteFunc(Releases(), func(r Release) bool { return r.V0Scheduler }) // the reference is V1's
	sc := script{cfg: Config{Deployment: d, Release: v1[rng.IntN(len(v1))]}}
	switch rng.IntN(4) {
	case 0:
		sc.cfg.NumBlocks = 20 + rng.IntN(100)
	case 1:
		sc.cfg.NumBlocks = 100 + rng.IntN(2000)
	case 2:
		sc.cfg.NumBlocks = 0
	default:
		sc.cfg.NumBlocks = 50 + rng.IntN(400)
	}
	if rng.IntN(2) == 0 {
		sc.cfg.Deployment.MaxNumBatchedTokens = 16 + rng.IntN(600)
		sc.cfg.Deployment.MaxNumSeqs = min(1+rng.IntN(40), sc.cfg.Deployment.MaxNumBatchedTokens)
	}
	if rng.IntN(3) == 0 {
		step := time.Duration(1+rng.IntN(20)) * time.Millisecond
		sc.cfg.StepTime = func(gpumodel.Step) time.Duration { return step }
	}
	var prefixes [][]int32
	for range 1 + rng.IntN(5) {
		p := make([]int32, rng.IntN(200))
		for i := range p {
			p[i] = rng.Int32N(50)
		}
		prefixes = append(prefixes, p)
	}
	var prev []int32 // the last prompt + answer, so some prompts extend a conversation
	n := 5 + rng.IntN(120)
	at := sim.Time(0)
	for i := range n {
		at += sim.Time(rng.ExpFloat64() * float64(20*time.Millisecond))
		var prompt []int32
		switch rng.IntN(3) {
		case 0:
			prompt = append(prompt, prefixes[rng.IntN(len(prefixes))]...)
		case 1:
			prompt = append(prompt, prev...)
		}
		for range 1 + rng.IntN(300) {
			prompt = append(prompt, rng.Int32N(50))
		}
		if rng.IntN(10) == 0 {
			prompt = prompt[:0] // rejected: empty prompt
		}
		out := 1 + rng.IntN(120)
		if rng.IntN(20) == 0 {
			out = 0 // rejected
		}
		var answer []int32
		switch rng.IntN(3) {
		case 0:
			answer = make([]int32, out+rng.IntN(5))
		case 1:
			answer = make([]int32, rng.IntN(out+1))
		}
		for j := range answer {
			answer[j] = rng.Int32N(50)
		}
		if len(answer) >= out {
			prev = append(slices.Clip(prompt), answer[:out]...)
		}
		sc.reqs = append(sc.reqs, scriptReq{at: at, req: Request{
			ID: fmt.Sprint(i), Prompt: prompt, OutputTokens: out, Answer: answer, Salt: uint64(rng.IntN(2)),
		}})
	}
	if rng.IntN(3) == 0 {
		for range 1 + rng.IntN(3) {
			f := sim.Time(rng.Int64N(int64(at) + 1))
			sc.fails = append(sc.fails, f)
			sc.recover = append(sc.recover, f+sim.Time(rng.Int64N(int64(200*time.Millisecond))))
		}
	}
	if rng.IntN(4) == 0 {
		// Other block sizes (8 and 32, and 12: the engine does not ask for a power of two),
		// so that lazy decoders' due steps are checked with other spacings of block
		// boundaries.
		sc.cfg.Deployment.BlockSize = []int{8, 32, 12}[rng.IntN(3)]
	}
	if rng.IntN(3) == 0 {
		sc.cfg.Offload, sc.noGPUHits = randomOffload(rng, sc.cfg.Deployment), rng.IntN(3) == 0
	}
	if rng.IntN(3) == 0 {
		randomPD(rng, &sc)
	}
	return sc
}

// randomPD makes some of sc's requests prefill legs (one output token, their blocks held
// for a while or until the abort timeout) and some decode legs (reads that take a while and
// sometimes fail), under either failure policy.
func randomPD(rng *rand.Rand, sc *script) {
	sc.cfg.KVTransfer = KVTransferConfig{Recompute: rng.IntN(2) == 0,
		AbortTimeout: time.Duration(1+rng.IntN(500)) * time.Millisecond}
	for i := range sc.reqs {
		q := &sc.reqs[i]
		switch rng.IntN(3) {
		case 0:
			q.req.PD, q.req.OutputTokens = PDPrefill, 1
			q.release = sim.Time(rng.Int64N(int64(time.Second))) - sim.Time(200*time.Millisecond)
		case 1:
			q.req.PD = PDDecode
			q.read = sim.Time(rng.Int64N(int64(100 * time.Millisecond)))
			q.readOK = rng.IntN(5) != 0
		}
	}
}

// randomOffload returns a CPU tier for d: from a few blocks (eviction, skipped stores) to
// many, offloaded blocks of 1 to 3 GPU blocks, copies from fast to slow enough that loads
// queue behind each other and, now and then, time out, evicting by LRU or ARC.
func randomOffload(rng *rand.Rand, d gpumodel.Deployment) OffloadConfig {
	c := OffloadConfig{BlockSize: d.BlockSize * (1 + rng.IntN(3)), Decode: rng.IntN(2) == 0}
	block := d.KVBytesPerTokenPerGPU() * int64(c.BlockSize)
	c.Bytes = block * int64(2+rng.IntN(300))
	perBlock := time.Duration(1+rng.IntN(20000)) * time.Microsecond
	if rng.IntN(20) == 0 {
		perBlock = 5 * time.Second
	}
	c.Bandwidth = float64(block) / perBlock.Seconds()
	if rng.IntN(2) == 0 {
		c.Latency = time.Duration(rng.IntN(1000)) * time.Microsecond
	}
	if rng.IntN(2) == 0 {
		c.Eviction = EvictionARC // the reference's own ARC (refARC) against arcTier
	}
	return c
}

// play runs sc on a replica built by mk and returns the log of everything observable, and
// with cache set the prefix cache's size after each step: the step at which each block is
// cached or evicted shows even when no request looks it up then.
func play(t *testing.T, sc script, cache bool, mk func(*sim.Kernel, Config, Hooks) (submitter, error)) string {
	t.Helper()
	k := sim.NewKernel()
	var b strings.Builder
	var r submitter
	hooks := Hooks{
		FirstToken: func(req *Request, at sim.Time) { fmt.Fprintf(&b, "first %s %v %+v\n", req.ID, at, r.Metrics()) },
		Done: func(res Result) {
			fmt.Fprintf(&b, "done %s %v arrival %v first %v finish %v prompt %d cached %d (cpu %d, remote %d) out %d preempt %d %+v\n",
				res.Request.ID, res.Status, res.Arrival, res.FirstToken, res.Finish, res.PromptTokens,
				res.CachedTokens, res.CPUCachedTokens, res.RemoteTokens, res.OutputTokens, res.Preemptions, r.Metrics())
			if q := &sc.reqs[res.Request.Tag.(int)]; res.Request.PD == PDPrefill && q.release >= 0 {
				k.Schedule(k.Now()+q.release, 0, func(sim.Time) { r.ReleaseHeld(res.Request) })
			}
		},
		RemoteRead: func(req *Request, tokens int) {
			fmt.Fprintf(&b, "read %s %d at %v\n", req.ID, tokens, k.Now())
			q := &sc.reqs[req.Tag.(int)]
			k.Schedule(k.Now()+q.read, 0, func(sim.Time) { r.RemoteKVDone(req, q.readOK) })
		},
		Step: func(at sim.Time, d time.Duration, s gpumodel.Step) {
			fmt.Fprintf(&b, "step %v %v %+v %+v\n", at, d, s, r.Metrics())
			if cache {
				fmt.Fprintf(&b, "cached %d\n", r.cachedHashes())
			}
		},
	}
	if sc.cfg.Offload.Enabled() {
		hooks.KV = func(ev KVEvent) {
			if ev.Medium == MediumCPU {
				fmt.Fprintf(&b, "cpu stored %v %x at %v\n", ev.Stored, ev.Hash, k.Now())
			}
		}
	}
	var err error
	r, err = mk(k, sc.cfg, hooks)
	if err != nil {
		t.Fatal(err)
	}
	switch r := r.(type) {
	case *Replica:
		if r.off != nil {
			r.off.noGPUHits = sc.noGPUHits
		}
	case *refReplica:
		if r.off != nil {
			r.off.noGPUHits = sc.noGPUHits
		}
	}
	for i, q := range sc.reqs {
		req := q.req
		req.Tag = i
		k.Schedule(q.at, 0, func(now sim.Time) {
			r.Submit(&req)
			fmt.Fprintf(&b, "submit %s %v %+v\n", req.ID, now, r.Metrics())
		})
	}
	for i, f := range sc.fails {
		k.Schedule(f, -1, func(sim.Time) { r.Fail() })
		k.Schedule(sc.recover[i], -1, func(sim.Time) { r.Recover() })
	}
	if err := k.Run(sim.Never); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "end %v %+v\n", k.Now(), r.Metrics())
	return b.String()
}

// TestMatchesReference checks, on random scripts, that the replica's every hook call and
// every metrics reading are exactly those of the reference engine (reference_test.go).
func TestMatchesReference(t *testing.T) {
	rounds := 300
	if testing.Short() {
		rounds = 60
	}
	for seed := range uint64(rounds) {
		sc := randomScript(rand.New(rand.NewPCG(seed, 99)))
		// With someone hearing KV events, generated blocks are cached as they fill, as the
		// reference caches them, so the cache's size matches step by step; without, the
		// replica defers caching those only their request can hit (catchUp).
		heard := seed%2 == 1
		want := play(t, sc, heard, func(k *sim.Kernel, c Config, h Hooks) (submitter, error) { return newRef(k, c, h) })
		got := play(t, sc, heard, func(k *sim.Kernel, c Config, h Hooks) (submitter, error) {
			if heard && h.KV == nil {
				h.KV = func(KVEvent) {}
			}
			return New(k, c, h)
		})
		if got != want {
			wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
			for i := range min(len(wl), len(gl)) {
				if wl[i] != gl[i] {
					t.Fatalf("seed %d: line %d differs:\nwant %s\ngot  %s", seed, i, wl[i], gl[i])
				}
			}
			t.Fatalf("seed %d: %d lines, want %d", seed, len(gl), len(wl))
		}
		if done := strings.Count("\n"+got, "\ndone "); done != len(sc.reqs) {
			t.Fatalf("seed %d: %d requests ended, want all %d", seed, done, len(sc.reqs))
		}
	}
}
