package router

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"kvroute/router/prefix"
)

// LMetricConfig configures lmetric, LMetric's rule (arXiv 2603.15202) as AIBrix's
// "l-metric-local" routing algorithm has it (vllm-project/aibrix
// pkg/plugins/gateway/algorithms/l_metric_local.go at 2519ad59, the head of the unmerged pull
// request #2571: the file is not on AIBrix's main branch): for each ready pod,
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
//
// The table (pkg/utils/prefixcacheindexer/hash.go at 0871c212, lines 51–53, AddPrefix) hashes
// blocks without the model and keeps one entry per block hash holding a model → pods map, so
// all models share its capacity, and an entry's TTL runs from the last Put by any model. AIBrix
// never forgets a removed pod: its table entries and pending sums stay (the router registers
// no pod-deletion hook), and count again if a pod of that name returns.
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
	hold  map[lmetricHolder]int32 // a (model, pod) pair's holder id in store
	load  pendingLoad
	memo  hashMemo
	swept time.Time

	cand   []int
	mask   []bool
	blocks []int
}

// lmetricHolder is one pod under one model: what the table's model → pods map holds.
type lmetricHolder struct {
	model string
	ep    int32
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
	return &LMetric{cfg: cfg, rng: rng, ids: newInterner(), store: store, hold: map[lmetricHolder]int32{},
		load: newPendingLoad()}, nil
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
		newTokens := total - p.hitTokens(total, nb, p.holder(req, id))
		pend := p.load.at(id)
		return float64(pend.tokens+newTokens) * float64(pend.requests+1)
	})
	return Decision{Index: best, Reason: ReasonLMetric}, nil
}

// lmetricSeed is the table's hash seed: one per table, whatever the model (AIBrix draws it
// once per process).
var lmetricSeed = prefix.Seed()

// hashes returns the prompt's chained full-block hashes.
func (p *LMetric) hashes(req *Request, seq uint64) []uint64 {
	h, _ := p.memo.get(seq, func(dst []uint64, buf []byte) ([]uint64, []byte, error) {
		return prefix.ChainHashString(dst[:0], lmetricSeed, req.Prompt, p.cfg.BlockSize, 0, false), buf, nil
	})
	return h
}

// holder returns the holder id of endpoint id under the request's model: the adapter for a
// LoRA request (AIBrix's ctx.Model is the model the client names), else the model.
func (p *LMetric) holder(req *Request, id int32) int32 {
	k := lmetricHolder{model: req.Model, ep: id}
	if req.Adapter != "" {
		k.model = req.Adapter
	}
	h, ok := p.hold[k]
	if !ok {
		h = int32(len(p.hold))
		p.hold[k] = h
	}
	return h
}

// match fills p.blocks[holder] with the leading blocks each candidate holds under the
// request's model and returns the request's block count.
func (p *LMetric) match(req *Request, s *Snapshot, cand []int) int {
	for _, i := range cand {
		p.holder(req, p.ids.id(s.Endpoints[i].ID))
	}
	n := len(p.hold)
	p.mask, p.blocks = resize(p.mask, n), resize(p.blocks, n)
	clear(p.mask)
	for _, i := range cand {
		p.mask[p.holder(req, p.ids.id(s.Endpoints[i].ID))] = true
	}
	hashes := p.hashes(req, s.Seq)
	p.store.Match(hashes, p.mask, p.blocks)
	return len(hashes)
}

// hitTokens is AIBrix's integer hit estimate for holder h after match.
func (p *LMetric) hitTokens(total int64, nb int, h int32) int64 {
	if nb == 0 || int(h) >= len(p.blocks) {
		return 0
	}
	pct := int64(p.blocks[h] * 100 / nb)
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
	h := p.holder(req, id)
	p.sweep(now)
	hashes := p.hashes(req, d.Seq)
	p.blocks = resize(p.blocks, len(p.hold))
	p.mask = resize(p.mask, len(p.hold))
	clear(p.mask)
	p.mask[h] = true
	p.store.Match(hashes, p.mask, p.blocks)
	total := int64(len(req.Prompt))
	p.load.add(req.ID, id, total-p.hitTokens(total, len(hashes), h))
	if len(hashes) > 0 {
		p.store.Add(hashes, h, now)
	}
}

// Finished releases the request's pending tokens and request.
func (p *LMetric) Finished(req *Request, _ string, _ Usage, _ time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.load.done(req.ID)
}

// Removed does nothing: AIBrix keeps a removed pod's table entries and pending sums.
func (*LMetric) Removed(string) {}

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

// ReasonLMetric labels lmetric's decisions.
const ReasonLMetric = "lmetric"
