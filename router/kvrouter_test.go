package router_test

import (
	"testing"

	"kvroute/router"
	"kvroute/router/prefix"
	"kvroute/router/routertest"
)

// toks returns n token ids unique to tag.
func toks(tag, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(tag*100000 + i)
	}
	return out
}

// kvEvent stores blocks [from, to) of tokens' 16-token blocks on endpoint.
type kvStore struct {
	endpoint string
	tokens   []int32
	from, to int
}

// activeReq is a request routed before the decision; ft: its first token came back.
type activeReq struct {
	endpoint string
	tokens   []int32
	ft       bool
}

func blockHashes(tokens []int32) []uint64 {
	return prefix.AppendTokenBlockHashes(nil, prefix.ModelSalt(routertest.Model), tokens, 16)
}

func TestKVRouterDecisions(t *testing.T) {
	prompt := toks(1, 160) // 10 blocks of 16
	tests := []struct {
		name   string
		params map[string]any
		stored []kvStore
		active []activeReq
		want   []int
	}{
		{
			// ep-0: max(0, 10 − 10) + 10 = 10; others 10 + 10 = 20.
			name:   "cached blocks are credited",
			stored: []kvStore{{"ep-0", prompt, 0, 10}},
			want:   []int{0},
		},
		{
			// Only the leading run counts: ep-0 lacks block 0 so it gets no credit
			// (20); ep-1 holds blocks 0–4: 10 − 5 + 10 = 15.
			name:   "leading run only",
			stored: []kvStore{{"ep-0", prompt, 1, 10}, {"ep-1", prompt, 0, 5}},
			want:   []int{1},
		},
		{
			// ep-0 caches the prompt but still prefills 160 tokens of another request:
			// (160 + 160)/16 − 10 + (10 + 10) = 30; ep-1/ep-2 run one 1-block request past
			// its first token: 10 + 11 = 21.
			name:   "active prefill repels",
			stored: []kvStore{{"ep-0", prompt, 0, 10}},
			active: []activeReq{{"ep-0", toks(2, 160), false}, {"ep-1", toks(3, 16), true}, {"ep-2", toks(4, 16), true}},
			want:   []int{1, 2},
		},
		{
			// The same, with ep-0's first token back: its prefill is released,
			// 0 + 20 = 20 < 21.
			name:   "first token releases prefill",
			stored: []kvStore{{"ep-0", prompt, 0, 10}},
			active: []activeReq{{"ep-0", toks(2, 160), true}, {"ep-1", toks(3, 16), true}, {"ep-2", toks(4, 16), true}},
			want:   []int{0},
		},
		{
			// ep-0 runs the same prompt (no KV event yet): its blocks are shared, so
			// decode = 10 + 10 − 10; cost 10 + 10 = 20. ep-1: 10 + 20 = 30; ep-2: 10 + 18 = 28.
			// Counting the request's blocks again would make ep-0 30.
			name:   "active blocks are deduplicated",
			active: []activeReq{{"ep-0", prompt, true}, {"ep-1", toks(5, 160), true}, {"ep-2", toks(6, 128), true}},
			want:   []int{0},
		},
		{
			// prefill_load_scale 0: only decode blocks count. ep-0 has a huge prefill
			// backlog but fewest blocks (4+10 = 14 vs 20 and 18).
			name:   "prefill_load_scale weighs prefill",
			params: map[string]any{"prefill_load_scale": 0.0},
			active: []activeReq{{"ep-0", toks(7, 64), false}, {"ep-1", toks(8, 160), true}, {"ep-2", toks(9, 128), true}},
			want:   []int{0},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := mustNew(t, "kv-router", tc.params)
			s := snap(0, 0, 0)
			kv := p.(router.KVEventObserver)
			for _, st := range tc.stored {
				for _, h := range blockHashes(st.tokens)[st.from:st.to] {
					kv.BlockStored(st.endpoint, h, router.MediumGPU)
				}
			}
			obs := p.(router.Observer)
			for i, a := range tc.active {
				req := &router.Request{ID: string(rune('a' + i)), Model: routertest.Model, Tokens: a.tokens}
				obs.Routed(req, router.Decision{}, a.endpoint, s.Now)
				if a.ft {
					p.(router.FirstTokenObserver).FirstToken(req, a.endpoint, s.Now)
				}
			}
			req := &router.Request{ID: "new", Model: routertest.Model, Tokens: prompt}
			for range 30 {
				if d := pick(t, p, req, s); !containsInt(tc.want, d.Index) || d.Reason != router.ReasonKVCost {
					t.Fatalf("picked %+v, want one of %v", d, tc.want)
				}
			}
		})
	}
}

func TestKVRouterTemperatureSamples(t *testing.T) {
	prompt := toks(1, 160)
	count := func(temp float64) [3]int {
		p := mustNew(t, "kv-router", map[string]any{"router_temperature": temp})
		kv := p.(router.KVEventObserver)
		for _, h := range blockHashes(prompt)[:10] {
			kv.BlockStored("ep-0", h, router.MediumGPU) // ep-0 costs 10, the others 20
		}
		var n [3]int
		s := snap(0, 0, 0)
		for range 600 {
			n[pick(t, p, &router.Request{ID: "x", Model: routertest.Model, Tokens: prompt}, s).Index]++
		}
		return n
	}
	if n := count(0); n[0] != 600 {
		t.Errorf("temperature 0: %v, want every pick on ep-0", n)
	}
	// T = 1: weights 1, e^-1, e^-1 → ep-0 about 58%, each other about 21%.
	n := count(1)
	if n[0] < 280 || n[0] > 420 || n[1] < 70 || n[2] < 70 {
		t.Errorf("temperature 1: %v, want about 348/126/126", n)
	}
}
