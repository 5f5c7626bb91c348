package router

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"kvroute/router/prefix"
	"kvroute/router/tokenize"
)

// PrefixCacheConfig configures prefix-cache, AIBrix's prefix-cache-aware router (AIBrix v0.7.0,
// vllm-project/aibrix c5465890, pkg/plugins/gateway/algorithms/prefix_cache.go routeOriginal).
// Defaults are the shipped ones (config/ and dist/chart/ manifests).
type PrefixCacheConfig struct {
	// Tokenizer is "character" (UTF-8 bytes) or "tiktoken" (the cl100k_base tokens of the text,
	// 4 bytes a token: pkg/utils/tokenizer/local_tiktoken.go), AIBRIX_PREFIX_CACHE_TOKENIZER_TYPE.
	Tokenizer string `json:"tokenizer"`
	// BlockSize is the hashed block length in tokenizer output bytes, one setting whatever the
	// tokenizer (AIBRIX_PREFIX_CACHE_BLOCK_SIZE: 128 shipped; 0 also means 128).
	BlockSize int `json:"block_size"`
	// BlockNumber is the capacity of the global LRU prefix table, in blocks (200,000).
	BlockNumber int `json:"block_number"`
	// ImbalanceAbsCount: when max − min running requests exceeds it, load wins (16).
	ImbalanceAbsCount int `json:"imbalance_abs_count"`
	// StdDevFactor: a matched endpoint is used only while its running requests are at most
	// mean + StdDevFactor·σ over the ready endpoints (2).
	StdDevFactor float64 `json:"standard_deviation_factor"`
	// EvictionTTL drops table entries not refreshed for this long (20 minutes).
	EvictionTTL Duration `json:"eviction_ttl"`
	// EvictionInterval is how often the TTL sweep runs, in snapshot time (1 second).
	EvictionInterval Duration `json:"eviction_interval"`
}

// DefaultPrefixCacheConfig returns the defaults AIBrix ships (manifests and Helm chart).
func DefaultPrefixCacheConfig() PrefixCacheConfig {
	return PrefixCacheConfig{
		Tokenizer: "character", BlockNumber: 200000, ImbalanceAbsCount: 16, StdDevFactor: 2,
		EvictionTTL: Duration(20 * time.Minute), EvictionInterval: Duration(time.Second),
	}
}

// Validate checks ranges.
func (c PrefixCacheConfig) Validate() error {
	var errs []error
	if c.Tokenizer != "character" && c.Tokenizer != "tiktoken" {
		errs = append(errs, fmt.Errorf("tokenizer %q: want character or tiktoken", c.Tokenizer))
	}
	if c.BlockSize < 0 {
		errs = append(errs, fmt.Errorf("block_size %d: want > 0, or 0 for the tokenizer's default", c.BlockSize))
	}
	if c.BlockNumber < 1 {
		errs = append(errs, fmt.Errorf("block_number %d: want > 0", c.BlockNumber))
	}
	if c.ImbalanceAbsCount < 0 {
		errs = append(errs, fmt.Errorf("imbalance_abs_count %d: want >= 0", c.ImbalanceAbsCount))
	}
	if !(c.StdDevFactor >= 0) || math.IsInf(c.StdDevFactor, 0) {
		errs = append(errs, fmt.Errorf("standard_deviation_factor %v: want a finite value >= 0", c.StdDevFactor))
	}
	if c.EvictionTTL <= 0 || c.EvictionInterval <= 0 {
		errs = append(errs, fmt.Errorf("eviction_ttl %v, eviction_interval %v: want > 0", c.EvictionTTL.D(), c.EvictionInterval.D()))
	}
	return errors.Join(errs...)
}

// PrefixCache is AIBrix's prefix-cache router. Running requests are the router's own in-flight
// counts (AIBrix's realtime counter). Per decision (prefix_cache.go routeOriginal):
//  1. if max − min running over the eligible endpoints exceeds ImbalanceAbsCount, only the
//     endpoints holding the minimum stay candidates (getTargetPodListOnLoadImbalance);
//  2. the prompt is tokenized and cut into chained-hash blocks (no model in the hash); each
//     candidate's match is the number of leading blocks the global table lists it under the
//     request's model (pkg/utils/prefixcacheindexer/hash.go seqSearchPrefix), as a percentage;
//  3. matched candidates are shuffled, sorted by match desc then running asc, and the first
//     whose running ≤ mean + StdDevFactor·σ over all eligible endpoints wins, σ being the
//     sample standard deviation (algorithms/util.go standardDeviation, n − 1);
//  4. otherwise the least-running eligible endpoint wins, random among ties.
//
// Routed records that the chosen endpoint now holds every block of the prompt for the model.
// The table is one LRU of block hashes, each holding a model → endpoints map, so models share
// its capacity and recency (hash.go Block). Entries idle longer than EvictionTTL are swept
// every EvictionInterval, at lookups too, as AIBrix's background sweeper (lrustore
// lru_store.go startEviction) does whatever the traffic.
type PrefixCache struct {
	cfg     PrefixCacheConfig
	tok     tokenize.Tokenizer
	mu      sync.Mutex
	rng     *rand.Rand
	eps     interner           // endpoint IDs
	holders map[string][]int32 // per model: endpoint id → table holder id, or -1
	nHolder int32
	store   *prefix.BlockStore
	swept   time.Time

	cand, pool []int
	mask       []bool
	blocks     []int
	matched    []matchedEndpoint
	hid        []int32 // holder ids of the pool, in pool order
	memo       hashMemo
}

