package router

import (
	"math/rand/v2"
	"sync"
)

// SessionAffinityConfig configures the session-affinity policy; it has no parameters.
type SessionAffinityConfig struct{}

// DefaultSessionAffinityConfig returns the (empty) session-affinity configuration.
func DefaultSessionAffinityConfig() SessionAffinityConfig { return SessionAffinityConfig{} }

// Validate reports nothing: the configuration has no fields.
func (SessionAffinityConfig) Validate() error { return nil }

// SessionAffinity sends every request of a session to the same endpoint by rendezvous
// (highest-random-weight) hashing of Request.SessionKey over the eligible endpoint IDs, the
// role AIBrix's x-aibrix-session-key plays (vllm-project/aibrix v0.7.0
// pkg/plugins/gateway/algorithms/simple_session_affinity.go; the hashing is kvroute's own).
// When an endpoint leaves, only its sessions move. Requests without a session key go to the
// least-request endpoint.
type SessionAffinity struct {
	mu   sync.Mutex
	rng  *rand.Rand
	cand []int
}

var _ Policy = (*SessionAffinity)(nil)

// NewSessionAffinity returns a session-affinity policy; rng breaks least-request ties.
func NewSessionAffinity(_ SessionAffinityConfig, rng *rand.Rand) (*SessionAffinity, error) {
	return &SessionAffinity{rng: rng}, nil
}

// Name returns "session-affinity".
func (*SessionAffinity) Name() string { return "session-affinity" }

// Pick returns the rendezvous winner for the request's session.
func (p *SessionAffinity) Pick(req *Request, s *Snapshot) (Decision, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	if p.cand, err = Eligible(p.cand, req, s); err != nil {
		return Decision{}, err
	}
	if req.SessionKey == "" {
		return Decision{Index: leastRequest(p.rng, p.cand, s), Reason: ReasonNoSession}, nil
	}
	key := fnv64(fnvOffset, req.SessionKey)
	best, bestW := -1, uint64(0)
	for _, i := range p.cand {
		w := mix64(fnv64(key, s.Endpoints[i].ID))
		if best < 0 || w > bestW {
			best, bestW = i, w
		}
	}
	return Decision{Index: best, Reason: ReasonSessionHash}, nil
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// fnv64 continues an FNV-1a hash h over s.
func fnv64(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// mix64 is the splitmix64 finalizer: it spreads FNV's weak low bits over the whole word.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
