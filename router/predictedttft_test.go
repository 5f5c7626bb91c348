package router_test

import (
	"testing"
	"time"

	"kvroute/router"
	"kvroute/router/routertest"
)

// linearPrefill prices each new token at perToken, cached tokens at nothing.
type linearPrefill struct{ perToken time.Duration }

func (l linearPrefill) PrefillTime(tokens, _, _ int, _ int64) time.Duration {
	return time.Duration(tokens) * l.perToken
}

func (l linearPrefill) BatchTime(tokens, _ int, _ int64) time.Duration {
	return time.Duration(tokens) * l.perToken
}

func TestPredictedTTFTDecisions(t *testing.T) {
	prompt := toks(1, 160) // 10 blocks of 16
	ms := time.Millisecond
	tests := []struct {
		name    string
		speeds  []time.Duration // per-token prefill cost of ep-0..2 (0: no model)
		stored  []kvStore
		cpu     []kvStore   // blocks stored in the CPU tier (medium CPU)
		history []activeReq // routed and finished before, no KV events
		active  []activeReq // routed before, in flight; ft: first token back
		later   time.Duration
		params  map[string]any
		// KV state: ep-0's scraped KV usage and the router's in-flight count there, every
		// endpoint's capacity in 16-token blocks (0: unknown), the request's output tokens.
		kvUsage0          float64
		inFlight0, blocks int
		out               int
		want              []int
	}{
		{
			// ep-0 caches the prompt: 0 ms against 160 ms elsewhere.
			name: "cached prompt is fastest", speeds: []time.Duration{ms, ms, ms},
			stored: []kvStore{{"ep-0", prompt, 0, 10}}, want: []int{0},
		},
		{
			// ep-0 has 1000 tokens (1 s at the fallback 1000 tok/s) queued ahead.
			name: "queued prefill repels", speeds: []time.Duration{ms, ms, ms},
			stored: []kvStore{{"ep-0", prompt, 0, 10}}, active: []activeReq{{"ep-0", toks(2, 1000), false}},
			want: []int{1, 2},
		},
		{
			// 950 ms later 50 ms remain: 50 < 160.
			name: "queued work drains with time", speeds: []time.Duration{ms, ms, ms},
			stored: []kvStore{{"ep-0", prompt, 0, 10}}, active: []activeReq{{"ep-0", toks(2, 1000), false}},
			later: 950 * ms, want: []int{0},
		},
		{
			name: "first token releases queued work", speeds: []time.Duration{ms, ms, ms},
			stored: []kvStore{{"ep-0", prompt, 0, 10}}, active: []activeReq{{"ep-0", toks(2, 1000), true}},
			want: []int{0},
		},
		{
			// No KV events: ep-1's routing history says it holds the prompt.
			name: "routing history without events", speeds: []time.Duration{ms, ms, ms},
			history: []activeReq{{"ep-1", prompt, true}}, want: []int{1},
		},
		{
			// ep-0 sends events (of another prompt); ep-1, without events, routed the prompt
			// before: its history still counts beside ep-0's events, and ep-2's empty history
			// is no match (0 ms against 160 ms).
			name: "history counts beside another endpoint's events", speeds: []time.Duration{ms, ms, ms},
			history: []activeReq{{"ep-1", prompt, true}},
			stored:  []kvStore{{"ep-0", toks(3, 32), 0, 2}},
			want:    []int{1},
		},
		{
			// ep-1 sends events (of another prompt): a minute after routing, its history no
			// longer counts; ep-2's events show the first 5 blocks: 80 ms against 160 ms.
			name: "events override history", speeds: []time.Duration{ms, ms, ms},
			history: []activeReq{{"ep-1", prompt, true}},
			stored:  []kvStore{{"ep-1", toks(3, 32), 0, 2}, {"ep-2", prompt, 0, 5}},
			later:   time.Minute, want: []int{2},
		},
		{
			// Within route_ttl (30 s) a routed prompt counts as cached on ep-1 before its
			// events say so: 0 ms against ep-2's 80 ms.
			name: "recently routed counts before its events", speeds: []time.Duration{ms, ms, ms},
			history: []activeReq{{"ep-1", prompt, true}},
			stored:  []kvStore{{"ep-1", toks(3, 32), 0, 2}, {"ep-2", prompt, 0, 5}},
			later:   10 * time.Second, want: []int{1},
		},
		{
			// ep-0 caches the prompt behind 200 queued tokens: TTFT 200 ms; cold ep-1/ep-2:
			// 160 ms, plus 2 × 160 ms for what their extra prefill costs later requests.
			name: "a cache miss counts what it costs later requests", speeds: []time.Duration{ms, ms, ms},
			stored: []kvStore{{"ep-0", prompt, 0, 10}}, active: []activeReq{{"ep-0", toks(2, 200), false}},
			want: []int{0},
		},
		{
			// The same with externality 0: the smallest TTFT alone, 160 ms.
			name: "externality 0 minimises TTFT alone", speeds: []time.Duration{ms, ms, ms},
			stored: []kvStore{{"ep-0", prompt, 0, 10}}, active: []activeReq{{"ep-0", toks(2, 200), false}},
			params: map[string]any{"externality": 0.0}, want: []int{1, 2},
		},
		{
			// ep-0 caches the prompt but its 16,000-token KV cache is 99% used by 20 decoding
			// requests that will each grow by 1,000 more tokens on average: 21,840 tokens over,
			// freed at 35,840 per 2,000-step output lifetime (2 s at 1 ms a step): 1.22 s of
			// waiting, against 160 ms + 2 × 160 ms on the empty ep-1 and ep-2.
			name: "a full KV cache makes a cached prompt wait", speeds: []time.Duration{ms, ms, ms},
			stored: []kvStore{{"ep-0", prompt, 0, 10}}, kvUsage0: 0.99, inFlight0: 20, blocks: 1000, out: 2000,
			want: []int{1, 2},
		},
		{
			// The same with the KV capacity unknown: nothing to wait for.
			name: "unknown KV capacity is not priced", speeds: []time.Duration{ms, ms, ms},
			stored: []kvStore{{"ep-0", prompt, 0, 10}}, kvUsage0: 0.99, inFlight0: 20, out: 2000,
			want: []int{0},
		},
		{
			// Half of a 64,000-token cache used: 32,000 + 20,000 to come + 2,000 fit, no wait.
			name: "KV that fits costs no wait", speeds: []time.Duration{ms, ms, ms},
			stored: []kvStore{{"ep-0", prompt, 0, 10}}, kvUsage0: 0.5, inFlight0: 20, blocks: 4000, out: 2000,
			want: []int{0},
		},
		{
			// ep-0 holds the prompt in its CPU tier only: 160 × 128 KiB at 50 GB/s is 0.4 ms
			// of copying against 160 ms of prefill elsewhere.
			name: "a CPU hit is a load, not a prefill", speeds: []time.Duration{ms, ms, ms},
			cpu: []kvStore{{"ep-0", prompt, 0, 10}}, want: []int{0},
		},
		{
			name: "a CPU hit is not free: a GPU hit beats it", speeds: []time.Duration{ms, ms, ms},
			stored: []kvStore{{"ep-1", prompt, 0, 10}}, cpu: []kvStore{{"ep-0", prompt, 0, 10}}, want: []int{1},
		},
		{
			// At 20 MB/s the copy takes 1 s: more than prefilling the 160 tokens elsewhere costs
			// (160 ms and twice that again for the externality).
			name: "the load is priced by the host link", speeds: []time.Duration{ms, ms, ms},
			cpu: []kvStore{{"ep-0", prompt, 0, 10}}, params: map[string]any{"host_bandwidth_bytes_per_second": 2e7},
			want: []int{1, 2},
		},
		{
			// ep-0: 5 blocks on GPU, the other 5 in CPU (0.2 ms); ep-1: 8 on GPU, 32 ms to
			// prefill; ep-2 holds blocks 6–10 in CPU after a gap: vLLM looks up CPU only from
			// where the GPU hit ends, so they count nothing.
			name: "the CPU tier continues the GPU run", speeds: []time.Duration{ms, ms, ms},
			stored: []kvStore{{"ep-0", prompt, 0, 5}, {"ep-1", prompt, 0, 8}},
			cpu:    []kvStore{{"ep-0", prompt, 5, 10}, {"ep-2", prompt, 6, 10}}, want: []int{0},
		},
		{
			// The same cold prompt: 320 ms on ep-0, 80 ms on ep-1, 160 ms on ep-2 (fallback
			// 1000 tok/s).
			name: "each endpoint's step-time model", speeds: []time.Duration{2 * ms, ms / 2, 0},
			want: []int{1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			params := map[string]any{"fallback_tokens_per_second": 1000.0}
			for k, v := range tc.params {
				params[k] = v
			}
			p := mustNew(t, "predicted-ttft", params)
			s := snap(0, 0, 0)
			for i, sp := range tc.speeds {
				if sp > 0 {
					s.Endpoints[i].Prefill = linearPrefill{sp}
				}
				s.Endpoints[i].NumGPUBlocks, s.Endpoints[i].BlockSize = tc.blocks, 16
			}
			s.Endpoints[0].KVUsage, s.Endpoints[0].InFlight = tc.kvUsage0, tc.inFlight0
			obs := p.(router.Observer)
			for i, h := range tc.history {
				req := &router.Request{ID: "h" + string(rune('a'+i)), Model: routertest.Model, Tokens: h.tokens}
				obs.Routed(req, router.Decision{}, h.endpoint, s.Now)
				obs.Finished(req, h.endpoint, router.Usage{}, s.Now)
			}
			kv := p.(router.KVEventObserver)
			for _, st := range tc.stored {
				for _, h := range blockHashes(st.tokens)[st.from:st.to] {
					kv.BlockStored(st.endpoint, h, router.MediumGPU)
				}
			}
			for _, st := range tc.cpu {
				for _, h := range blockHashes(st.tokens)[st.from:st.to] {
					kv.BlockStored(st.endpoint, h, router.MediumCPU)
				}
			}
			for i, a := range tc.active {
				req := &router.Request{ID: "a" + string(rune('a'+i)), Model: routertest.Model, Tokens: a.tokens}
				obs.Routed(req, router.Decision{}, a.endpoint, s.Now)
				if a.ft {
					p.(router.FirstTokenObserver).FirstToken(req, a.endpoint, s.Now)
				}
			}
			s.Now = s.Now.Add(tc.later)
			req := &router.Request{ID: "new", Model: routertest.Model, Tokens: prompt, MaxOutputTokens: tc.out}
			for range 30 {
				if d := pick(t, p, req, s); !containsInt(tc.want, d.Index) || d.Reason != router.ReasonPredictedTTFT {
					t.Fatalf("picked %+v, want one of %v", d, tc.want)
				}
			}
		})
	}
}

