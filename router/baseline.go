package router

import (
	"math/rand/v2"
	"sync"
)

// The common baselines: random, round-robin, least-request, power-of-two and least-kv-cache.
// AIBrix registers all five under these names (vllm-project/aibrix v0.7.0
// pkg/plugins/gateway/algorithms/router.go); their rules are simple
// enough to share this file.

// RandomConfig configures the random policy; it has no parameters.
type RandomConfig struct{}

// DefaultRandomConfig returns the (empty) random configuration.
func DefaultRandomConfig() RandomConfig { return RandomConfig{} }

// Validate reports nothing: the configuration has no fields.
func (RandomConfig) Validate() error { return nil }

// Random picks an eligible endpoint uniformly at random.
type Random struct {
	mu   sync.Mutex
	rng  *rand.Rand
	cand []int
}

var _ Policy = (*Random)(nil)

// NewRandom returns a random policy drawing from rng.
func NewRandom(_ RandomConfig, rng *rand.Rand) (*Random, error) { return &Random{rng: rng}, nil }

// Name returns "random".
func (*Random) Name() string { return "random" }

// Pick returns a uniformly random eligible endpoint.
func (p *Random) Pick(req *Request, s *Snapshot) (Decision, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	if p.cand, err = Eligible(p.cand, req, s); err != nil {
		return Decision{}, err
	}
	return Decision{Index: p.cand[p.rng.IntN(len(p.cand))], Reason: ReasonRandom}, nil
}

// RoundRobinConfig configures the round-robin policy; it has no parameters.
type RoundRobinConfig struct{}

// DefaultRoundRobinConfig returns the (empty) round-robin configuration.
func DefaultRoundRobinConfig() RoundRobinConfig { return RoundRobinConfig{} }

// Validate reports nothing: the configuration has no fields.
func (RoundRobinConfig) Validate() error { return nil }

// RoundRobin cycles through the eligible endpoints in snapshot order.
type RoundRobin struct {
	mu   sync.Mutex
	next uint64
	cand []int
}

var _ Policy = (*RoundRobin)(nil)

// NewRoundRobin returns a round-robin policy; it uses no randomness.
func NewRoundRobin(_ RoundRobinConfig, _ *rand.Rand) (*RoundRobin, error) { return &RoundRobin{}, nil }

// Name returns "round-robin".
func (*RoundRobin) Name() string { return "round-robin" }

// Pick returns the next eligible endpoint in turn.
func (p *RoundRobin) Pick(req *Request, s *Snapshot) (Decision, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	if p.cand, err = Eligible(p.cand, req, s); err != nil {
		return Decision{}, err
	}
	i := p.cand[p.next%uint64(len(p.cand))]
	p.next++
	return Decision{Index: i, Reason: ReasonRoundRobin}, nil
}

// LeastRequestConfig configures the least-request policy; it has no parameters.
type LeastRequestConfig struct{}

// DefaultLeastRequestConfig returns the (empty) least-request configuration.
func DefaultLeastRequestConfig() LeastRequestConfig { return LeastRequestConfig{} }

// Validate reports nothing: the configuration has no fields.
func (LeastRequestConfig) Validate() error { return nil }

// LeastRequest picks the eligible endpoint with the smallest RequestLoad, random among ties.
type LeastRequest struct {
	mu   sync.Mutex
	rng  *rand.Rand
	cand []int
}

var _ Policy = (*LeastRequest)(nil)

// NewLeastRequest returns a least-request policy breaking ties with rng.
func NewLeastRequest(_ LeastRequestConfig, rng *rand.Rand) (*LeastRequest, error) {
	return &LeastRequest{rng: rng}, nil
}

// Name returns "least-request".
func (*LeastRequest) Name() string { return "least-request" }

// Pick returns the least-loaded eligible endpoint.
func (p *LeastRequest) Pick(req *Request, s *Snapshot) (Decision, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	if p.cand, err = Eligible(p.cand, req, s); err != nil {
		return Decision{}, err
	}
	return Decision{Index: leastRequest(p.rng, p.cand, s), Reason: ReasonLeastRequest}, nil
}

