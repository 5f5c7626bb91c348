package router_test

import (
	"testing"

	"kvroute/router"
)

func TestCHWBLHotKeyOverflowsToNextRingMember(t *testing.T) {
	p := mustNew(t, "chwbl", nil)
	req := &router.Request{Model: "llama-3.1-8b", Prompt: "a popular system prompt"}
	s := snap(0, 0, 0, 0)
	home := pick(t, p, req, s)
	// Idle pool: (0+1)/4×1.25 < 1, so the seed's rule rejects everyone and falls back to the
	// first ring member.
	if home.Reason != router.ReasonRingSaturated {
		t.Fatalf("idle pool: reason %q, want %q", home.Reason, router.ReasonRingSaturated)
	}
	// The next ring member is where the key lands when its home is gone.
	s.Endpoints[home.Index].Ready = false
	next := pick(t, p, req, s).Index
	s.Endpoints[home.Index].Ready = true

	// Balanced load: home accepted.
	for i := range s.Endpoints {
		s.Endpoints[i].InFlight = 4
	} // total 16: bound (17/4)×1.25 = 5.3; 4+1 ≤ 5.3
	if got := pick(t, p, req, s); got.Index != home.Index || got.Reason != router.ReasonRingFirst {
		t.Fatalf("balanced: got %+v, want home %d (ring-first)", got, home.Index)
	}
	// Hot home: 5+1 > (18/4)×1.25 = 5.6, so the request overflows to the next member.
	s.Endpoints[home.Index].InFlight = 6
	if got := pick(t, p, req, s); got.Index != next || got.Reason != router.ReasonRingOverflow {
		t.Fatalf("hot home: got %+v, want overflow to %d", got, next)
	}
}

func TestCHWBLKeyIsSystemPromptAndFirstUserMessages(t *testing.T) {
	p := mustNew(t, "chwbl", nil)
	s := snap(0, 0, 0, 0, 0, 0, 0, 0)
	base := []router.Message{
		{Role: "system", Content: "you are helpful"},
		{Role: "user", Content: "first question"},
		{Role: "assistant", Content: "first answer"},
		{Role: "user", Content: "second question"},
	}
	req := func(extra ...router.Message) *router.Request {
		return &router.Request{Model: "llama-3.1-8b", Messages: append(append([]router.Message(nil), base...), extra...)}
	}
	want := pick(t, p, req(), s).Index
	// Later turns keep the key (third user message and assistant turns are not in it).
	for i := range 20 {
		r := req(router.Message{Role: "assistant", Content: "x"}, router.Message{Role: "user", Content: string(rune('a' + i))})
		if got := pick(t, p, r, s).Index; got != want {
			t.Fatalf("turn %d moved the conversation from %d to %d", i, want, got)
		}
	}
	// Different system prompts spread over the ring.
	seen := map[int]bool{}
	for i := range 64 {
		r := &router.Request{Model: "llama-3.1-8b", Messages: []router.Message{{Role: "system", Content: string(rune('A'+i%26)) + string(rune('a'+i/26))}, {Role: "user", Content: "q"}}}
		seen[pick(t, p, r, s).Index] = true
	}
	if len(seen) < 6 {
		t.Fatalf("64 system prompts landed on only %d of 8 endpoints", len(seen))
	}
}

// With prefix_char_length (KubeAI's PrefixHash key) the key is the first N bytes of the first
// user message: the system prompt and everything after byte N are ignored, and prompts of
// completions are cut the same way.
func TestCHWBLPrefixCharLengthKey(t *testing.T) {
	p := mustNew(t, "chwbl", map[string]any{"prefix_char_length": 100, "virtual_nodes_per_replica": 256})
	s := snap(0, 0, 0, 0, 0, 0, 0, 0)
	head := func(i int) string {
		return string(rune('A'+i%26)) + string(rune('a'+i/26)) + " " + string(make([]byte, 97))
	}
	chat := func(system, user string) *router.Request {
		return &router.Request{Model: "llama-3.1-8b", Messages: []router.Message{{Role: "system", Content: system}, {Role: "user", Content: user}}}
	}
	spread := map[int]bool{}
	for i := range 64 {
		want := pick(t, p, chat("one system prompt", head(i)+"tail one"), s).Index
		spread[want] = true
		for _, r := range []*router.Request{
			chat("another system prompt", head(i)+"a different tail"),
			{Model: "llama-3.1-8b", Prompt: head(i) + "as a completion"},
		} {
			if got := pick(t, p, r, s).Index; got != want {
				t.Fatalf("key %d: a request sharing the first 100 bytes went to %d, not %d", i, got, want)
			}
		}
	}
	if len(spread) < 6 {
		t.Fatalf("64 different first messages landed on only %d of 8 endpoints", len(spread))
	}
	if _, err := router.Builtin().New("chwbl", map[string]any{"prefix_char_length": -1}, 1); err == nil {
		t.Error("prefix_char_length -1 accepted")
	}
}
