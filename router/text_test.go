package router_test

import (
	"slices"
	"testing"

	"kvroute/router"
	"kvroute/router/routertest"
)

// TestTextFreePoliciesIgnoreText drives every built-in policy twice over the same requests,
// once with their prompt text and messages and once without: a policy that says it is
// text-free must decide the same, and the text-reading control (prefix-score) must not.
func TestTextFreePoliciesIgnoreText(t *testing.T) {
	reg := router.Builtin()
	withText := routertest.Stream(7, 300, "m")
	for i := range withText {
		withText[i].Tokens = pseudoTokens(withText[i].Prompt)
		withText[i].InputTokens = len(withText[i].Tokens)
	}
	bare := slices.Clone(withText)
	for i := range bare {
		bare[i].Prompt, bare[i].Messages = "", nil
	}
	free := 0
	for _, name := range reg.Names() {
		t.Run(name, func(t *testing.T) {
			p, _ := reg.New(name, nil, 3)
			same := samePicks(t, reg, name, withText, bare)
			switch {
			case !router.ReadsText(p):
				free++
				if !same {
					t.Errorf("%s says it is text-free but decides differently without text", name)
				}
			case name == "prefix-score" && same:
				t.Errorf("control: prefix-score decides the same without text, so the test proves nothing")
			}
		})
	}
	if free < 6 {
		t.Errorf("%d text-free policies, want at least the 6 baselines", free)
	}
}

// samePicks reports whether policy name, built afresh, decides a and b the same on 8
// endpoints.
func samePicks(t *testing.T, reg *router.Registry, name string, a, b []router.Request) bool {
	t.Helper()
	picks := func(reqs []router.Request) []router.Decision {
		p, err := reg.New(name, nil, 3)
		if err != nil {
			t.Fatal(err)
		}
		snap := &router.Snapshot{Endpoints: routertest.Endpoints(8, "m")}
		return routertest.Drive(t, p, snap, slices.Clone(reqs))
	}
	return slices.Equal(picks(a), picks(b))
}

// pseudoTokens turns a prompt into token ids, four bytes a token, so that requests that
// share text share a token prefix.
func pseudoTokens(s string) []int32 {
	out := make([]int32, 0, len(s)/4+1)
	for i := 0; i < len(s); i += 4 {
		var v int32
		for _, c := range []byte(s[i:min(i+4, len(s))]) {
			v = v<<8 | int32(c)
		}
		out = append(out, v)
	}
	return out
}
