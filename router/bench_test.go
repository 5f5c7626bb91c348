package router_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"kvroute/router"
	"kvroute/router/prefix"
	"kvroute/router/routertest"
)

// BenchmarkPick measures one routing decision plus its Routed bookkeeping (and a Finished for
// an earlier request), on a warm policy: 64 prompts in 8 groups sharing a long system prompt,
// ~4 characters a token, with token ids. Policies that read KV events get the routed
// prompt's blocks as stored on its endpoint, outside the timer (an engine's events arrive
// apart from decisions); predicted-ttft runs without a step-time model here (its fallback
// rate; sim/cluster's BenchmarkPredictedTTFTPick prices with gpumodel).
func BenchmarkPick(b *testing.B) {
	reg := router.Builtin()
	for _, name := range reg.Names() {
		for _, n := range []int{8, 64, 512} {
			for _, tokens := range []int{1024, 8192} {
				b.Run(fmt.Sprintf("%s/endpoints=%d/prompt=%dk", name, n, tokens/1024), func(b *testing.B) {
					benchPick(b, reg, name, n, tokens)
				})
			}
		}
	}
}

func benchPick(b *testing.B, reg *router.Registry, name string, n, tokens int) {
	p, err := reg.New(name, nil, 1)
	if err != nil {
		b.Fatal(err)
	}
	obs, _ := p.(router.Observer)
	kv, _ := p.(router.KVEventObserver)
	reqs := benchRequests(tokens)
	s := &router.Snapshot{Now: routertest.Epoch, Endpoints: routertest.Endpoints(n, routertest.Model)}
	where := make([]int, len(reqs))
	step := func(k int) {
		r := &reqs[k%len(reqs)]
		d, err := p.Pick(r, s)
		if err != nil {
			b.Fatal(err)
		}
		e := &s.Endpoints[d.Index]
		e.InFlight++
		if obs != nil {
			obs.Routed(r, e.ID, s.Now)
		}
		if kv != nil {
			b.StopTimer()
			for _, h := range prefix.AppendTokenBlockHashes(nil, prefix.ModelSalt(r.Model), r.Tokens, 16) {
				kv.BlockStored(e.ID, h)
			}
			b.StartTimer()
		}
		// The request routed half a pool ago finishes, keeping loads steady.
		j := (k + len(reqs)/2) % len(reqs)
		if k >= len(reqs)/2 {
			s.Endpoints[where[j]].InFlight--
			if obs != nil {
				obs.Finished(&reqs[j], s.Endpoints[where[j]].ID, router.Usage{CompletionTokens: 100}, s.Now)
			}
		}
		where[k%len(reqs)] = d.Index
	}
	for k := range 4 * len(reqs) { // warm the indexes
		step(k)
	}
	b.ReportAllocs()
	b.ResetTimer()
	k := 4 * len(reqs)
	for b.Loop() {
		step(k)
		k++
	}
}

// randTokens returns n token ids below 128k.
func randTokens(rng *rand.Rand, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(rng.IntN(128000))
	}
	return out
}

// benchRequests returns 64 requests of about tokens tokens each: 8 groups whose members share
// a system prompt of three quarters of the length.
func benchRequests(tokens int) []router.Request {
	rng := rand.New(rand.NewPCG(3, 4))
	chars := tokens * 4
	reqs := make([]router.Request, 64)
	var system string
	var systemToks []int32
	for i := range reqs {
		if i%8 == 0 {
			system = routertest.Words(rng, chars*3/4)
			systemToks = randTokens(rng, tokens*3/4)
		}
		reqs[i] = router.Request{
			ID: fmt.Sprintf("b%d", i), Model: routertest.Model, Tenant: fmt.Sprintf("t%d", i%4),
			SessionKey: fmt.Sprintf("s%d", i%16), Prompt: system + routertest.Words(rng, chars/4),
			Tokens:      append(append([]int32(nil), systemToks...), randTokens(rng, tokens-len(systemToks))...),
			InputTokens: tokens, MaxOutputTokens: 128,
		}
	}
	return reqs
}
