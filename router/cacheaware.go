package router

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// CacheAwareConfig configures cache-aware, SGLang's router policy (routers.md §5); defaults
// are what the sglang_router command line gives users.
type CacheAwareConfig struct {
	// CacheThreshold: a match rate above it routes to the matching worker (0.3).
	CacheThreshold float64 `json:"cache_threshold"`
	// BalanceAbsThreshold and BalanceRelThreshold: the pool is imbalanced when max − min load
	// exceeds the first AND max > min × the second (64 and 1.5).
	BalanceAbsThreshold int     `json:"balance_abs_threshold"`
	BalanceRelThreshold float64 `json:"balance_rel_threshold"`
	// EvictionInterval is how often trees are trimmed, in snapshot time (120 seconds).
	EvictionInterval Duration `json:"eviction_interval"`
	// MaxTreeSize is the characters each worker may hold in the tree (2^26).
	MaxTreeSize int `json:"max_tree_size"`
}

// DefaultCacheAwareConfig returns the sglang_router command-line defaults.
func DefaultCacheAwareConfig() CacheAwareConfig {
	return CacheAwareConfig{
		CacheThreshold: 0.3, BalanceAbsThreshold: 64, BalanceRelThreshold: 1.5,
		EvictionInterval: Duration(120 * time.Second), MaxTreeSize: 1 << 26,
	}
}

// Validate checks ranges.
func (c CacheAwareConfig) Validate() error {
	var errs []error
	if !(c.CacheThreshold >= 0 && c.CacheThreshold <= 1) {
		errs = append(errs, fmt.Errorf("cache_threshold %v: want 0..1", c.CacheThreshold))
	}
	if c.BalanceAbsThreshold < 0 {
		errs = append(errs, fmt.Errorf("balance_abs_threshold %d: want >= 0", c.BalanceAbsThreshold))
	}
	if !(c.BalanceRelThreshold >= 1) || math.IsInf(c.BalanceRelThreshold, 0) {
		errs = append(errs, fmt.Errorf("balance_rel_threshold %v: want a finite value >= 1", c.BalanceRelThreshold))
	}
	if c.EvictionInterval <= 0 {
		errs = append(errs, fmt.Errorf("eviction_interval %v: want > 0", c.EvictionInterval.D()))
	}
	if c.MaxTreeSize < 1 {
		errs = append(errs, fmt.Errorf("max_tree_size %d: want > 0", c.MaxTreeSize))
	}
	return errors.Join(errs...)
}

// CacheAware is SGLang's cache-aware policy over a per-model character radix tree. A worker's
// load is the router's in-flight count. Per decision:
//  1. imbalanced (max − min > BalanceAbsThreshold and max > min × BalanceRelThreshold): the
//     least-loaded worker;
//  2. otherwise a match rate above CacheThreshold picks the worker holding the longest match
//     (least loaded among ties), and a lower one the worker with the smallest tree.
//
// Routed inserts the prompt for the chosen worker, whichever branch chose it.
type CacheAware struct {
	cfg    CacheAwareConfig
	mu     sync.Mutex
	rng    *rand.Rand
	trees  treeSet
	cand   []int
	pool   []int
	allow  []bool
	holder []int32
}

var (
	_ Policy   = (*CacheAware)(nil)
	_ Observer = (*CacheAware)(nil)
)

// NewCacheAware returns an SGLang-style cache-aware policy; rng breaks ties.
func NewCacheAware(cfg CacheAwareConfig, rng *rand.Rand) (*CacheAware, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("router: cache-aware: %w", err)
	}
	return &CacheAware{cfg: cfg, rng: rng, trees: newTreeSet()}, nil
}

// Name returns "cache-aware".
func (*CacheAware) Name() string { return "cache-aware" }

// Pick applies SGLang's balance gate, then the cache threshold.
func (p *CacheAware) Pick(req *Request, s *Snapshot) (Decision, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	if p.cand, err = Eligible(p.cand, req, s); err != nil {
		return Decision{}, err
	}
	inflight := func(i int) float64 { return float64(s.Endpoints[i].InFlight) }
	lo, hi := math.MaxInt, math.MinInt
	for _, i := range p.cand {
		lo, hi = min(lo, s.Endpoints[i].InFlight), max(hi, s.Endpoints[i].InFlight)
	}
	if hi-lo > p.cfg.BalanceAbsThreshold && float64(hi) > float64(lo)*p.cfg.BalanceRelThreshold {
		return Decision{Index: pickMin(p.rng, p.cand, inflight), Reason: ReasonImbalance}, nil
	}
	tree := p.trees.get(req.Model)
	p.allow = p.trees.allowMask(p.allow, s, p.cand)
	matched, holders := tree.Match(req.Prompt, p.allow, p.holder[:0])
	reason := ReasonPrefixMatch
	if len(req.Prompt) == 0 || float64(matched)/float64(len(req.Prompt)) <= p.cfg.CacheThreshold {
		reason = ReasonLowMatch
		holders = tree.SmallestTenants(p.allow, holders[:0])
	}
	p.holder = holders
	p.pool = p.trees.endpoints(p.pool[:0], s, p.cand, holders)
	if len(p.pool) == 0 { // cannot happen: holders are allowed, hence eligible
		p.pool = append(p.pool, p.cand...)
	}
	return Decision{Index: pickMin(p.rng, p.pool, inflight), Reason: reason}, nil
}

// Routed inserts the prompt for the chosen worker and trims trees when due.
func (p *CacheAware) Routed(req *Request, endpoint string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if req.Prompt != "" {
		p.trees.get(req.Model).Insert(req.Prompt, p.trees.ids.id(endpoint), now.UnixNano())
	}
	if now.Sub(p.trees.evicted) >= p.cfg.EvictionInterval.D() {
		p.trees.evict(p.cfg.MaxTreeSize, p.cfg.MaxTreeSize)
		p.trees.evicted = now
	}
}

// Finished does nothing: SGLang inserts at routing time only.
func (*CacheAware) Finished(*Request, string, Usage, time.Time) {}

// Removed drops the worker from every tree.
func (p *CacheAware) Removed(endpoint string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trees.remove(endpoint)
}
