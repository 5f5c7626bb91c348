package router_test

import (
	"slices"
	"testing"

	"kvroute/router"
	"kvroute/router/routertest"
)

// TestPoliciesThatIgnoreTokensSayNothing drives every built-in policy twice over the same
// requests, once with token ids and exact counts and once with neither (counts estimated
// from the text, as the proxy does without /tokenize): a policy that does not report
// ReadsTokens must decide the same, so the proxy may skip tokenizing for it; the ones that
// read tokens must decide differently at least once, or the declaration is not needed.
func TestPoliciesThatIgnoreTokensSayNothing(t *testing.T) {
	reg := router.Builtin()
	withTokens := routertest.Stream(7, 300, "m")
	for i := range withTokens {
		withTokens[i].Tokens = pseudoTokens(withTokens[i].Prompt)
		withTokens[i].InputTokens = len(withTokens[i].Tokens) + 7 // not the estimate
	}
	bare := slices.Clone(withTokens)
	for i := range bare {
		bare[i].Tokens, bare[i].InputTokens = nil, (len(bare[i].Prompt)+3)/4
	}
	readers := 0
	for _, name := range reg.Names() {
		t.Run(name, func(t *testing.T) {
			p, _ := reg.New(name, nil, 3)
			same := samePicks(t, reg, name, withTokens, bare)
			if router.ReadsTokens(p) {
				readers++
				if same {
					t.Logf("%s reads tokens but decided the same on this stream", name)
				}
				return
			}
			if !same {
				t.Errorf("%s does not say it reads tokens but decides differently without them", name)
			}
		})
	}
	if readers < 5 {
		t.Errorf("%d policies read tokens, want at least kv-router, predicted-ttft, precise-prefix, token-load and vtc-basic", readers)
	}
}
