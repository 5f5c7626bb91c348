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

// Variants of prefix-tree.
const (
	// PrefixTreeRayLoRA is the newest Ray Serve PrefixCacheAffinityRouter read (ray-project/ray
	// master, 2026: prefix_aware_router.py _prefix_tree_key_prefix, _prefix_match_best_replicas,
	// _get_spill_replicas): PrefixTreeRay, plus a multiplexed (LoRA) request's text keyed under
	// "\x00adapter\x00" with only the text past that key counted in the match rate, the smallest
	// tenants taken among the candidates, and a LoRA request spilled by load when its chosen
	// replicas are more than multiplex_spill_threshold (64) requests busier than the least busy.
	PrefixTreeRayLoRA = "ray-lora-keys"
	// PrefixTreeRay is Ray Serve's PrefixCacheAffinityRouter since ray PR #59390 (2025-12-11;
	// read at ray-project/ray 06c16f2f, python/ray/llm/_internal/serve/routing_policies/
	// prefix_aware/prefix_aware_router.py initialize_state): imbalanced_threshold defaults to ∞.
	PrefixTreeRay = "ray-since-pr59390"
	// PrefixTreeRayOld is the router before that PR (read at ray-project/ray ef82d1d9, the same
	// file): imbalanced_threshold 10.
	PrefixTreeRayOld = "ray-before-pr59390"
)

// PrefixTreeConfig configures prefix-tree, Ray Serve's PrefixCacheAffinityRouter
// (initialize_state defaults).
type PrefixTreeConfig struct {
	// Variant picks the upstream version: "ray-lora-keys" (default), "ray-since-pr59390" or
	// "ray-before-pr59390".
	Variant string `json:"variant"`
	// ImbalancedThreshold: when the largest minus the smallest queue exceeds it, power of two.
	// Unset, the variant's default: ∞ (never), or 10 before ray PR #59390.
	ImbalancedThreshold *float64 `json:"imbalanced_threshold"`
	// MatchRateThreshold: a match below this fraction of the prompt goes to the replicas with
	// the smallest trees instead (0.1).
	MatchRateThreshold float64 `json:"match_rate_threshold"`
	// DoEviction enables trimming each replica's tree (false, as in Ray).
	DoEviction bool `json:"do_eviction"`
	// EvictionThresholdChars and EvictionTargetChars: a replica holding more than the
	// threshold is trimmed, least recently used first, to the target (400,000 → 360,000).
	EvictionThresholdChars int `json:"eviction_threshold_chars"`
	EvictionTargetChars    int `json:"eviction_target_chars"`
	// EvictionInterval is how often eviction runs, in snapshot time (10 seconds).
	EvictionInterval Duration `json:"eviction_interval"`
	// MultiplexSpillThreshold ("ray-lora-keys" only): a LoRA request whose chosen replicas'
	// smallest queue exceeds the least busy candidate's by more than this goes, by queue, to the
	// candidates within it of the least busy (64).
	MultiplexSpillThreshold float64 `json:"multiplex_spill_threshold"`
	// MaxOngoingRequests is each replica's max_ongoing_requests: a replica whose queue has
	// reached it is left out of the final choice (Ray LLM's default, 10^9:
	// ray/llm/_internal/serve/constants.py DEFAULT_MAX_ONGOING_REQUESTS).
	MaxOngoingRequests int `json:"max_ongoing_requests"`
}

// rayQueueCacheTTL is how long Ray Serve keeps a replica's reported queue length
// (RAY_SERVE_QUEUE_LENGTH_CACHE_TIMEOUT_S, 10 s); older, it counts as none.
const rayQueueCacheTTL = 10 * time.Second

// DefaultPrefixTreeConfig returns Ray's defaults (the newest version's).
func DefaultPrefixTreeConfig() PrefixTreeConfig {
	return PrefixTreeConfig{
		Variant: PrefixTreeRayLoRA, MatchRateThreshold: 0.1, MultiplexSpillThreshold: 64, MaxOngoingRequests: 1_000_000_000,
		EvictionThresholdChars: 400000, EvictionTargetChars: 360000, EvictionInterval: Duration(10 * time.Second),
	}
}

