package router_test

import (
	"strings"
	"testing"

	"kvroute/router"
	"kvroute/router/routertest"
)

// pattern returns n bytes of a pattern unique to tag, so prompts with different tags share no
// 128-byte block.
func pattern(tag string, n int) string {
	return strings.Repeat(tag+"-", n/(len(tag)+1)+1)[:n]
}

// routedReq is a request already routed to an endpoint before the decision under test;
// finished ones are also reported finished.
type routedReq struct {
	prompt   string
	endpoint string
	finished bool
}

func TestLMetricDecisions(t *testing.T) {
	hot := pattern("system-prompt", 1000) // 7 full 128-byte blocks
	tests := []struct {
		name   string
		before []routedReq
		prompt string
		want   []int // acceptable endpoints
	}{
		{
			// ep-0: (400 + 1000) × 2 = 2800; ep-1, ep-2: 1000 × 1 → either of them.
			name:   "pending tokens and requests repel",
			before: []routedReq{{pattern("a", 400), "ep-0", false}},
			prompt: pattern("b", 1000), want: []int{1, 2},
		},
		{
			// ep-0 held the prompt (finished): hit = 1000 × 100/100, new 0 → score 0.
			name:   "a full prefix hit wins",
			before: []routedReq{{hot, "ep-0", true}},
			prompt: hot, want: []int{0},
		},
		{
			// ep-0 holds the prefix (new 0) but runs two cold requests of 300:
			// (600 + 0) × 3 = 1800 > ep-1's 1000 × 1. Without the (batch + 1) factor ep-0's
			// 600 would win.
			name: "batch size multiplies",
			before: []routedReq{{hot, "ep-0", true}, {pattern("c", 300), "ep-0", false},
				{pattern("d", 300), "ep-0", false}, {pattern("e", 500), "ep-2", false}},
			prompt: hot, want: []int{1},
		},
		{
			// ep-0 got a request that hit its cache fully: it is charged 0 new tokens, so
			// ep-0 = (0 + 1000) × 2 = 2000 < ep-1 = (600 + 1000) × 2 = 3200. Charging the
			// whole prompt (1000) would make ep-0 4000 and pick ep-1.
			name: "only new tokens are pending",
			before: []routedReq{{hot, "ep-0", true}, {hot, "ep-0", false},
				{pattern("f", 600), "ep-1", false}, {pattern("g", 2000), "ep-2", false}},
			prompt: pattern("h", 1000), want: []int{0},
		},
		{
			// Finished requests release their load: ep-0 is idle again and holds the prefix.
			name: "finish releases",
			before: []routedReq{{pattern("i", 5000), "ep-0", true}, {hot, "ep-0", true},
				{pattern("j", 100), "ep-1", false}},
			prompt: hot, want: []int{0},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := mustNew(t, "lmetric", nil)
			obs := p.(router.Observer)
			s := snap(0, 0, 0)
			for i, r := range tc.before {
				req := &router.Request{ID: "r" + string(rune('a'+i)), Model: routertest.Model, Prompt: r.prompt}
				obs.Routed(req, router.Decision{}, r.endpoint, s.Now)
				if r.finished {
					obs.Finished(req, r.endpoint, router.Usage{}, s.Now)
				}
			}
			req := &router.Request{ID: "new", Model: routertest.Model, Prompt: tc.prompt}
			for range 20 {
				d := pick(t, p, req, s)
				if !containsInt(tc.want, d.Index) || d.Reason != router.ReasonLMetric {
					t.Fatalf("picked %+v, want one of %v", d, tc.want)
				}
			}
		})
	}
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