type matchedEndpoint struct{ index, pct, running int }

var (
	_ Policy   = (*PrefixCache)(nil)
	_ Observer = (*PrefixCache)(nil)
)

// NewPrefixCache returns an AIBrix prefix-cache policy; rng shuffles and breaks ties.
func NewPrefixCache(cfg PrefixCacheConfig, rng *rand.Rand) (*PrefixCache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("router: prefix-cache: %w", err)
	}
	tok, err := tokenize.New(cfg.Tokenizer)
	if err != nil {
		return nil, fmt.Errorf("router: prefix-cache: %w", err)
	}
	if cfg.BlockSize == 0 {
		cfg.BlockSize = 128
	}
	store, err := prefix.NewBlockStore(cfg.BlockNumber)
	if err != nil {
		return nil, fmt.Errorf("router: prefix-cache: %w", err)
	}
	return &PrefixCache{cfg: cfg, tok: tok, rng: rng, eps: newInterner(), holders: map[string][]int32{}, store: store}, nil
}

// Name returns "prefix-cache".
func (*PrefixCache) Name() string { return "prefix-cache" }

// Pick applies the imbalance gate, the prefix match and the load filter.
func (p *PrefixCache) Pick(req *Request, s *Snapshot) (Decision, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	if p.cand, err = Eligible(p.cand, req, s); err != nil {
		return Decision{}, err
	}
	reason := ReasonNoMatch
	p.sweep(s.Now)
	p.pool = p.imbalanceFilter(s)
	if len(p.pool) < len(p.cand) {
		reason = ReasonImbalance
	}
	hashes, err := p.hashes(req, s.Seq)
	if err != nil {
		return Decision{}, fmt.Errorf("router: prefix-cache: %w", err)
	}
	if i, ok := p.bestMatch(s, tableModel(req), hashes); ok {
		if reason != ReasonImbalance {
			reason = ReasonPrefixMatch
		}
		return Decision{Index: i, Reason: reason}, nil
	}
	if len(p.matched) > 0 && reason != ReasonImbalance {
		reason = ReasonLoadFiltered
	}
	i := pickMin(p.rng, p.cand, func(i int) float64 { return float64(s.Endpoints[i].InFlight) })
	return Decision{Index: i, Reason: reason}, nil
}

// imbalanceFilter returns the candidates, or only the least-running ones when the spread
// between the most and least running exceeds ImbalanceAbsCount.
func (p *PrefixCache) imbalanceFilter(s *Snapshot) []int {
	lo, hi := math.MaxInt, math.MinInt
	for _, i := range p.cand {
		lo, hi = min(lo, s.Endpoints[i].InFlight), max(hi, s.Endpoints[i].InFlight)
	}
	pool := append(p.pool[:0], p.cand...)
	if hi-lo <= p.cfg.ImbalanceAbsCount {
		return pool
	}
	pool = pool[:0]
	for _, i := range p.cand {
		if s.Endpoints[i].InFlight == lo {
			pool = append(pool, i)
		}
	}
	return pool
}

// bestMatch returns the best matched pool endpoint that passes the load filter.
func (p *PrefixCache) bestMatch(s *Snapshot, model string, hashes []uint64) (int, bool) {
	p.matched = p.matched[:0]
	if len(hashes) == 0 {
		return 0, false
	}
	p.hid = p.holderIDs(p.hid[:0], model, s, p.pool)
	n := int(p.nHolder)
	p.mask, p.blocks = resize(p.mask, n), resize(p.blocks, n)
	clear(p.mask)
	clear(p.blocks)
	for _, h := range p.hid {
		p.mask[h] = true
	}
	p.store.Match(hashes, p.mask, p.blocks)
	for k, i := range p.pool {
		if b := p.blocks[p.hid[k]]; b > 0 {
			p.matched = append(p.matched, matchedEndpoint{i, b * 100 / len(hashes), s.Endpoints[i].InFlight})
		}
	}
	if len(p.matched) == 0 {
		return 0, false
	}
	p.rng.Shuffle(len(p.matched), func(a, b int) { p.matched[a], p.matched[b] = p.matched[b], p.matched[a] })
	slices.SortStableFunc(p.matched, func(a, b matchedEndpoint) int {
		if a.pct != b.pct {
			return b.pct - a.pct
		}
		return a.running - b.running
	})
	mean, sd := meanStd(s, p.cand)
	for _, m := range p.matched {
		if float64(m.running) <= mean+p.cfg.StdDevFactor*sd {
			return m.index, true
		}
	}
	return 0, false
}

