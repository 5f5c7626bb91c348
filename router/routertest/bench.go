package routertest

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"kvroute/router"
	"kvroute/router/prefix"
)

// BenchPick measures one decision of p on s's endpoints through a Lifecycle (Pick plus its
// Routed bookkeeping) and the Finished of the request decided half a pool earlier, keeping
// loads steady, on a policy warmed by four passes over reqs. A policy that reads KV events
// gets the routed prompt's 16-token blocks as stored on its endpoint, outside the timer (an
// engine's events arrive apart from decisions). router's BenchmarkPick and sim/cluster's
// BenchmarkPredictedTTFTPick use it.
func BenchPick(b *testing.B, p router.Policy, s *router.Snapshot, reqs []router.Request) {
	kv, _ := p.(router.KVEventObserver)
	l, err := router.NewLifecycle(p, s.Endpoints, router.LifecycleConfig{})
	if err != nil {
		b.Fatal(err)
	}
	tickets := make([]router.Ticket, len(reqs))
	step := func(k int) {
		j := (k + len(reqs)/2) % len(reqs)
		if k >= len(reqs)/2 {
			tickets[j].Finish(router.Usage{CompletionTokens: 100}, s.Now)
		}
		t, r := &tickets[k%len(reqs)], &reqs[k%len(reqs)] // finished half a pool ago
		if err := l.Decide(t, r, s.Now); err != nil {
			b.Fatal(err)
		}
		if kv != nil {
			b.StopTimer()
			for _, h := range prefix.AppendTokenBlockHashes(nil, prefix.ModelSalt(r.Model), r.Tokens, 16) {
				kv.BlockStored(t.Endpoint(), h, router.MediumGPU)
			}
			b.StartTimer()
		}
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

// BenchRequests returns 64 requests for model of about tokens tokens each (text of ~4
// characters a token, and token ids): 8 groups whose members share a system prompt of three
// quarters of the length; tenants and sessions cycle over 4 and 16.
func BenchRequests(model string, tokens int) []router.Request {
	rng := rand.New(rand.NewPCG(3, 4))
	chars := tokens * 4
	reqs := make([]router.Request, 64)
	var system string
	var systemToks []int32
	for i := range reqs {
		if i%8 == 0 {
			system = Words(rng, chars*3/4)
			systemToks = randTokens(rng, tokens*3/4)
		}
		reqs[i] = router.Request{
			ID: fmt.Sprintf("b%d", i), Model: model, Tenant: fmt.Sprintf("t%d", i%4),
			SessionKey: fmt.Sprintf("s%d", i%16), Prompt: system + Words(rng, chars/4),
			Tokens:      append(append([]int32(nil), systemToks...), randTokens(rng, tokens-len(systemToks))...),
			InputTokens: tokens, MaxOutputTokens: 128,
		}
	}
	return reqs
}

// randTokens returns n token ids below 128k.
func randTokens(rng *rand.Rand, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(rng.IntN(128000))
	}
	return out
}