// TestPredictedTTFTQueuesWhatItPicked checks that a routed request queues the prefill time
// predicted for the endpoint it went to: two cold 1000-token requests at once go to
// different endpoints.
func TestPredictedTTFTQueuesWhatItPicked(t *testing.T) {
	p := mustNew(t, "predicted-ttft", nil)
	s := snap(0, 0)
	for i := range s.Endpoints {
		s.Endpoints[i].Prefill = linearPrefill{time.Millisecond}
	}
	obs := p.(router.Observer)
	var got []int
	for i := range 2 {
		req := &router.Request{ID: string(rune('a' + i)), Model: routertest.Model, Tokens: toks(10+i, 1000)}
		d := pick(t, p, req, s)
		obs.Routed(req, d, s.Endpoints[d.Index].ID, s.Now)
		got = append(got, d.Index)
	}
	if got[0] == got[1] {
		t.Errorf("two cold requests at once both went to endpoint %d", got[0])
	}
}

// packedPrefill prices a prompt alone at perToken a token, and packed with others at half
// that: what packing does not share (extra) is half the prompt's own time.
type packedPrefill struct{ perToken time.Duration }

func (m packedPrefill) PrefillTime(tokens, _, _ int, _ int64) time.Duration {
	return time.Duration(tokens) * m.perToken
}

