package routertest

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"kvroute/router"
)

// Epoch is the virtual start time of fixture snapshots.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Endpoints returns n ready endpoints named "ep-0".."ep-(n-1)" serving model, with no load.
func Endpoints(n int, model string) []router.EndpointState {
	eps := make([]router.EndpointState, n)
	for i := range eps {
		eps[i] = router.EndpointState{ID: fmt.Sprintf("ep-%d", i), Ready: true, Models: []string{model}, UpdatedAt: Epoch}
	}
	return eps
}

// Words returns deterministic pseudo-English text of about chars characters (at least one
// word), drawn from rng; ~4 characters per token, like English under a BPE tokenizer.
func Words(rng *rand.Rand, chars int) string {
	var b strings.Builder
	b.Grow(chars + 16)
	for b.Len() < chars || b.Len() == 0 {
		n := 1 + rng.IntN(6)
		for range n {
			b.WriteByte(byte('a' + rng.IntN(26)))
		}
		b.WriteByte(' ')
	}
	return b.String()
}

// Stream returns n requests for model: prompts drawn from groups that share a long system
// prompt, multi-turn sessions whose prompts grow, several tenants, and some requests with
// chat messages, so that every branch of the prefix, session and fairness policies is used.
func Stream(seed uint64, n int, model string) []router.Request {
	rng := rand.New(rand.NewPCG(seed, 1))
	systems := make([]string, 4)
	for i := range systems {
		systems[i] = Words(rng, 600+rng.IntN(600))
	}
	history := map[int]string{}
	reqs := make([]router.Request, n)
	for i := range reqs {
		g := rng.IntN(len(systems))
		sess := rng.IntN(12)
		question := Words(rng, 40+rng.IntN(200))
		r := router.Request{
			ID:              fmt.Sprintf("r%d", i),
			Model:           model,
			Tenant:          fmt.Sprintf("tenant-%d", rng.IntN(3)),
			InputTokens:     0,
			MaxOutputTokens: 16 + rng.IntN(64),
		}
		switch rng.IntN(4) {
		case 0: // unrelated short prompt, no session
			r.Prompt = question
		case 1: // multi-turn session: the history grows
			r.SessionKey = fmt.Sprintf("s%d", sess)
			history[sess] += question
			r.Prompt = systems[sess%len(systems)] + history[sess]
		default: // shared system prompt, as chat
			r.Messages = []router.Message{{Role: "system", Content: systems[g]}, {Role: "user", Content: question}}
			r.Prompt = systems[g] + " " + question
		}
		if rng.IntN(10) == 0 {
			r.Tenant = ""
		}
		r.InputTokens = len(r.Prompt) / 4
		reqs[i] = r
	}
	return reqs
}

// Clone returns a deep copy of s.
func Clone(s *router.Snapshot) *router.Snapshot {
	c := &router.Snapshot{Now: s.Now, Endpoints: make([]router.EndpointState, len(s.Endpoints))}
	copy(c.Endpoints, s.Endpoints)
	for i := range c.Endpoints {
		c.Endpoints[i].Models = append([]string(nil), s.Endpoints[i].Models...)
	}
	return c
}
