package router_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"kvroute/router"
	"kvroute/router/routertest"
)

// route picks for req on s and reports the decision as routed, updating in-flight counts.
func route(t *testing.T, p router.Policy, req *router.Request, s *router.Snapshot) router.Decision {
	t.Helper()
	d := pick(t, p, req, s)
	s.Endpoints[d.Index].InFlight++
	if o, ok := p.(router.Observer); ok {
		o.Routed(req, d, s.Endpoints[d.Index].ID, s.Now)
	}
	return d
}

func text(seed uint64, chars int) string {
	return routertest.Words(rand.New(rand.NewPCG(seed, 0)), chars)
}

func req(id, prompt string) *router.Request {
	return &router.Request{ID: id, Model: routertest.Model, Prompt: prompt}
}

// TestPrefixPoliciesFollowTheCache checks, for every prefix policy, that once a long prompt
// has been routed to an endpoint, a prompt sharing most of it goes to the same endpoint while
// the pool is balanced, with the prefix-match reason. Four endpoints: with AIBrix's
// mean + 2σ filter, one endpoint above all others passes only in pools of up to five.
func TestPrefixPoliciesFollowTheCache(t *testing.T) {
	for _, name := range []string{"prefix-cache", "prefix-tree", "prefix-score", "cache-aware"} {
		t.Run(name, func(t *testing.T) {
			p := mustNew(t, name, nil)
			s := snap(0, 0, 0, 0)
			system := text(1, 4000)
			first := route(t, p, req("a", system+text(2, 300)), s)
			for i := range 5 { // the holder now has the most in flight, yet keeps winning
				d := route(t, p, req("b"+string(rune('0'+i)), system+text(uint64(3+i), 300)), s)
				if d.Index != first.Index {
					t.Fatalf("follow-up %d went to %d, want the prefix holder %d (%s)", i, d.Index, first.Index, d.Reason)
				}
				if want := router.ReasonPrefixMatch; name != "prefix-score" && d.Reason != want {
					t.Fatalf("follow-up %d: reason %q, want %q", i, d.Reason, want)
				}
			}
		})
	}
}

// The seed's own example: running [1, 2, 20] with threshold 16 is imbalanced and goes to the
// least-running pod, whatever the cache says.
func TestPrefixCacheImbalanceSeedExample(t *testing.T) {
	p := mustNew(t, "prefix-cache", nil)
	s := snap(0, 0, 0)
	prompt := text(1, 2000)
	route(t, p, req("warm", prompt), s) // now some endpoint holds the prompt
	holder := -1
	for i, e := range s.Endpoints {
		if e.InFlight == 1 {
			holder = i
		}
	}
	// Make the holder the busiest: [1, 2, 20] arranged so the holder has 20.
	loads := []int{1, 2, 20}
	for i := range s.Endpoints {
		s.Endpoints[(holder+1+i)%3].InFlight = loads[i]
	}
	if got := pick(t, p, req("x", prompt), s); got.Reason != router.ReasonImbalance || s.Endpoints[got.Index].InFlight != 1 {
		t.Fatalf("got endpoint with %d running (%s), want the one with 1 (imbalance)", s.Endpoints[got.Index].InFlight, got.Reason)
	}
	// At threshold 32 the same pool is balanced enough, but 20 > mean + 2σ is not true for three
	// pods (mean 7.7, σ 8.7), so the holder keeps the request.
	p2 := mustNew(t, "prefix-cache", map[string]any{"imbalance_abs_count": 32})
	route(t, p2, req("warm", prompt), snap(0, 0, 0))
	s2 := snap(0, 0, 0)
	h2 := pick(t, p2, req("x", prompt), s2).Index
	for i := range s2.Endpoints {
		s2.Endpoints[(h2+1+i)%3].InFlight = loads[i]
	}
	if got := pick(t, p2, req("x", prompt), s2); got.Index != h2 || got.Reason != router.ReasonPrefixMatch {
		t.Fatalf("threshold 32: got %+v, want holder %d by prefix match", got, h2)
	}
}

// A matched pod above mean + 2σ of the pool is skipped for least-request.
func TestPrefixCacheLoadFilter(t *testing.T) {
	p := mustNew(t, "prefix-cache", nil)
	s := snap(make([]int, 10)...)
	prompt := text(1, 2000)
	h := route(t, p, req("warm", prompt), s).Index
	for i := range s.Endpoints {
		s.Endpoints[i].InFlight = 0
	}
	s.Endpoints[h].InFlight = 10 // mean 1, σ 3: 10 > 1 + 2·3; spread 10 ≤ 16 so no imbalance
	got := pick(t, p, req("y", prompt), s)
	if got.Index == h || got.Reason != router.ReasonLoadFiltered {
		t.Fatalf("got %+v, want a least-request endpoint other than the overloaded holder %d", got, h)
	}
}

