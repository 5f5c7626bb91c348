package gateway

import (
	"context"
	"testing"

	"kvroute/internal/kvevents"
	"kvroute/internal/nettest"
	"kvroute/router/prefix"
)

// vLLM publishes its KV events on an empty topic by default, which names no model: a named
// publisher's blocks are keyed under kv_events.model, the name clients send, so that a
// request's own keys (salted with its model) find them; without it they match no request.
func TestKVEventsModelSaltsAnEmptyTopic(t *testing.T) {
	want := prefix.AppendTokenBlockHashes(nil, prefix.ModelSalt(fakeModel), firstTokens(16*2), 16)
	for _, tc := range []struct {
		model     string
		wantMatch bool
	}{{fakeModel, true}, {"", false}} {
		t.Run("model="+tc.model, func(t *testing.T) {
			h := newKVHarness(t)
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			h.fakes = append(h.fakes, newFake(t, "a"))
			h.addrs["a"], h.replay["a"] = "tcp://"+nettest.FreeAddr(t), "tcp://"+nettest.FreeAddr(t)
			p, err := kvevents.NewPublisher(ctx, kvevents.PublisherConfig{Endpoint: h.addrs["a"], Bind: true, Replay: h.replay["a"], Buffer: 100})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			h.pubs["a"] = p
			cfg := h.config("a")
			cfg.KVEvents.Model = tc.model
			h.start(t, cfg)
			h.publishUntil(t, "a", 0, 2, 2)
			pol := h.policy()
			pol.mu.Lock()
			defer pol.mu.Unlock()
			for _, k := range want {
				if pol.held["a"][k] != tc.wantMatch {
					t.Errorf("block key %x held %v, want %v", k, pol.held["a"][k], tc.wantMatch)
				}
			}
		})
	}
}

// firstTokens is storedPayload(0, n/16)'s tokens.
func firstTokens(n int) []int32 {
	toks := make([]int32, n)
	for i := range toks {
		toks[i] = int32(i)
	}
	return toks
}