// imbalance returns the imbalance threshold in force.
func (c PrefixTreeConfig) imbalance() float64 {
	switch {
	case c.ImbalancedThreshold != nil:
		return *c.ImbalancedThreshold
	case c.Variant == PrefixTreeRayOld:
		return 10
	}
	return math.Inf(1)
}

// Validate checks ranges and that the eviction target is below the threshold.
func (c PrefixTreeConfig) Validate() error {
	var errs []error
	if c.Variant != PrefixTreeRayLoRA && c.Variant != PrefixTreeRay && c.Variant != PrefixTreeRayOld {
		errs = append(errs, fmt.Errorf("variant %q: want %q, %q or %q", c.Variant, PrefixTreeRayLoRA, PrefixTreeRay, PrefixTreeRayOld))
	}
	if !(c.MultiplexSpillThreshold >= 0) {
		errs = append(errs, fmt.Errorf("multiplex_spill_threshold %v: want >= 0", c.MultiplexSpillThreshold))
	}
	if t := c.ImbalancedThreshold; t != nil && !(*t >= 0) {
		errs = append(errs, fmt.Errorf("imbalanced_threshold %v: want >= 0", *t))
	}
	if !(c.MatchRateThreshold >= 0 && c.MatchRateThreshold <= 1) {
		errs = append(errs, fmt.Errorf("match_rate_threshold %v: want 0..1", c.MatchRateThreshold))
	}
	if c.EvictionTargetChars < 0 || c.EvictionThresholdChars < c.EvictionTargetChars {
		errs = append(errs, fmt.Errorf("eviction_target_chars %d, eviction_threshold_chars %d: want 0 <= target <= threshold",
			c.EvictionTargetChars, c.EvictionThresholdChars))
	}
	if c.EvictionInterval <= 0 {
		errs = append(errs, fmt.Errorf("eviction_interval %v: want > 0", c.EvictionInterval.D()))
	}
	if c.MaxOngoingRequests < 1 {
		errs = append(errs, fmt.Errorf("max_ongoing_requests %d: want > 0", c.MaxOngoingRequests))
	}
	return errors.Join(errs...)
}

// PrefixTree is Ray Serve's prefix-cache affinity router over a character radix tree of the
// prompts sent to each replica (one tree per model, as Ray keeps one per deployment). The text is
// the prompt, or the chat messages' contents joined with no separator
// (_normalize_prompt_to_string); by default a LoRA request's text is keyed under its adapter. A replica's
// queue is the larger of the router's in-flight count and the scraped running+waiting count.
// Per decision (_prefix_match_best_replicas, choose_replicas):
//  1. queue spread > the imbalance threshold: power of two choices;
//  2. otherwise match the text over the candidates: a match rate (in characters) ≥
//     MatchRateThreshold keeps the replicas holding the longest match; a lower one, an empty
//     text included, keeps the replicas with the smallest trees;
//  3. the kept replicas whose queue is below MaxOngoingRequests compete
//     (select_from_candidate_replicas: queue_len < max_ongoing_requests); the one with the
//     smallest queue wins, ties at random: the kept replicas come from the tree actor's sets,
//     whose order Python does not define. When every kept replica is full Ray waits and asks
//     again; kvroute, which cannot hold a request, takes the full ones then.
//
// Routed inserts the text for the chosen replica.
type PrefixTree struct {
	cfg    PrefixTreeConfig
	mu     sync.Mutex
	rng    *rand.Rand
	trees  treeSet
	cand   []int
	pool   []int
	allow  []bool
	holder []int32
	text   textMemo
}

var (
	_ Policy   = (*PrefixTree)(nil)
	_ Observer = (*PrefixTree)(nil)
)

// NewPrefixTree returns a Ray prefix-tree policy; rng drives power of two.
func NewPrefixTree(cfg PrefixTreeConfig, rng *rand.Rand) (*PrefixTree, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("router: prefix-tree: %w", err)
	}
	return &PrefixTree{cfg: cfg, rng: rng, trees: newTreeSet(), text: textMemo{adapterKeys: cfg.Variant == PrefixTreeRayLoRA}}, nil
}

// Name returns "prefix-tree".
func (*PrefixTree) Name() string { return "prefix-tree" }

// queueLen is a Ray replica's queue as best known: the router's own count or the scrape.
func queueLen(e *EndpointState) int { return max(e.InFlight, e.Running+e.Waiting) }

