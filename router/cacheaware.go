package router

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"kvroute/router/prefix"
)

// Variants of cache-aware: the low-match branch is where SGLang's two routers differ.
const (
	// CacheAwareGateway is sgl-model-gateway at sgl-project/sglang b93974f1
	// (sgl-model-gateway/src/policies/cache_aware.rs): a low match goes to the least-loaded
	// healthy worker.
	CacheAwareGateway = "sgl-model-gateway-b93974f1"
	// CacheAwareRouter is the older sgl-router at sgl-project/sglang 026f853b
	// (sgl-router/src/policies/cache_aware.rs): a low match goes to the smallest tree.
	CacheAwareRouter = "sgl-router-026f853b"
)

// CacheAwareConfig configures cache-aware, SGLang's cache-aware router policy; defaults are
// what the sglang_router command line gives users (router_args.py: 0.3 / 64 / 1.5 / 120 s /
// 2^26), not the Rust struct's (0.5 / 32 / 1.1 / 30 s / 10,000).
type CacheAwareConfig struct {
	// Variant picks the upstream version: "sgl-model-gateway-b93974f1" (default) or
	// "sgl-router-026f853b".
	Variant string `json:"variant"`
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
		Variant: CacheAwareGateway, CacheThreshold: 0.3, BalanceAbsThreshold: 64, BalanceRelThreshold: 1.5,
		EvictionInterval: Duration(120 * time.Second), MaxTreeSize: 1 << 26,
	}
}

// Validate checks ranges.
func (c CacheAwareConfig) Validate() error {
	var errs []error
	if c.Variant != CacheAwareGateway && c.Variant != CacheAwareRouter {
		errs = append(errs, fmt.Errorf("variant %q: want %q or %q", c.Variant, CacheAwareGateway, CacheAwareRouter))
	}
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

// CacheAware is SGLang's cache-aware policy over a per-model character radix tree
// (cache_aware.rs select_worker, both variants). A worker's load is the router's in-flight
// count. Per decision:
//  1. imbalanced — max − min load exceeds BalanceAbsThreshold and max > min ×
//     BalanceRelThreshold: the first least-loaded ready worker in pool order (min_by_key).
//     The gateway's router hands the policy only the available workers
//     (sgl-model-gateway/src/routers/http/router.rs select_worker_for_model, at 033e8423:
//     workers filtered by is_available() before policy.select_worker), so an unready
//     worker's load is in neither the minimum nor the maximum; the older router's loads are
//     those of every worker of the model, ready or not;
//  2. otherwise the match rate is the matched characters (not bytes) over the prompt's
//     characters. Above CacheThreshold: a tenant of the deepest matched node, whatever its
//     load (upstream takes the first in a DashMap's hash order, which we draw at random);
//     at or below: the first least-loaded ready worker (gateway) or a smallest-tree tenant
//     (router). A chosen worker that is not ready gives the first ready worker; the gateway
//     then removes that tenant from the model's tree and inserts nothing (the worker is not in
//     the list it was given: tree.remove_tenant, "Fallback to first healthy worker").
//
// Routed inserts the prompt for the chosen worker, whichever branch chose it, except after
// the gateway's fallback (ReasonStaleTenant).
type CacheAware struct {
	cfg    CacheAwareConfig
	mu     sync.Mutex
	rng    *rand.Rand
	trees  treeSet
	cand   []int
	allow  []bool
	holder []int32
}

var (
	_ Policy   = (*CacheAware)(nil)
	_ Observer = (*CacheAware)(nil)
)

// NewCacheAware returns an SGLang cache-aware policy; rng stands in for DashMap's order.
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
	if p.imbalanced(req, s) { // cache_aware.rs: loads of all workers, healthy or not
		return Decision{Index: p.firstLeastLoaded(s), Reason: ReasonImbalance}, nil
	}
	tree := p.trees.get(req.Model)
	matched, holders := tree.Match(req.Prompt, nil, p.holder[:0])
	p.holder = holders
	if matched > 0 && len(holders) > 0 && charRate(req.Prompt, matched) > p.cfg.CacheThreshold {
		t := holders[p.rng.IntN(len(holders))]
		if i, ok := p.eligible(s, t); ok {
			return Decision{Index: i, Reason: ReasonPrefixMatch}, nil
		}
		if p.cfg.Variant == CacheAwareGateway {
			tree.RemoveTenant(t)
			return Decision{Index: p.cand[0], Reason: ReasonStaleTenant}, nil
		}
		return Decision{Index: p.cand[0], Reason: ReasonPrefixMatch}, nil
	}
	if p.cfg.Variant == CacheAwareGateway {
		return Decision{Index: p.firstLeastLoaded(s), Reason: ReasonLowMatch}, nil
	}
	p.allow = p.modelMask(req, s)
	p.holder = tree.SmallestTenants(p.allow, p.holder[:0])
	if i, ok := p.eligible(s, p.holder[p.rng.IntN(len(p.holder))]); ok {
		return Decision{Index: i, Reason: ReasonLowMatch}, nil
	}
	return Decision{Index: p.cand[0], Reason: ReasonLowMatch}, nil
}

