package cluster

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"kvroute/gpumodel"
	"kvroute/router"
	"kvroute/router/prefix"
)

// BenchmarkPredictedTTFTPick is router's BenchmarkPick for predicted-ttft with the step-time
// model the simulator gives it (gpumodel's H100 Llama-3.1-8B PrefillPredictor on every
// endpoint): one decision plus its Routed, Finished and the routed prompt's KV events (events
// outside the timer), 64 prompts of 8 groups sharing three quarters of their tokens.
func BenchmarkPredictedTTFTPick(b *testing.B) {
	for _, n := range []int{8, 64} {
		for _, tokens := range []int{1024, 8192} {
			b.Run(fmt.Sprintf("endpoints=%d/prompt=%dk", n, tokens/1024), func(b *testing.B) {
				benchPredictedPick(b, n, tokens)
			})
		}
	}
}

func benchPredictedPick(b *testing.B, n, tokens int) {
	pp, err := gpumodel.NewPrefillPredictor(gpumodel.DefaultDeployment(gpumodel.H100SXM80GB(), gpumodel.Llama31x8B(), 1))
	if err != nil {
		b.Fatal(err)
	}
	p, err := router.Builtin().New("predicted-ttft", nil, 1)
	if err != nil {
		b.Fatal(err)
	}
	obs, kv := p.(router.Observer), p.(router.KVEventObserver)
	s := &router.Snapshot{Now: Epoch}
	for i := range n {
		s.Endpoints = append(s.Endpoints, router.EndpointState{ID: fmt.Sprintf("ep-%d", i), Ready: true, Prefill: pp, NumGPUBlocks: 27000})
	}
	rng := rand.New(rand.NewPCG(3, 4))
	reqs := make([]router.Request, 64)
	var system []int32
	for i := range reqs {
		if i%8 == 0 {
			system = randTokens(rng, tokens*3/4)
		}
		toks := append(append([]int32(nil), system...), randTokens(rng, tokens-len(system))...)
		reqs[i] = router.Request{ID: fmt.Sprintf("b%d", i), Model: model, Tokens: toks, InputTokens: tokens, MaxOutputTokens: 128}
	}
	where := make([]int, len(reqs))
	step := func(k int) {
		r := &reqs[k%len(reqs)]
		d, err := p.Pick(r, s)
		if err != nil {
			b.Fatal(err)
		}
		e := &s.Endpoints[d.Index]
		e.InFlight++
		obs.Routed(r, e.ID, s.Now)
		b.StopTimer()
		for _, h := range prefix.AppendTokenBlockHashes(nil, prefix.ModelSalt(r.Model), r.Tokens, 16) {
			kv.BlockStored(e.ID, h)
		}
		b.StartTimer()
		j := (k + len(reqs)/2) % len(reqs)
		if k >= len(reqs)/2 {
			s.Endpoints[where[j]].InFlight--
			obs.Finished(&reqs[j], s.Endpoints[where[j]].ID, router.Usage{CompletionTokens: 100}, s.Now)
		}
		where[k%len(reqs)] = d.Index
	}
	for k := range 4 * len(reqs) {
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

func randTokens(rng *rand.Rand, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(rng.IntN(128000))
	}
	return out
}