func TestPrefixTreeLowMatchGoesToSmallestTree(t *testing.T) {
	p := mustNew(t, "prefix-tree", nil)
	s := snap(0, 0, 0)
	// Fill endpoints 0 and 1 with text; endpoint 2 stays empty.
	for i, n := range []int{5000, 3000} {
		p.(router.Observer).Routed(req("fill", text(uint64(10+i), n)), router.Decision{}, s.Endpoints[i].ID, s.Now)
	}
	got := pick(t, p, req("new", text(99, 1000)), s)
	if got.Index != 2 || got.Reason != router.ReasonLowMatch {
		t.Fatalf("unrelated prompt: %+v, want endpoint 2 (smallest tree, low-match)", got)
	}
	// Queue spread above 10: power of two before ray PR #59390, prefix matching since.
	s.Endpoints[0].Running = 11
	if got := pick(t, p, req("new", text(99, 1000)), s); got.Reason != router.ReasonLowMatch {
		t.Fatalf("spread 11, threshold ∞: reason %q, want %q", got.Reason, router.ReasonLowMatch)
	}
	old := mustNew(t, "prefix-tree", map[string]any{"variant": "ray-before-pr59390"})
	if got := pick(t, old, req("new", text(99, 1000)), s); got.Reason != router.ReasonImbalance {
		t.Fatalf("spread 11, threshold 10: reason %q, want %q", got.Reason, router.ReasonImbalance)
	}
}

func TestCacheAwareBalanceGate(t *testing.T) {
	p := mustNew(t, "cache-aware", nil)
	prompt := text(1, 3000)
	s := snap(0, 0, 0, 0)
	h := route(t, p, req("warm", prompt), s).Index
	cases := []struct {
		name   string
		holder int // the holder's in-flight count; others have 10
		want   string
	}{
		{"spread 64 is not imbalanced", 74, router.ReasonPrefixMatch},
		{"spread 65 and 7.5x is imbalanced", 75, router.ReasonImbalance},
	}
	for _, tc := range cases {
		for i := range s.Endpoints {
			s.Endpoints[i].InFlight = 10
		}
		s.Endpoints[h].InFlight = tc.holder
		got := pick(t, p, req("q", prompt), s)
		if got.Reason != tc.want {
			t.Errorf("%s: reason %q, want %q", tc.name, got.Reason, tc.want)
		}
	}
	// Absolute spread alone is not enough: 200 vs 140 is under 1.5×.
	for i := range s.Endpoints {
		s.Endpoints[i].InFlight = 140
	}
	s.Endpoints[h].InFlight = 205
	if got := pick(t, p, req("q", prompt), s); got.Index != h {
		t.Errorf("spread 65 but 1.46x: picked %d (%s), want holder %d", got.Index, got.Reason, h)
	}
}

func TestPrefixScoreLoadOutweighsPrefix(t *testing.T) {
	p := mustNew(t, "prefix-score", nil)
	prompt := text(1, 3000)
	s := snap(0, 0, 0)
	h := route(t, p, req("warm", prompt), s).Index
	// Holder: prefix 1×3 + queue 0×2 + kv 0.1×2 = 3.2; others 0 + 2 + 2 = 4.
	s.Endpoints[h].Waiting, s.Endpoints[h].KVUsage = 8, 0.9
	if got := pick(t, p, req("q", prompt), s); got.Index == h {
		t.Fatalf("busy holder still won: %+v", got)
	}
	// Holder with a short queue: 3 + 2·(8-2)/8 + 2·0.1 = 4.7 > 4.
	s.Endpoints[h].Waiting = 2
	for i := range s.Endpoints {
		if i != h {
			s.Endpoints[i].Waiting = 8
			s.Endpoints[i].KVUsage = 0
		}
	}
	if got := pick(t, p, req("q", prompt), s); got.Index != h {
		t.Fatalf("lightly loaded holder lost: %+v", got)
	}
}

// An adapter is a different cache: a LoRA request does not follow the base model's prefix.
func TestPrefixScoreSeparatesAdapters(t *testing.T) {
	p := mustNew(t, "prefix-score", nil)
	prompt := strings.Repeat("shared system prompt ", 100)
	s := snap(0, 0, 0, 0)
	for i := range s.Endpoints {
		s.Endpoints[i].Models = []string{routertest.Model, "sql-lora"}
	}
	h := route(t, p, req("base", prompt), s).Index
	lora := &router.Request{ID: "lora", Model: routertest.Model, Prompt: prompt}
	counts := map[int]int{}
	for range 50 {
		lora.Adapter = "sql-lora"
		counts[pick(t, p, lora, s).Index]++
	}
	if counts[h] == 50 {
		t.Fatalf("adapter requests all followed the base model's prefix to %d", h)
	}
}
