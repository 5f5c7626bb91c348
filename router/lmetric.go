package router

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"kvroute/router/prefix"
)

// LMetricConfig configures lmetric, LMetric's rule (arXiv 2603.15202) as AIBrix ships it in
// the "l-metric-local" routing algorithm (vllm-project/aibrix
// pkg/plugins/gateway/algorithms/l_metric_local.go at 2519ad59): for each ready pod,
// score = (pending tokens + the request's new tokens) × (pending requests + 1), lowest wins,
// ties uniformly at random (ScoreAll and Route, lines 137–216).
//
// "New tokens" are the prompt's tokens minus the hit the shared AIBrix prefix table reports
// for that pod: hit = total × match% / 100 in integer arithmetic, match% =
// matched blocks × 100 / blocks (ScoreAll lines 147–152). The pending sums are the router's
// own: a routed request adds its new tokens on its pod and one request (AddRequestCount),
// and removes both when it finishes (removeRequest). The default tokenizer is AIBrix's
// "character" one, so tokens are the bytes of the flattened prompt; the prefix table is the
// one prefix-cache uses, with AIBrix's shipped block size (128), capacity (200,000 blocks)
// and 20-minute TTL swept every second.
type LMetricConfig struct {
	// BlockSize is the prefix table's block size in tokenizer tokens (bytes) (128).
	BlockSize int `json:"block_size"`
	// BlockNumber is the prefix table's capacity in blocks (200,000).
	BlockNumber int `json:"block_number"`
	// EvictionTTL and EvictionInterval are the table's TTL (20 min) and sweep period (1 s).
	EvictionTTL      Duration `json:"eviction_ttl"`
	EvictionInterval Duration `json:"eviction_interval"`
}

// DefaultLMetricConfig returns AIBrix's shipped settings.
func DefaultLMetricConfig() LMetricConfig {
	return LMetricConfig{BlockSize: 128, BlockNumber: 200000,
		EvictionTTL: Duration(20 * time.Minute), EvictionInterval: Duration(time.Second)}
}

// Validate checks ranges.
func (c LMetricConfig) Validate() error {
	var errs []error
	if c.BlockSize < 1 || c.BlockNumber < 1 {
		errs = append(errs, fmt.Errorf("block_size %d, block_number %d: want > 0", c.BlockSize, c.BlockNumber))
	}
	if c.EvictionTTL <= 0 || c.EvictionInterval <= 0 {
		errs = append(errs, fmt.Errorf("eviction_ttl %v, eviction_interval %v: want > 0", c.EvictionTTL.D(), c.EvictionInterval.D()))
	}
	return errors.Join(errs...)
}

// LMetric is the lmetric policy (see LMetricConfig).
type LMetric struct {
	cfg   LMetricConfig
	mu    sync.Mutex
	rng   *rand.Rand
	ids   interner
	store *prefix.BlockStore
	load  pendingLoad
	memo  hashMemo
	swept time.Time

	cand   []int
	mask   []bool
	blocks []int
}

var (
	_ Policy   = (*LMetric)(nil)
	_ Observer = (*LMetric)(nil)
)

// NewLMetric returns an lmetric policy; rng breaks ties.
func NewLMetric(cfg LMetricConfig, rng *rand.Rand) (*LMetric, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("router: lmetric: %w", err)
	}
	store, err := prefix.NewBlockStore(cfg.BlockNumber)
	if err != nil {
		return nil, fmt.Errorf("router: lmetric: %w", err)
	}
	return &LMetric{cfg: cfg, rng: rng, ids: newInterner(), store: store, load: newPendingLoad()}, nil
}

// Name returns "lmetric".
func (*LMetric) Name() string { return "lmetric" }

// Pick returns the eligible endpoint with the smallest L-metric score.
func (p *LMetric) Pick(req *Request, s *Snapshot) (Decision, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	if p.cand, err = Eligible(p.cand, req, s); err != nil {
		return Decision{}, err
	}
	p.sweep(s.Now)
	nb := p.match(req, s, p.cand)
	total := int64(len(req.Prompt))
	best := pickMin(p.rng, p.cand, func(i int) float64 {
		id := p.ids.id(s.Endpoints[i].ID)
		newTokens := total - p.hitTokens(total, nb, id)
		pend := p.load.at(id)
		return float64(pend.tokens+newTokens) * float64(pend.requests+1)
	})
	return Decision{Index: best, Reason: ReasonLMetric}, nil
}

