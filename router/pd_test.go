package router_test

import (
	"errors"
	"testing"
	"time"

	"kvroute/router"
)

// matcher is firstReady that claims to hold held tokens on every endpoint until Routed
// records the request, after which it would claim the whole prompt: a decider told the
// whole prompt was asked too late.
type matcher struct {
	firstReady
	held   int
	routed bool
}

func (m *matcher) MatchedTokens(req *router.Request, _ *router.Snapshot, _ int) int {
	if m.routed {
		return req.InputTokens
	}
	return m.held
}

func (m *matcher) Routed(*router.Request, router.Decision, string, time.Time) { m.routed = true }
func (m *matcher) Finished(*router.Request, string, router.Usage, time.Time)  {}
func (m *matcher) Removed(string)                                             {}

// threshold disaggregates when at least n prompt tokens are not cached on the decode
// endpoint.
type threshold struct{ n int }

func (threshold) Name() string { return "threshold" }
func (d threshold) Disaggregate(req *router.Request, cached int) (bool, string) {
	return req.InputTokens-cached >= d.n, "threshold"
}

func pool(ids ...string) []router.EndpointState {
	eps := make([]router.EndpointState, len(ids))
	for i, id := range ids {
		eps[i] = router.EndpointState{ID: id, Ready: true}
	}
	return eps
}

func TestPDDecide(t *testing.T) {
	tests := []struct {
		name                    string
		prefill                 []string
		held, threshold, prompt int
		wantRemote              bool
		wantReason              string
	}{
		{"uncached prompt prefills remotely", []string{"p0", "p1"}, 0, 16, 100, true, "threshold"},
		{"prefix held on decode prefills locally", []string{"p0"}, 90, 16, 100, false, "threshold"},
		{"threshold reached exactly", []string{"p0"}, 84, 16, 100, true, "threshold"},
		{"no prefill pool prefills locally", nil, 0, 16, 100, false, router.ReasonNoPrefillPool},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dec := &matcher{held: tc.held}
			pd, err := router.NewPD(router.PDPolicy{Prefill: firstReady{}, Decode: dec, Decider: threshold{tc.threshold}},
				pool(tc.prefill...), pool("d0", "d1"), router.LifecycleConfig{MaxRetries: 1})
			if err != nil {
				t.Fatal(err)
			}
			req := &router.Request{ID: "r", InputTokens: tc.prompt, MaxOutputTokens: 50}
			var tk router.PDTicket
			if err := pd.Decide(&tk, req, time.Time{}); err != nil {
				t.Fatal(err)
			}
			if tk.Remote != tc.wantRemote || tk.Reason != tc.wantReason || tk.Cached != tc.held {
				t.Fatalf("remote %v reason %q cached %d; want %v %q %d", tk.Remote, tk.Reason, tk.Cached, tc.wantRemote, tc.wantReason, tc.held)
			}
			d := pd.Decode.Endpoints()[0]
			if d.InFlight != 1 || d.InFlightTokens != 150 {
				t.Errorf("decode in flight %d/%d tokens; want 1/150", d.InFlight, d.InFlightTokens)
			}
			if len(tc.prefill) == 0 {
				return
			}
			p := pd.Prefill.Endpoints()[0]
			want := 0
			if tc.wantRemote {
				want = 1
			}
			if p.InFlight != want || p.InFlightTokens != want*(tc.prompt+1) {
				t.Errorf("prefill in flight %d/%d tokens; want %d/%d", p.InFlight, p.InFlightTokens, want, want*(tc.prompt+1))
			}
			if !tc.wantRemote {
				return
			}
			// The prefill leg fails on p0: it is tried on p1, then ends; the decode claim stays.
			if len(tc.prefill) > 1 {
				if err := tk.Prefill.Retry(time.Time{}); err != nil || tk.Prefill.Endpoint() != "p1" {
					t.Fatalf("retry: %v on %s; want p1", err, tk.Prefill.Endpoint())
				}
				if err := tk.Prefill.Retry(time.Time{}); !errors.Is(err, router.ErrRetriesExhausted) {
					t.Fatalf("second retry: %v; want retries exhausted", err)
				}
			} else {
				tk.Prefill.Finish(router.Usage{PromptTokens: tc.prompt, CompletionTokens: 1}, time.Time{})
			}
			if p := pd.Prefill.Endpoints()[0]; p.InFlight != 0 {
				t.Errorf("prefill in flight %d after its leg ended", p.InFlight)
			}
			if d := pd.Decode.Endpoints()[0]; d.InFlight != 1 {
				t.Errorf("decode in flight %d after the prefill leg ended; want 1", d.InFlight)
			}
		})
	}
}

func TestNewPDNeedsEveryPart(t *testing.T) {
	if _, err := router.NewPD(router.PDPolicy{Prefill: firstReady{}, Decode: firstReady{}}, nil, pool("d"), router.LifecycleConfig{}); err == nil {
		t.Fatal("no decider: want an error")
	}
}

// TestPipelineMatchedTokens checks that a pipeline with no stage keeping a prefix index
// matches 0 tokens (the upstream P/D cases exercise a pipeline's prefix stage).
func TestPipelineMatchedTokens(t *testing.T) {
	plain, err := router.NewPipeline("plain", "r", nil, []router.Weighted{{Scorer: router.QueueScorer{}, Weight: 1}}, nil, router.NewRand(1))
	if err != nil {
		t.Fatal(err)
	}
	s := &router.Snapshot{Seq: 1, Endpoints: pool("a")}
	req := &router.Request{ID: "r", InputTokens: 100, Tokens: make([]int32, 100)}
	if got := plain.MatchedTokens(req, s, 0); got != 0 {
		t.Errorf("a pipeline without a prefix stage matched %d tokens", got)
	}
}
