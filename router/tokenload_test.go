package router_test

import (
	"testing"

	"kvroute/router"
	"kvroute/router/routertest"
)

func TestTokenLoadDecisions(t *testing.T) {
	prompt := toks(1, 640) // 10 blocks of 64 tokens
	tests := []struct {
		name   string
		active []activeReq // routed before, in order; ft: first token came back
		done   []activeReq // routed and finished before (they leave only their prefix)
		prompt []int32
		want   []int
	}{
		{
			// ep-0 holds the prompt (score 1 ≥ 0.80) and has 1000 tokens in flight:
			// 63 ms estimated TTFT is within the 18 s penalty, so only ep-0 stays.
			name: "sticky endpoint kept despite load",
			done: []activeReq{{"ep-0", prompt, true}}, active: []activeReq{{"ep-0", toks(2, 1000), false}},
			prompt: prompt, want: []int{0},
		},
		{
			// 300,000 in-flight tokens on ep-0: 18.8 s > 18 s over the idle others, so the
			// gate breaks and token load picks an idle endpoint.
			name: "TTFT penalty breaks stickiness",
			done: []activeReq{{"ep-0", prompt, true}}, active: []activeReq{{"ep-0", toks(2, 300000), false}},
			prompt: prompt, want: []int{1, 2},
		},
		{
			// The same load, released at the first token: ep-0 is sticky again.
			name: "first token releases in-flight tokens",
			done: []activeReq{{"ep-0", prompt, true}}, active: []activeReq{{"ep-0", toks(2, 300000), true}},
			prompt: prompt, want: []int{0},
		},
		{
			// ep-0 holds 7 of 10 blocks (0.7 < 0.80): not sticky, least tokens wins.
			name: "below the affinity threshold",
			done: []activeReq{{"ep-0", prompt[:448], true}}, active: []activeReq{{"ep-0", toks(2, 1000), false}, {"ep-2", toks(3, 10), false}},
			prompt: prompt, want: []int{1},
		},
		{
			// A request fully matched on ep-0 is charged 640 − 10×64 = 0 tokens: ep-0 has 0
			// in flight, ep-1 100, ep-2 50. Charging the whole prompt would pick ep-2.
			name:   "cached prefix is not charged",
			done:   []activeReq{{"ep-0", prompt, true}},
			active: []activeReq{{"ep-0", prompt, false}, {"ep-1", toks(4, 100), false}, {"ep-2", toks(5, 50), false}},
			prompt: toks(9, 640), want: []int{0},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := mustNew(t, "token-load", nil)
			obs := p.(router.Observer)
			ft := p.(router.FirstTokenObserver)
			s := snap(0, 0, 0)
			for i, a := range tc.done {
				req := &router.Request{ID: "d" + string(rune('a'+i)), Model: routertest.Model, Tokens: a.tokens}
				obs.Routed(req, router.Decision{}, a.endpoint, s.Now)
				obs.Finished(req, a.endpoint, router.Usage{}, s.Now)
			}
			for i, a := range tc.active {
				req := &router.Request{ID: "a" + string(rune('a'+i)), Model: routertest.Model, Tokens: a.tokens}
				obs.Routed(req, router.Decision{}, a.endpoint, s.Now)
				if a.ft {
					ft.FirstToken(req, a.endpoint, s.Now)
				}
			}
			req := &router.Request{ID: "new", Model: routertest.Model, Tokens: tc.prompt}
			for range 30 {
				if d := pick(t, p, req, s); !containsInt(tc.want, d.Index) {
					t.Fatalf("picked %+v, want one of %v", d, tc.want)
				}
			}
		})
	}
}