// Pick applies Ray's three tiers.
func (p *PrefixTree) Pick(req *Request, s *Snapshot) (Decision, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	if p.cand, err = Eligible(p.cand, req, s); err != nil {
		return Decision{}, err
	}
	lo, hi := math.MaxInt, 0
	for _, i := range p.cand {
		q := queueLen(&s.Endpoints[i])
		lo, hi = min(lo, q), max(hi, q)
	}
	if float64(hi-lo) > p.cfg.imbalance() {
		return p.powerOfTwo(s, ReasonImbalance), nil
	}
	key := p.text.get(req, s.Seq)
	tree := p.trees.get(req.Model)
	p.allow = p.trees.allowMask(p.allow, s, p.cand)
	matched, holders := tree.Match(key, p.allow, p.holder[:0])
	reason := ReasonPrefixMatch
	if rayMatchRate(key, p.text.prefix, matched) < p.cfg.MatchRateThreshold {
		reason = ReasonLowMatch
		holders = tree.SmallestTenants(p.allow, holders[:0])
	}
	p.holder = holders
	p.pool = p.trees.endpoints(p.pool[:0], s, p.cand, holders)
	if len(p.pool) == 0 { // cannot happen: holders are allowed, hence eligible
		p.pool = append(p.pool, p.cand...)
	}
	if p.text.prefix > 0 {
		p.pool = p.spill(s, p.pool)
	}
	return Decision{Index: p.shortestQueue(s), Reason: reason}, nil
}

// shortestQueue returns the replica of p.pool below MaxOngoingRequests (all of them when none
// is) with the smallest queue, ties at random.
func (p *PrefixTree) shortestQueue(s *Snapshot) int {
	open := 0
	for _, i := range p.pool {
		if queueLen(&s.Endpoints[i]) < p.cfg.MaxOngoingRequests {
			open++
		}
	}
	best, ties := -1, 0
	for _, i := range p.pool {
		q := queueLen(&s.Endpoints[i])
		switch {
		case open > 0 && q >= p.cfg.MaxOngoingRequests:
		case best < 0 || q < queueLen(&s.Endpoints[best]):
			best, ties = i, 1
		case q == queueLen(&s.Endpoints[best]):
			if ties++; p.rng.IntN(ties) == 0 {
				best = i
			}
		}
	}
	return best
}

// rayMatchRate is the newest Ray's match rate: the characters matched past the key prefix
// (prefix bytes of key) over the text's characters; 0 for an empty text. Before the key
// prefix, the same with prefix 0.
func rayMatchRate(key string, prefix, matched int) float64 {
	text := key[prefix:]
	if text == "" || matched <= prefix {
		return 0
	}
	return charRate(text, matched-prefix)
}

// spill is Ray's _get_spill_replicas for a LoRA request: when the chosen replicas' smallest
// cached queue is more than MultiplexSpillThreshold above the least busy of the spill pool,
// the pool's replicas within the threshold of the least busy replace them. The pool is the
// candidates plus the replicas with the fewest multiplexed models loaded; a kvroute endpoint
// serves a fixed list of models (an empty list serves any), so the fewest-models replicas that
// may take the request are among the candidates already. Loads are the cached queue lengths
// (_get_cached_queue_len): the replica's reported queue, 0 once older than 10 s.
func (p *PrefixTree) spill(s *Snapshot, chosen []int) []int {
	chosenLoad, least := math.MaxInt, math.MaxInt
	for _, i := range chosen {
		chosenLoad = min(chosenLoad, cachedQueueLen(s, i))
	}
	for _, i := range p.cand {
		least = min(least, cachedQueueLen(s, i))
	}
	if float64(chosenLoad-least) <= p.cfg.MultiplexSpillThreshold {
		return chosen
	}
	chosen = chosen[:0]
	for _, i := range p.cand {
		if float64(cachedQueueLen(s, i)-least) <= p.cfg.MultiplexSpillThreshold {
			chosen = append(chosen, i)
		}
	}
	return chosen
}

// cachedQueueLen is Ray's cached queue length of endpoint i: its scraped running + waiting
// requests while the scrape is at most 10 s old, else 0.
func cachedQueueLen(s *Snapshot, i int) int {
	e := &s.Endpoints[i]
	if e.UpdatedAt.IsZero() || s.Now.Sub(e.UpdatedAt) > rayQueueCacheTTL {
		return 0
	}
	return e.Running + e.Waiting
}