func (m packedPrefill) BatchTime(tokens, _ int, _ int64) time.Duration {
	return time.Duration(tokens) * m.perToken / 2
}

// TestPredictedTTFTQueuesExtraTime checks that a request routed to an idle endpoint queues
// its extra time there. 1000 tokens go to the idle ep-0 (own 1000 ms, extra 500 ms) and 700
// to ep-1 (linear model: extra 0). A cold 100-token request then predicts on ep-0 the packed
// 1100 tokens (550 ms) + the queued extra (500 ms) + its own extra (50 ms) = 1100 ms, and on
// ep-1 800 ms: ep-1. Without the queued extra ep-0 would predict 600 ms.
func TestPredictedTTFTQueuesExtraTime(t *testing.T) {
	ms := time.Millisecond
	p := mustNew(t, "predicted-ttft", nil)
	obs := p.(router.Observer)
	both := snap(0, 0)
	both.Endpoints[0].Prefill, both.Endpoints[1].Prefill = packedPrefill{ms}, linearPrefill{ms}
	for i, n := range []int{1000, 700} {
		only := &router.Snapshot{Now: both.Now, Endpoints: both.Endpoints[i : i+1]}
		req := &router.Request{ID: string(rune('a' + i)), Model: routertest.Model, Tokens: toks(20+i, n)}
		d := pick(t, p, req, only)
		obs.Routed(req, d, only.Endpoints[d.Index].ID, both.Now)
	}
	req := &router.Request{ID: "new", Model: routertest.Model, Tokens: toks(30, 100)}
	if d := pick(t, p, req, both); d.Index != 1 {
		t.Fatalf("picked endpoint %d, want 1 (ep-0's queued extra time makes it slower)", d.Index)
	}
}
