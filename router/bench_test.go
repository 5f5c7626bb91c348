package router_test

import (
	"fmt"
	"testing"

	"kvroute/router"
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
	s := &router.Snapshot{Now: routertest.Epoch, Endpoints: routertest.Endpoints(n, routertest.Model)}
	routertest.BenchPick(b, p, s, routertest.BenchRequests(routertest.Model, tokens))
}
