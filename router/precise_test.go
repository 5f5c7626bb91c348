package router_test

import (
	"testing"
	"time"

	"kvroute/router"
	"kvroute/router/prefix"
	"kvroute/router/routertest"
)

func TestPrecisePrefixFollowsKVEvents(t *testing.T) {
	p := mustNew(t, "precise-prefix", nil)
	kv := p.(router.KVEventObserver)
	toks := make([]int32, 64) // four full blocks
	for i := range toks {
		toks[i] = int32(1000 + i)
	}
	req := &router.Request{ID: "r", Model: routertest.Model, Tokens: toks}
	hashes := prefix.AppendTokenBlockHashes(nil, prefix.ModelSalt(routertest.Model), toks, 16)
	s := snap(0, 0, 0)
	s.Endpoints[2].Waiting = 1 // ep-2 is a little busier, and holds the blocks
	for _, h := range hashes {
		kv.BlockStored("ep-2", h, router.MediumGPU)
	}
	if got := pick(t, p, req, s).Index; got != 2 {
		t.Fatalf("with ep-2 holding every block: picked %d", got)
	}
	// ep-1 holds only blocks 1..3, not the first: not a prefix, no score.
	for _, h := range hashes[1:] {
		kv.BlockStored("ep-1", h, router.MediumGPU)
	}
	kv.BlockRemoved("ep-2", hashes[0], router.MediumGPU)
	if got := pick(t, p, req, s).Index; got == 2 {
		t.Fatal("ep-2 lost its first block and still won against idle endpoints")
	}
	for _, h := range hashes[:1] {
		kv.BlockStored("ep-2", h, router.MediumGPU)
	}
	kv.AllBlocksCleared("ep-2")
	if got := pick(t, p, req, s).Index; got == 2 {
		t.Fatal("ep-2's cache was cleared and it still won")
	}
}

// With speculative indexing, a decision counts as a cache entry until its TTL: a second
// request with the same blocks follows the first before any KV event arrives.
func TestPrecisePrefixSpeculativeIndexing(t *testing.T) {
	toks := make([]int32, 64)
	for i := range toks {
		toks[i] = int32(7 + i)
	}
	for _, tc := range []struct {
		spec   bool
		after  time.Duration
		follow bool
	}{{false, 0, false}, {true, time.Second, true}, {true, 3 * time.Second, false}} {
		p := mustNew(t, "precise-prefix", map[string]any{"speculative_indexing": tc.spec})
		s := snap(0, 0, 0, 0)
		first := route(t, p, &router.Request{ID: "a", Model: routertest.Model, Tokens: toks}, s)
		for i := range s.Endpoints {
			s.Endpoints[i].InFlight, s.Endpoints[i].Waiting = 0, 0
		}
		s.Endpoints[first.Index].Waiting = 1 // the first endpoint is now the busier one
		s.Now = s.Now.Add(tc.after)
		got := pick(t, p, &router.Request{ID: "b", Model: routertest.Model, Tokens: toks}, s)
		if (got.Index == first.Index) != tc.follow {
			t.Errorf("speculative=%v after %v: second request on %d, first on %d; want follow=%v", tc.spec, tc.after, got.Index, first.Index, tc.follow)
		}
	}
}