// meanStd returns the mean and the sample standard deviation (n − 1; 0 for one endpoint) of
// in-flight counts over cand, as AIBrix's mean and standardDeviation (algorithms/util.go).
func meanStd(s *Snapshot, cand []int) (mean, sd float64) {
	for _, i := range cand {
		mean += float64(s.Endpoints[i].InFlight)
	}
	mean /= float64(len(cand))
	if len(cand) < 2 {
		return mean, 0
	}
	for _, i := range cand {
		d := float64(s.Endpoints[i].InFlight) - mean
		sd += d * d
	}
	return mean, math.Sqrt(sd / float64(len(cand)-1))
}

// tableModel is the model a request's blocks are listed under: the name the client asked for
// (AIBrix's ctx.Model), which is the adapter's for a LoRA request.
func tableModel(req *Request) string {
	if req.Adapter != "" {
		return req.Adapter
	}
	return req.Model
}

// holderIDs appends to dst the table's id of each endpoint of pool under model: one id per
// (model, endpoint) pair stands for the model → pods map of AIBrix's blocks.
func (p *PrefixCache) holderIDs(dst []int32, model string, s *Snapshot, pool []int) []int32 {
	ids := p.holders[model]
	for _, i := range pool {
		var h int32
		ids, h = p.assign(ids, p.eps.id(s.Endpoints[i].ID))
		dst = append(dst, h)
	}
	p.holders[model] = ids
	return dst
}

// holderID is the table's id of endpoint id ep under model.
func (p *PrefixCache) holderID(model string, ep int32) int32 {
	ids, h := p.assign(p.holders[model], ep)
	p.holders[model] = ids
	return h
}

// assign returns ids, grown to hold ep, and ep's holder id, assigning a new one if ep has none.
func (p *PrefixCache) assign(ids []int32, ep int32) ([]int32, int32) {
	for len(ids) <= int(ep) {
		ids = append(ids, -1)
	}
	if ids[ep] < 0 {
		ids[ep] = p.nHolder
		p.nHolder++
	}
	return ids, ids[ep]
}

// sweep drops the entries idle longer than the TTL when the sweep interval has passed.
func (p *PrefixCache) sweep(now time.Time) {
	if now.Sub(p.swept) >= p.cfg.EvictionInterval.D() {
		p.store.EvictExpired(now, p.cfg.EvictionTTL.D())
		p.swept = now
	}
}

// hashes returns the request's chained block hashes, computed once per decision seq.
func (p *PrefixCache) hashes(req *Request, seq uint64) ([]uint64, error) {
	return p.memo.get(seq, func(dst []uint64, buf []byte) ([]uint64, []byte, error) {
		var err error
		buf = buf[:0]
		if buf, err = p.tok.AppendBytes(buf, req.Prompt); err != nil {
			return dst, buf, err
		}
		return prefix.ChainHash(dst[:0], prefix.Seed(), buf, p.cfg.BlockSize, 0, false), buf, nil
	})
}

// Routed records that endpoint holds the request's whole prompt, and runs the TTL sweep when due.
func (p *PrefixCache) Routed(req *Request, d Decision, endpoint string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	hashes, err := p.hashes(req, d.Seq)
	if err != nil || len(hashes) == 0 {
		return
	}
	p.store.Add(hashes, p.holderID(tableModel(req), p.eps.id(endpoint)), now)
	p.sweep(now)
}

// Finished does nothing: the table forgets through LRU and TTL, as AIBrix's does.
func (*PrefixCache) Finished(*Request, string, Usage, time.Time) {}

// Removed drops the endpoint from the table.
func (p *PrefixCache) Removed(endpoint string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ep, ok := p.eps.lookup(endpoint)
	if !ok {
		return
	}
	for _, ids := range p.holders { // every model's entry for the endpoint; order does not matter
		if int(ep) < len(ids) && ids[ep] >= 0 {
			p.store.RemoveEndpoint(ids[ep])
		}
	}
}

// hashMemo keeps the hashes computed for one decision (Snapshot.Seq), so the Pick and Routed
// of a decision hash the prompt once; seq 0 always computes afresh. Callers hold the
// policy's lock.
type hashMemo struct {
	seq    uint64
	hashes []uint64
	buf    []byte
}

func (m *hashMemo) get(seq uint64, compute func(dst []uint64, buf []byte) ([]uint64, []byte, error)) ([]uint64, error) {
	if seq != 0 && m.seq == seq {
		return m.hashes, nil
	}
	h, buf, err := compute(m.hashes, m.buf)
	m.buf = buf
	if err != nil {
		m.seq = 0
		return nil, err
	}
	m.seq, m.hashes = seq, h
	return h, nil
}
