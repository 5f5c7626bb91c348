package cluster

import (
	"fmt"
	"testing"

	"kvroute/gpumodel"
	"kvroute/router"
	"kvroute/router/routertest"
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
	s := &router.Snapshot{Now: Epoch}
	for i := range n {
		s.Endpoints = append(s.Endpoints, router.EndpointState{ID: fmt.Sprintf("ep-%d", i), Ready: true, Prefill: pp, NumGPUBlocks: 27000})
	}
	routertest.BenchPick(b, p, s, routertest.BenchRequests(model, tokens))
}