// hashes returns the prompt's chained full-block hashes, seeded by model and adapter as the
// AIBrix table keys blocks per model.
func (p *LMetric) hashes(req *Request, seq uint64) []uint64 {
	h, _ := p.memo.get(seq, func(dst []uint64, buf []byte) ([]uint64, []byte, error) {
		return prefix.ChainHashString(dst[:0], prefix.Seed(req.Model, req.Adapter), req.Prompt, p.cfg.BlockSize, 0, false), buf, nil
	})
	return h
}

// match fills p.blocks[id] with the leading blocks each candidate holds and returns the
// request's block count.
func (p *LMetric) match(req *Request, s *Snapshot, cand []int) int {
	for _, i := range cand {
		p.ids.id(s.Endpoints[i].ID)
	}
	n := p.ids.size()
	p.mask, p.blocks = resize(p.mask, n), resize(p.blocks, n)
	clear(p.mask)
	for _, i := range cand {
		p.mask[p.ids.id(s.Endpoints[i].ID)] = true
	}
	hashes := p.hashes(req, s.Seq)
	p.store.Match(hashes, p.mask, p.blocks)
	return len(hashes)
}

// hitTokens is AIBrix's integer hit estimate for endpoint id after match.
func (p *LMetric) hitTokens(total int64, nb int, id int32) int64 {
	if nb == 0 || int(id) >= len(p.blocks) {
		return 0
	}
	pct := int64(p.blocks[id] * 100 / nb)
	return total * pct / 100
}

// sweep drops blocks older than the TTL once per EvictionInterval, as AIBrix's sweeper does.
func (p *LMetric) sweep(now time.Time) {
	if now.Sub(p.swept) >= p.cfg.EvictionInterval.D() {
		p.store.EvictExpired(now, p.cfg.EvictionTTL.D())
		p.swept = now
	}
}

// Routed charges the request's new tokens (its prompt minus the hit the table reports for
// endpoint before this request) and one request to endpoint, then records its blocks there.
func (p *LMetric) Routed(req *Request, d Decision, endpoint string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := p.ids.id(endpoint)
	p.sweep(now)
	hashes := p.hashes(req, d.Seq)
	p.blocks = resize(p.blocks, p.ids.size())
	p.mask = resize(p.mask, p.ids.size())
	clear(p.mask)
	p.mask[id] = true
	p.store.Match(hashes, p.mask, p.blocks)
	total := int64(len(req.Prompt))
	p.load.add(req.ID, id, total-p.hitTokens(total, len(hashes), id))
	if len(hashes) > 0 {
		p.store.Add(hashes, id, now)
	}
}

// Finished releases the request's pending tokens and request.
func (p *LMetric) Finished(req *Request, _ string, _ Usage, _ time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.load.done(req.ID)
}

// Removed forgets the endpoint's blocks and pending load.
func (p *LMetric) Removed(endpoint string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id, ok := p.ids.lookup(endpoint); ok {
		p.store.RemoveEndpoint(id)
		p.load.drop(id)
	}
}

// pendingLoad is a router's own per-endpoint sum of what its in-flight requests still cost,
// keyed by request ID so that Finished is idempotent.
type pendingLoad struct {
	reqs map[string]pendingReq
	eps  []pendingSum
}

type pendingReq struct {
	ep     int32
	tokens int64
}

type pendingSum struct{ tokens, requests int64 }

func newPendingLoad() pendingLoad { return pendingLoad{reqs: map[string]pendingReq{}} }

// at returns endpoint id's sums.
func (l *pendingLoad) at(id int32) pendingSum {
	if int(id) < len(l.eps) {
		return l.eps[id]
	}
	return pendingSum{}
}

// add charges request reqID's tokens and one request to id; a second add of the same ID
// moves it.
func (l *pendingLoad) add(reqID string, id int32, tokens int64) {
	l.done(reqID)
	for len(l.eps) <= int(id) {
		l.eps = append(l.eps, pendingSum{})
	}
	l.reqs[reqID] = pendingReq{id, tokens}
	l.eps[id].tokens += tokens
	l.eps[id].requests++
}

// done releases reqID's charge, flooring the sums at zero as AIBrix's removeRequest does.
func (l *pendingLoad) done(reqID string) {
	r, ok := l.reqs[reqID]
	if !ok {
		return
	}
	delete(l.reqs, reqID)
	e := &l.eps[r.ep]
	e.tokens = max(e.tokens-r.tokens, 0)
	e.requests = max(e.requests-1, 0)
}

// drop forgets endpoint id's requests.
func (l *pendingLoad) drop(id int32) {
	for k, r := range l.reqs { // deleting while ranging is safe; the order does not matter
		if r.ep == id {
			delete(l.reqs, k)
		}
	}
	if int(id) < len(l.eps) {
		l.eps[id] = pendingSum{}
	}
}

// ReasonLMetric labels lmetric's decisions.
const ReasonLMetric = "lmetric"