// powerOfTwo compares two random candidates on their queues. A replica whose queue has reached
// MaxOngoingRequests cannot be chosen: when both of a pair are full, Ray backs off and draws
// another pair (select_from_candidate_replicas returns none), so pairs are drawn until one
// holds a replica below it. When every candidate is full, the shorter queue of the first pair.
func (p *PrefixTree) powerOfTwo(s *Snapshot, reason string) Decision {
	if len(p.cand) == 1 {
		return Decision{Index: p.cand[0], Reason: reason}
	}
	full := func(i int) bool { return queueLen(&s.Endpoints[i]) >= p.cfg.MaxOngoingRequests }
	open := 0
	for _, i := range p.cand {
		if !full(i) {
			open++
		}
	}
	for {
		a := p.rng.IntN(len(p.cand))
		b := p.rng.IntN(len(p.cand) - 1)
		if b >= a {
			b++
		}
		i, j := p.cand[a], p.cand[b]
		switch {
		case open > 0 && full(i) && full(j):
			continue
		case open > 0 && full(i):
			i = j
		case open > 0 && full(j):
		case queueLen(&s.Endpoints[j]) < queueLen(&s.Endpoints[i]):
			i = j
		}
		return Decision{Index: i, Reason: reason}
	}
}

// Routed inserts the prompt into the chosen replica's tree and runs eviction when due.
func (p *PrefixTree) Routed(req *Request, d Decision, endpoint string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if key := p.text.get(req, d.Seq); key != "" {
		p.trees.get(req.Model).Insert(key, p.trees.ids.id(endpoint), now.UnixNano())
	}
	if p.cfg.DoEviction && now.Sub(p.trees.evicted) >= p.cfg.EvictionInterval.D() {
		p.trees.evict(p.cfg.EvictionThresholdChars, p.cfg.EvictionTargetChars, true)
		p.trees.evicted = now
	}
}

// Finished does nothing: Ray inserts prompts only.
func (*PrefixTree) Finished(*Request, string, Usage, time.Time) {}

// Removed drops the replica from every tree.
func (p *PrefixTree) Removed(endpoint string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trees.remove(endpoint)
}

// treeSet is one radix tree per model, with tenants interned across them.
type treeSet struct {
	ids     interner
	byModel map[string]*prefix.Tree
	evicted time.Time
}

func newTreeSet() treeSet { return treeSet{ids: newInterner(), byModel: make(map[string]*prefix.Tree)} }

func (t *treeSet) get(model string) *prefix.Tree {
	tr := t.byModel[model]
	if tr == nil {
		tr = prefix.NewTree()
		t.byModel[model] = tr
	}
	return tr
}

// allowMask marks the tenant ids of the candidates.
func (t *treeSet) allowMask(mask []bool, s *Snapshot, cand []int) []bool {
	for _, i := range cand {
		t.ids.id(s.Endpoints[i].ID)
	}
	mask = resize(mask, t.ids.size())
	clear(mask)
	for _, i := range cand {
		mask[t.ids.id(s.Endpoints[i].ID)] = true
	}
	return mask
}

// endpoints appends the candidates whose tenant id is in ids (ascending).
func (t *treeSet) endpoints(dst []int, s *Snapshot, cand []int, ids []int32) []int {
	for _, i := range cand {
		id := t.ids.id(s.Endpoints[i].ID)
		for _, h := range ids {
			if h == id {
				dst = append(dst, i)
				break
			}
		}
	}
	return dst
}

// evict trims every tenant above threshold down to target, in every tree, models in order.
func (t *treeSet) evict(threshold, target int, groups bool) {
	for _, model := range sortedKeys(t.byModel) {
		tr := t.byModel[model]
		for id := range int32(t.ids.size()) {
			switch {
			case tr.TenantSize(id) <= threshold:
			case groups:
				tr.EvictTenantGroups(id, target)
			default:
				tr.EvictTenant(id, target)
			}
		}
	}
}

func (t *treeSet) remove(endpoint string) {
	if id, ok := t.ids.lookup(endpoint); ok {
		for _, model := range sortedKeys(t.byModel) {
			t.byModel[model].RemoveTenant(id)
		}
	}
}