// leastRequest returns the candidate with the smallest RequestLoad, random among ties.
func leastRequest(rng *rand.Rand, cand []int, s *Snapshot) int {
	return pickMin(rng, cand, func(i int) float64 { return float64(RequestLoad(&s.Endpoints[i])) })
}

// PowerOfTwoConfig configures the power-of-two policy; it has no parameters.
type PowerOfTwoConfig struct{}

// DefaultPowerOfTwoConfig returns the (empty) power-of-two configuration.
func DefaultPowerOfTwoConfig() PowerOfTwoConfig { return PowerOfTwoConfig{} }

// Validate reports nothing: the configuration has no fields.
func (PowerOfTwoConfig) Validate() error { return nil }

// PowerOfTwo samples two distinct eligible endpoints and keeps the one with the smaller
// RequestLoad (the first sampled on a tie).
type PowerOfTwo struct {
	mu   sync.Mutex
	rng  *rand.Rand
	cand []int
}

var _ Policy = (*PowerOfTwo)(nil)

// NewPowerOfTwo returns a power-of-two-choices policy sampling with rng.
func NewPowerOfTwo(_ PowerOfTwoConfig, rng *rand.Rand) (*PowerOfTwo, error) {
	return &PowerOfTwo{rng: rng}, nil
}

// Name returns "power-of-two".
func (*PowerOfTwo) Name() string { return "power-of-two" }

// Pick returns the less loaded of two random eligible endpoints.
func (p *PowerOfTwo) Pick(req *Request, s *Snapshot) (Decision, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	if p.cand, err = Eligible(p.cand, req, s); err != nil {
		return Decision{}, err
	}
	return Decision{Index: powerOfTwo(p.rng, p.cand, s), Reason: ReasonPowerOfTwo}, nil
}

// powerOfTwo compares two distinct random candidates on RequestLoad.
func powerOfTwo(rng *rand.Rand, cand []int, s *Snapshot) int {
	if len(cand) == 1 {
		return cand[0]
	}
	a := rng.IntN(len(cand))
	b := rng.IntN(len(cand) - 1)
	if b >= a {
		b++
	}
	ia, ib := cand[a], cand[b]
	if RequestLoad(&s.Endpoints[ib]) < RequestLoad(&s.Endpoints[ia]) {
		return ib
	}
	return ia
}

// LeastKVCacheConfig configures the least-kv-cache policy; it has no parameters.
type LeastKVCacheConfig struct{}

// DefaultLeastKVCacheConfig returns the (empty) least-kv-cache configuration.
func DefaultLeastKVCacheConfig() LeastKVCacheConfig { return LeastKVCacheConfig{} }

// Validate reports nothing: the configuration has no fields.
func (LeastKVCacheConfig) Validate() error { return nil }

// LeastKVCache picks the eligible endpoint with the smallest scraped KV-cache usage, random
// among ties (AIBrix least-kv-cache, GPU part only: kvroute models no CPU offload).
type LeastKVCache struct {
	mu   sync.Mutex
	rng  *rand.Rand
	cand []int
}

var _ Policy = (*LeastKVCache)(nil)

// NewLeastKVCache returns a least-kv-cache policy breaking ties with rng.
func NewLeastKVCache(_ LeastKVCacheConfig, rng *rand.Rand) (*LeastKVCache, error) {
	return &LeastKVCache{rng: rng}, nil
}

// Name returns "least-kv-cache".
func (*LeastKVCache) Name() string { return "least-kv-cache" }

// Pick returns the eligible endpoint with the lowest KVUsage.
func (p *LeastKVCache) Pick(req *Request, s *Snapshot) (Decision, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	if p.cand, err = Eligible(p.cand, req, s); err != nil {
		return Decision{}, err
	}
	i := pickMin(p.rng, p.cand, func(i int) float64 { return s.Endpoints[i].KVUsage })
	return Decision{Index: i, Reason: ReasonLeastKVCache}, nil
}