// ReasonStaleTenant labels the gateway's fallback to the first ready worker when the
// matched tenant is not among the available workers.
const ReasonStaleTenant = "stale-tenant"

// imbalanced is SGLang's balance gate over the loads of the workers the policy is given:
// the ready ones (gateway) or every one serving the model (router).
func (p *CacheAware) imbalanced(req *Request, s *Snapshot) bool {
	lo, hi := math.MaxInt, 0
	if p.cfg.Variant == CacheAwareGateway {
		for _, i := range p.cand {
			lo, hi = min(lo, s.Endpoints[i].InFlight), max(hi, s.Endpoints[i].InFlight)
		}
	} else {
		for i := range s.Endpoints {
			if e := &s.Endpoints[i]; servesModel(e, req) {
				lo, hi = min(lo, e.InFlight), max(hi, e.InFlight)
			}
		}
	}
	return hi-lo > p.cfg.BalanceAbsThreshold && float64(hi) > float64(lo)*p.cfg.BalanceRelThreshold
}

// firstLeastLoaded is min_by_key over the ready workers: the first minimum in pool order.
func (p *CacheAware) firstLeastLoaded(s *Snapshot) int {
	best := p.cand[0]
	for _, i := range p.cand[1:] {
		if s.Endpoints[i].InFlight < s.Endpoints[best].InFlight {
			best = i
		}
	}
	return best
}

// eligible returns the eligible endpoint of tenant id t, if it is one.
func (p *CacheAware) eligible(s *Snapshot, t int32) (int, bool) {
	for _, i := range p.cand {
		if id, ok := p.trees.ids.lookup(s.Endpoints[i].ID); ok && id == t {
			return i, true
		}
	}
	return 0, false
}

// modelMask marks the tenant ids of every endpoint serving the model, ready or not: SGLang
// inserts each worker into its model's tree when it joins (init_workers).
func (p *CacheAware) modelMask(req *Request, s *Snapshot) []bool {
	for i := range s.Endpoints {
		p.trees.ids.id(s.Endpoints[i].ID)
	}
	mask := resize(p.allow, p.trees.ids.size())
	clear(mask)
	for i := range s.Endpoints {
		if servesModel(&s.Endpoints[i], req) {
			mask[p.trees.ids.id(s.Endpoints[i].ID)] = true
		}
	}
	return mask
}

// servesModel is Serves whether or not e is ready.
func servesModel(e *EndpointState, req *Request) bool {
	ready := *e
	ready.Ready = true
	return Serves(&ready, req)
}

// charRate is the matched fraction of text in characters (runes), as SGLang counts with
// chars().count(); matched is a byte length at a rune boundary.
func charRate(text string, matched int) float64 {
	if matched == len(text) {
		return 1
	}
	m := prefix.CharCount(text[:matched])
	return float64(m) / float64(m+prefix.CharCount(text[matched:])) // one pass over text
}

// Routed inserts the prompt for the chosen worker and trims trees when due.
func (p *CacheAware) Routed(req *Request, d Decision, endpoint string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if req.Prompt != "" && d.Reason != ReasonStaleTenant {
		p.trees.get(req.Model).Insert(req.Prompt, p.trees.ids.id(endpoint), now.UnixNano())
	}
	if now.Sub(p.trees.evicted) >= p.cfg.EvictionInterval.D() {
		p.trees.evict(p.cfg.MaxTreeSize, p.cfg.MaxTreeSize, false)
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
